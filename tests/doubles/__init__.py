"""What the tests stand on: scripted model servers, the NetBox double, the session stores, data."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: where the CLI and `-m tests...` run
