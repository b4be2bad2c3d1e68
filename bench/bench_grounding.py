"""Benchmark 12: the grounding check's cost (issues 33 and 38).

Two measures, each for this tree and, beside it in one run, for another
revision (`--against REV`, default `main`; its `netbox_chat/` from `git
archive`, everything else this tree's):

- **a turn's end**: tool results totalling 50 kB of compact NetBox JSON
  (device and interface pages shaped as the agent's tools return them) and an
  answer of about 2 kB in every shape; decoding the results and checking the
  answer, median of 20 runs. Target: at most 20 ms.
- **long answers**, 50 kB and 500 kB in five shapes (n02's interface list, a
  table, prose, one long line, and one line naming the reply's objects
  together, "sw01, sw02 and sw03 are active": one clause holding thousands of
  names and values), checked against a small reply: median of 3
  runs (one at 500 kB; each run a string of its own, so no reading the check
  keeps for the text just read is reused), each in a child process given up after `--give-up`
  seconds (the code before issue 38 took minutes). Targets: 20 ms per 50 kB,
  200 ms per 500 kB. Each shape is also checked at 50 kB against the turn
  end's 50 kB of pages (the small reply hides what verify costs when every
  fact has sets and rows to be tried against). Target: 20 ms.

Times are CPU seconds of the process (`time.process_time`): the machine is
shared, and a loaded one stretches wall-clock time, not the work done.

    .venv/bin/python bench/bench_grounding.py [--against main] [--give-up 60]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common as C  # puts the repository on sys.path, and figures_of_revision

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


SMALL_REPLY = [
    {"count": 3, "results": [{"id": i, "name": f"sw0{i}", "status": "active"} for i in (1, 2, 3)]}
]
SHAPES: dict[str, Callable[[int], str]] = {
    "interface list": lambda i: f"- Gi1/0/{i}: 1000 Mbps, vlan {i}",
    "table": lambda i: f"| dmi01-akron-sw{i:02d} | active | DM-Akron | 10.112.{i % 250}.1/24 |",
    "prose": lambda i: f"dmi01-akron-sw0{i % 3 + 1} is active at DM-Akron with {i} interfaces. ",
    "one long line": lambda i: f"dmi01-akron-sw{i:02d} (active, 10.0.{i % 250}.1), ",
    "names together": lambda i: (
        f"sw0{i % 3 + 1}, sw0{(i + 1) % 3 + 1} and sw0{(i + 2) % 3 + 1} are active "
    ),
}
JOIN = {
    "interface list": "\n", "table": "\n", "prose": "", "one long line": "", "names together": ""
}  # fmt: skip
SIZES = {"50 kB": (50_000, 20.0), "500 kB": (500_000, 200.0)}
# A long answer checked against the turn end's 50 kB of pages, not the small
# reply: what verify costs when every fact has sets and rows to be tried against.
PAGES = "50 kB against 50 kB of pages"


def long_answer(shape: str, size: int) -> str:
    lines = []
    total, i = 0, 0
    while total < size:
        line = SHAPES[shape](i)
        lines.append(line)
        total += len(line) + 1
        i += 1
    text = JOIN[shape].join(lines)
    if shape == "table":
        text = "| Name | Status | Site | Primary IP |\n|---|---|---|---|\n" + text
    return text


def _timed(text: str, runs: int, pages: bool, out: Any) -> None:
    reply = [json.loads(t) for t in results_of(RESULTS_BYTES)] if pages else SMALL_REPLY
    times = []
    for run in range(runs):
        answer = text + " " * run  # another string each run: the check keeps no reading of it
        started = time.process_time()
        check(answer, reply)
        times.append((time.process_time() - started) * 1000)
    out.put(statistics.median(times))


def long_figure(shape: str, size: int, give_up: float, pages: bool = False) -> float | None:
    """Median CPU ms of the check of one long answer (against the small reply,
    or with `pages` against 50 kB of device and interface pages), or None when
    it took longer than `give_up` seconds."""
    out: Any = multiprocessing.Queue()
    child = multiprocessing.Process(
        target=_timed, args=(long_answer(shape, size), 3 if size < 100_000 else 1, pages, out)
    )
    child.start()
    child.join(give_up)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return float(out.get())


def turn_end_figure() -> float:
    texts = results_of(RESULTS_BYTES)
    check(ANSWER, [json.loads(t) for t in texts])
    timings = []
    for run in range(20):
        answer = ANSWER + " " * run  # another string each run: the check keeps no reading of it
        started = time.process_time()
        check(answer, [json.loads(t) for t in texts])
        timings.append((time.process_time() - started) * 1000)
    return statistics.median(timings)


def measure(give_up: float) -> dict[str, float | None]:
    figures: dict[str, float | None] = {"turn end": turn_end_figure()}
    for shape in SHAPES:
        for label, (size, _) in SIZES.items():
            figures[f"{shape}, {label}"] = long_figure(shape, size, give_up)
        figures[f"{shape}, {PAGES}"] = long_figure(shape, 50_000, give_up, pages=True)
    return figures


def fmt(value: float | None, give_up: float) -> str:
    return f"> {give_up:.0f} s" if value is None else f"{value:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="main", help="revision to measure first ('' for none)")
    parser.add_argument("--give-up", type=float, default=60.0, help="seconds per long answer")
    parser.add_argument("--figures", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.figures:  # measuring another revision for figures_of_revision
        Path(args.figures).write_text(json.dumps(measure(args.give_up)))
        return
    C.header("Benchmark 12: the grounding check (CPU time)")
    before = None
    if args.against:
        before = C.figures_of_revision(
            "bench_grounding.py", args.against, ["--give-up", str(args.give_up)]
        )
    after = measure(args.give_up)
    targets = {"turn end": TARGET_MS}
    for shape in SHAPES:
        targets |= {f"{shape}, {label}": target for label, (_, target) in SIZES.items()}
        targets[f"{shape}, {PAGES}"] = TARGET_MS
    print(f"| check of | {args.against or '-'} | this tree | target |")
    print("|---|---|---|---|")
    for name, target in targets.items():
        old = fmt(before.get(name), args.give_up) if before else "-"
        print(f"| {name} | {old} | {fmt(after[name], args.give_up)} | ≤ {target:.0f} ms |")
    for name, target in targets.items():
        value = after[name]
        met = value is not None and value <= target
        print(f"TARGET {name} within {target:.0f} ms: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
