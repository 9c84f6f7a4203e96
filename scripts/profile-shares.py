"""Shares of one thread's py-spy samples spent in the functions named, from the raw profiles
that `tolk bench quality --profile` keeps (profile-*.txt, gzipped or not).

    .venv/bin/python scripts/profile-shares.py PROCESS THREAD FUNCTION... -- PROFILE...

PROCESS and THREAD: parts of the names the bench report gives (e.g. `EngineCore` and
`MainThread`). FUNCTION: a function as py-spy names it without its file
(`CudaGraphManager.run_pw_graph`), its samples counted inclusively; `Caller>Callee` counts only
the samples where Callee was called by Caller directly. Prints a table (a column a profile)
and writes the same as JSON to stdout's last line. docs/benchmarks.md section 26 was read
this way.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from tolk.bench.profile import parse


def _read(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as lines:
        return list(lines)


def _bare(frame: str) -> str:
    """'fn (file.py)' as 'fn'."""
    return frame.rsplit(" (", 1)[0]


def shares(path: Path, process: str, thread: str, functions: list[str]) -> dict[str, float]:
    threads = [
        entry
        for (proc, name), entry in parse(_read(path)).items()
        if process in proc and thread in name
    ]
    if len(threads) != 1:
        found = [f"{t.process} / {t.thread}" for t in threads]
        raise SystemExit(f"{path}: {len(threads)} threads match {process!r} / {thread!r}: {found}")
    (entry,) = threads
    inclusive: dict[str, int] = {}
    for frame, n in entry.inclusive.items():
        inclusive[_bare(frame)] = inclusive.get(_bare(frame), 0) + n
    calls: dict[str, int] = {}
    for (caller, callee), n in entry.calls.items():
        key = f"{_bare(caller)}>{_bare(callee)}"
        calls[key] = calls.get(key, 0) + n
    out = {"samples": float(entry.samples)}
    for function in functions:
        # A name of its own first: py-spy's names hold ">" too ("f.<locals>.g").
        n = inclusive[function] if function in inclusive else calls.get(function, 0)
        out[function] = round(100 * n / max(entry.samples, 1), 1)
    return out


def main(argv: list[str]) -> None:
    if "--" not in argv or len(argv[: argv.index("--")]) < 3:
        raise SystemExit(__doc__)
    split = argv.index("--")
    process, thread, *functions = argv[:split]
    paths = [Path(p) for p in argv[split + 1 :]]
    table = {str(path): shares(path, process, thread, functions) for path in paths}
    names = [path.name for path in paths]
    lines = ["| % of samples | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for row in ["samples", *functions]:
        lines.append(f"| {row} | " + " | ".join(f"{table[str(p)][row]:g}" for p in paths) + " |")
    sys.stdout.write("\n".join([*lines, json.dumps(table), ""]))


if __name__ == "__main__":
    main(sys.argv[1:])
