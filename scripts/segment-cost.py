"""tolk's own time for each case-study document, per segment: a tolk server in this process
over the stand-in engine (tolk.testing.fake_engine), which answers at once, so what is left
is tolk's work (segmenting, prompts, tokens, output, the stream's events). Best of 5.

    .venv/bin/python scripts/segment-cost.py      # from the checkout (make demo-model first)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.servers import InProcessServer, model_config, server_config

from tolk.bench.workloads import documents
from tolk.local.processes import free_port


def main() -> None:
    model = model_config("demo", Path("models/demo"), languages=["en", "ne"])
    model["engine"].update(max_num_seqs=256, max_waiting=2048)
    server = InProcessServer(server_config([model], free_port(), request_timeout=300))
    try:
        with httpx.Client(
            base_url=server.url, timeout=300, headers={"Cache-Control": "no-store"}
        ) as client:
            for item in documents().items:
                body = {**item.body(), "stream": True}
                times = []
                for _ in range(5):
                    started = time.perf_counter()
                    with client.stream("POST", "/translate", json=body) as response:
                        n = sum(1 for line in response.iter_lines() if line == "event: segment")
                    times.append(time.perf_counter() - started)
                best = min(times)
                print(  # noqa: T201 (a script reporting on stdout)
                    f"{item.source_lang}>{item.target_lang} {item.format:8} "
                    f"{len(item.text.encode()) // 1000:3} KB {n:4} segments: best "
                    f"{best * 1000:6.0f} ms, {best / n * 1000:.2f} ms/segment"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
