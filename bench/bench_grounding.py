"""Benchmark 12: the grounding check's cost at a turn's end (issue 33).

A turn whose tool results total 50 kB of compact NetBox JSON (device,
interface and IP address pages shaped as the agent's tools return them) and an
answer of about 2 kB in every shape (prose, a list, a table). Measured: the
check as the turn end runs it (decoding the results' text and checking the
answer), median and worst of 50 runs after a warm-up. Today's code has no
check, so its cost is the whole difference a turn sees.

Target: at most 20 ms.

    .venv/bin/python bench/bench_grounding.py
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import _common as C  # noqa: F401  (puts the repository on sys.path)

from netbox_chat.claims import check

TARGET_MS = 20.0
RESULTS_BYTES = 50_000


def _ref(i: int, display: str) -> dict[str, Any]:
    return {"id": i, "display": display, "slug": display.lower().replace(" ", "-")}


def device(i: int) -> dict[str, Any]:
    site = ("DM-Akron", "DM-Columbus", "DM-Dayton")[i % 3]
    return {
        "id": 1000 + i, "name": f"dmi01-{site[3:].lower()}-sw{i:02d}",
        "status": ("active", "offline", "planned")[i % 7 % 3], "site": _ref(i % 3 + 1, site),
        "rack": _ref(40 + i % 5, f"R{i % 5:02d}"), "role": _ref(3, "Access Switch"),
        "device_type": _ref(7, "Catalyst 9300"), "tenant": _ref(5, "Dunder-Mifflin, Inc."),
        "serial": f"FOC22{i:05d}", "primary_ip": _ref(5000 + i, f"10.112.{i // 250}.{i % 250}/24"),
    }  # fmt: skip


def interface(i: int) -> dict[str, Any]:
    return {
        "id": 7000 + i, "device": _ref(1000 + i % 20, f"dmi01-akron-sw{i % 20:02d}"),
        "name": f"GigabitEthernet1/0/{i % 48 + 1}", "type": "1000base-t", "enabled": i % 4 != 0,
        "mtu": 1500, "untagged_vlan": _ref(200 + i % 3, f"VLAN {100 + i % 3}"),
        "description": f"uplink to floor {i % 6}",
    }  # fmt: skip


def page(object_type: str, rows: list[dict[str, Any]], count: int) -> str:
    return json.dumps(
        {"object_type": object_type, "count": count, "returned": len(rows), "offset": 0,
         "next_offset": len(rows) if count > len(rows) else None, "results": rows},
        separators=(",", ":"),
    )  # fmt: skip


def results_of(size: int) -> list[str]:
    """Tool results' text, as many pages as reach `size` characters."""
    texts: list[str] = []
    n = 0
    while sum(map(len, texts)) < size:
        texts.append(page("dcim.device", [device(n + i) for i in range(12)], 412))
        texts.append(page("dcim.interface", [interface(n + i) for i in range(12)], 2304))
        n += 12
    return texts


ANSWER = "\n".join(
    [
        "DM-Akron has 412 devices; the first page shows these 20:",
        "",
        "| Name | Status | Rack | Primary IP |",
        "|---|---|---|---|",
        *(
            f"| {d['name']} | {d['status']} | {d['rack']['display']} | "
            f"{d['primary_ip']['display']} |"
            for d in (device(i) for i in range(0, 60, 3))
        ),
        "",
        "Interfaces of dmi01-akron-sw01:",
        *(f"- GigabitEthernet1/0/{p} is untagged in VLAN 101" for p in (2, 8, 14, 20)),
        "",
        "dmi01-akron-sw03 is active at DM-Akron and belongs to Dunder-Mifflin, Inc.; "
        "dmi01-akron-sw99 is offline, and DM-Dayton has 1,234 devices.",
    ]
)


def main() -> None:
    texts = results_of(RESULTS_BYTES)
    size = sum(map(len, texts))

    def once() -> Any:
        return check(ANSWER, [json.loads(t) for t in texts])

    grounding = once()
    timings = []
    for _ in range(50):
        started = time.perf_counter()
        once()
        timings.append((time.perf_counter() - started) * 1000)
    median, worst = statistics.median(timings), max(timings)
    print(f"tool results: {size:,} characters in {len(texts)} results; answer {len(ANSWER):,}")
    print(f"claims: {grounding.claims}, ungrounded: {[c.text for c in grounding.ungrounded]}")
    print(f"check (decode + read + compare): median {median:.1f} ms, worst {worst:.1f} ms")
    print(f"before this change: 0 ms (no check); target <= {TARGET_MS:.0f} ms: "
          f"{'met' if median <= TARGET_MS else 'NOT met'}")  # fmt: skip


if __name__ == "__main__":
    main()
