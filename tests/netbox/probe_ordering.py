"""Drop from a filter table the ordering terms NetBox lists but cannot sort by.

DRF's OrderingFilter (tests/netbox/netbox_ordering_fields.py) accepts every serializer
field backed by a model field, but NetBox 4.7.3 answers 500 for some of them: generic
relations (``assigned_object`` on IP addresses, ``changed_object`` on changes), JSON
views (``postchange_data_clean``) and counts the list query does not annotate
(``device_count`` on sites). Each term is tried once with ``?ordering=<term>&limit=1``;
those that do not answer 200 are removed, so the tools refuse them before sending.

    NETBOX_URL=... NETBOX_TOKEN=... python tests/netbox/probe_ordering.py FILTERS_JSON
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx

from netbox_chat.netbox.schema import dumps_table


def main(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        table = json.load(f)
    token = os.environ["NETBOX_TOKEN"]
    scheme = "Bearer" if token.startswith("nbt_") else "Token"
    client = httpx.Client(
        base_url=os.environ["NETBOX_URL"],
        headers={"Authorization": f"{scheme} {token}"},
        timeout=60,
    )
    jobs = [
        (name, entry["path"], term)
        for name, entry in table["types"].items()
        for term in entry.get("ordering", ())
    ]

    def status(job: tuple[str, str, str]) -> int:
        _, rel, term = job
        params = {"ordering": term, "limit": 1, "brief": 1}
        return client.get(f"/api/{rel}/", params=params).status_code

    with ThreadPoolExecutor(3) as pool:
        codes = list(pool.map(status, jobs))
    dropped = 0
    for (name, _, term), code in zip(jobs, codes, strict=True):
        if code != 200:
            table["types"][name]["ordering"].remove(term)
            dropped += 1
    with open(path, "w", encoding="utf-8") as f:
        f.write(dumps_table(table))
    print(f"{len(jobs)} ordering terms tried, {dropped} dropped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
