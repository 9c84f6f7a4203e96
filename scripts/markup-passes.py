"""Each markup pass of `tolk bench quality` runs, from their speed.json files: tolk's output
tokens and engine requests, the engine's time per output token and the sequences running,
the de/fr/es units' p50 by format over vLLM's server's in the same round, en-ne's p50
(docs/benchmarks.md sections 30 and 31 were read this way; section 30 has it inline).

    python3 scripts/markup-passes.py docs/benchmarks/real-quality-hops/run-z*-h200/speed.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

DFE, NE = ("en-de", "en-fr", "en-es"), ("en-ne",)


def p50(passed: dict[str, Any], formats: str, pairs: tuple[str, ...]) -> float:
    """The p50 of a pass's units of these formats (space-separated) and pairs."""
    return statistics.median(
        float(x)
        for group, latencies in passed["unit_latencies_s"].items()
        if group.split()[1] in formats.split() and group.split()[0] in pairs
        for x in latencies
    )


def main(paths: list[str]) -> None:
    for path in paths:
        speed = json.loads(Path(path).read_text())["speed"]
        passes = [p for p in speed["passes"] if p["phase"] == "markup"]
        base = {(p["block"], p["round"]): p for p in passes if p["system"] == "openai"}
        for p in passes:
            if p["system"] == "openai":
                continue
            o, e = base[(p["block"], p["round"])], p["engine"]
            md, html = p50(p, "markdown", DFE), p50(p, "html", DFE)
            their_md, their_html = p50(o, "markdown", DFE), p50(o, "html", DFE)
            sys.stdout.write(
                f"{path.split('/')[-2]} {p['system']:26} r{p['round']} {p['output_tokens']:6} "
                f"tokens {e['engine_requests']:4.0f} requests TPOT {e['tpot_ms']:4.1f} "
                f"running {p['running_mean']:3.0f} | de/fr/es markdown {md:.2f} s "
                f"({md / their_md:.2f}x of {their_md:.2f}) html {html:.2f} s "
                f"({html / their_html:.2f}x of {their_html:.2f}) | en-ne "
                f"{p50(p, 'markdown html', NE):.2f} s (vLLM {p50(o, 'markdown html', NE):.2f})\n"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
