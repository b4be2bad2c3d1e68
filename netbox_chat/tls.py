"""One TLS context for every HTTP client the process makes.

httpx builds a TLS context for each client or transport it makes, loading the
certificate authorities' bundle each time, whether or not the URL is https:
about 20 ms of CPU each (httpx PR #3053 proposed caching it; its maintainers
left that to callers, since a shared context must never be changed). An
`ask` made four of them, and `eval` four per question. This context is made
once, on first use, exactly as httpx makes its default one (SSL_CERT_FILE,
else SSL_CERT_DIR, else certifi's bundle), and nothing changes it after:
clients and threads share one unchanged context safely.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def context() -> ssl.SSLContext:
    """The process's TLS context, for httpx's `verify=`."""
    return httpx.create_ssl_context()
