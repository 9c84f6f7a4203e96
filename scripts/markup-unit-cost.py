"""What each markup unit of `tolk bench quality --markup` costs the engine, one unit at a time
through a real tolk server started here: its engine requests, prompt and generated tokens,
and the problems the checks found in its tries (from the server's /metrics before and after
the unit, so nothing else may use the server meanwhile). `bench quality` gives only a
phase's totals; this says which units take the retries (docs/benchmarks.md §25).

    .venv/bin/python scripts/markup-unit-cost.py [config] [pairs] [units per format] [change]
    # defaults: configs/qwen2.5-coder-0.5b.yaml en-de,en-es 12 '{}'
    # change: JSON merged into each model, e.g. '{"candidates": {"markup_n": 1}}'

Writes .runtime/markup-unit-cost/units.json (every unit) and prints a table per format and
pair (the units' p50 seconds too).
"""

from __future__ import annotations

import json
import re
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import yaml

from tolk.bench.quality_data import markup_units, read_lines

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared/quality/flores101/eng.txt"
OUT = ROOT / ".runtime/markup-unit-cost"
COUNTED = re.compile(
    r"^(vllm:request_success_total|vllm:generation_tokens_total|vllm:prompt_tokens_total"
    r"|tolk_output_problems_total)(\{[^}]*\})? (\S+)$"
)
PROBLEM = re.compile(r'problem="([a-z_]+)"')


def counters(url: str) -> Counter[str]:
    """The engine's requests and tokens, and the checks' problems by name, summed."""
    found: Counter[str] = Counter()  # int-valued: vLLM counts whole tokens
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if m := COUNTED.match(line):
            name = m.group(1).split(":")[-1].removesuffix("_total")
            problem = PROBLEM.search(m.group(2) or "")
            found[f"problem {problem.group(1)}" if problem else name] += int(float(m.group(3)))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(config: Path, pairs: list[str], count: int, change: dict[str, Any]) -> None:
    settings = yaml.safe_load(config.read_text())
    port = free_port()
    settings["server"] |= {"host": "127.0.0.1", "port": port, "request_timeout": 600}
    for model in settings["models"]:
        model["path"] = str((config.parent / model["path"]).resolve())
        for key, value in change.items():  # one level deep: {"candidates": {"markup_n": 1}}
            model[key] = {**model.get(key, {}), **value} if isinstance(value, dict) else value
    settings["segment_cache"] = {"enabled": False}  # every unit to the engine
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "config.yaml").write_text(yaml.safe_dump(settings))
    targets = [p.split("-")[1] for p in pairs]
    units = markup_units(read_lines(DATA), targets, count)
    url = f"http://127.0.0.1:{port}"
    with (OUT / "server.log").open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "tolk", "serve", "--config", str(OUT / "config.yaml")],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    rows: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 900
        while not _healthy(url):
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start: {OUT / 'server.log'}")
            time.sleep(1)
        for n, unit in enumerate(units, 1):
            before, began = counters(url), time.monotonic()
            body = {"text": unit.source, "source_lang": "en", "target_lang": unit.target_lang}
            response = httpx.post(
                f"{url}/translate", json=body | {"format": unit.format}, timeout=600
            )
            seconds = time.monotonic() - began
            spent = counters(url)
            spent.subtract(before)
            rows.append(
                {
                    "format": unit.format,
                    "pair": f"en-{unit.target_lang}",
                    "status": response.status_code,
                    "seconds": round(seconds, 2),
                    **{k: int(v) for k, v in sorted(spent.items()) if v},
                }
            )
            sys.stderr.write(f"{n}/{len(units)} {json.dumps(rows[-1])}\n")
    finally:
        server.terminate()
        server.wait(120)
    (OUT / "units.json").write_text(json.dumps(rows, indent=1))
    table = [
        "| format | pair | units | lost placeholders on a first try | engine requests a unit "
        "(median) | generated tokens a unit: kept at once / lost (median) | p50 s |",
        "|---|---|---|---|---|---|---|",
    ]
    for form, pair in dict.fromkeys((r["format"], r["pair"]) for r in rows):
        mine = [r for r in rows if (r["format"], r["pair"]) == (form, pair)]
        lost = [r for r in mine if r.get("problem placeholders")]
        kept = [r for r in mine if not r.get("problem placeholders")]
        requests = statistics.median(r.get("request_success", 0) for r in mine)
        made = [
            str(statistics.median(r.get("generation_tokens", 0) for r in group)) if group else "-"
            for group in (kept, lost)
        ]
        p50 = statistics.median(r["seconds"] for r in mine)
        table.append(
            f"| {form} | {pair} | {len(mine)} | {len(lost)} | {requests} "
            f"| {made[0]} / {made[1]} | {p50:.1f} |"
        )
    sys.stdout.write("\n".join([*table, f"wrote {OUT / 'units.json'}", ""]))


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        Path(args[0]) if args else ROOT / "configs/qwen2.5-coder-0.5b.yaml",
        (args[1] if len(args) > 1 else "en-de,en-es").split(","),
        int(args[2]) if len(args) > 2 else 12,
        json.loads(args[3]) if len(args) > 3 else {},
    )
