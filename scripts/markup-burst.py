"""Where a markup pass's units wait before the engine, on this machine: `tolk bench quality
--markup`'s units (5 pairs x 12 markdown and 12 HTML, FLORES lines from 1) sent to a tolk
server at once, as the bench's markup pass sends them, and each unit's Server-Timing marks
(tolk.engine.timing) read back: from its arrival to its first engine request handed to the
engine, to its first output, to its answer, and what the client waited outside those marks
(before the server took the request up, and the answer's way back).

The server runs in a process of its own over a stand-in engine (tolk.testing.fake_engine)
that answers each prompt with the text of its last turn (its placeholders kept) after
`seconds a token` x its length: every unit is done in one try, so what differs between two
configs is tolk's own work and waits (parsing, planning, prompts, the engine's gathering),
not the model's. The engine's own steps are not here: `bench quality` on the GPU has them.
Checks are off (an echo is flagged and retried otherwise).

    .venv/bin/python scripts/markup-burst.py [config] [change] [seconds a token]
    # defaults: configs/gpu-qwen2.5-coder-0.5b.yaml '{}' 0.006
    # change: JSON merged into each model's `engine`, e.g. '{"gather_most": 0}'

Prints the medians by format; docs/benchmarks.md section 32.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tolk.bench.quality import System, translate_all
from tolk.bench.quality_data import markup_units, read_lines
from tolk.local.processes import LocalServer, free_port

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared/quality/flores101/eng.txt"
PAIRS = ("de", "fr", "es", "zh", "ne")

# The server's process: tolk over a stand-in engine that echoes the prompt's last turn.
SERVER = """
import asyncio, socket, sys
import yaml
from tolk.cli import tolk_server
from tolk.config import build_config
from tolk.testing import fake_engine

config, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
settings = build_config(yaml.safe_load(open(config)), environ={})

async def generate(self, prompt, sampling_params, request_id, *, priority=0):
    ids = list(prompt["prompt_token_ids"])
    # The last turn's text (between its role's line and the end of turn), as the answer.
    at = max(i for i in range(len(ids) - len(START) + 1) if ids[i:i + len(START)] == START)
    text = ids[at + len(START):]
    text = text[: text.index(END)][: sampling_params.max_tokens]
    await asyncio.sleep(len(text) * seconds)
    self.requests += 1
    done = fake_engine.FakeCompletion(text, "stop")
    yield fake_engine.FakeOutput([done] * sampling_params.n)

from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(str(settings.models[0].path))
START = tokenizer.encode("<|im_start|>user\\n")
END = tokenizer.convert_tokens_to_ids("<|im_end|>")
fake_engine.FakeLLM.generate = generate
server, _ = tolk_server(settings, fake_engine.FakeEngines(seconds))
listening = socket.socket()
listening.bind((settings.server.host, settings.server.port))
server.run(sockets=[listening])
"""


def config_file(path: Path, change: dict[str, Any], port: int, folder: Path) -> Path:
    """The config with checks off, `change` merged into each model's engine, on `port`."""
    raw = yaml.safe_load(path.read_text())
    raw["server"]["port"] = port
    for model in raw["models"]:
        model["path"] = str((path.parent / model["path"]).resolve())
        model["checks"] = {"enabled": False}
        model["engine"] = {**model.get("engine", {}), **change}
    out = folder / "config.yaml"
    out.write_text(yaml.safe_dump(raw))
    return out


async def burst(url: str) -> list[dict[str, Any]]:
    units = markup_units(read_lines(DATA), list(PAIRS), 12)
    return await translate_all(System("tolk", "tolk", url), units, 256, None)


def main() -> None:
    config = Path(sys.argv[1] if len(sys.argv) > 1 else "configs/gpu-qwen2.5-coder-0.5b.yaml")
    change = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    seconds = sys.argv[3] if len(sys.argv) > 3 else "0.006"
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        made = config_file(config, change, port, Path(folder))
        command = [sys.executable, "-c", SERVER, str(made), str(port), seconds]
        server = LocalServer.start(command, port, Path(folder) / "server.log")
        try:
            asyncio.run(burst(server.url))  # the first prompts' checks (tolk.translation.jobs)
            records = asyncio.run(burst(server.url))
        finally:
            server.stop()
    lines = [f"{config} {change or ''}: 120 units at once, medians by format (seconds)"]
    for kind in ("markdown", "html"):
        mine = [r for r in records if r["kind"] == kind and r.get("timing")]

        def median(mark: str, rows: list[dict[str, Any]] = mine) -> float:
            return statistics.median(r["timing"][mark] for r in rows)

        latency = statistics.median(r["latency_s"] for r in mine)
        # What the client waited beyond the server's marks: before tolk took the request up
        # (a burst's others first) and while its answer went back.
        outside = statistics.median(r["latency_s"] - r["timing"]["to-rendered"] for r in mine)
        lines.append(
            f"  {kind:8s} {len(mine)} units: to the engine {median('to-engine'):.3f}, "
            f"first output {median('to-first-output'):.3f}, answered {latency:.3f}, "
            f"outside the marks {outside:.3f}"
        )
    sys.stdout.write("\n".join([*lines, ""]))


if __name__ == "__main__":
    main()
