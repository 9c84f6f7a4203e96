"""Every engine request of a markup pass, on this machine's CPU with the real model: what each
of tolk's tries asks of vLLM (budget, outputs, sampling) and what came back (tokens, finish
reason). What docs/benchmarks.md section 33 read en-ne's markup ladder from.

tolk runs in this process (`tolk.server.app.create_app` under uvicorn on a free loopback port)
with the config's first model on the CPU engine settings below; `ModelEngine.generate_n` is
wrapped to record each request (the wrapper only observes: it passes every argument on). First
`warm` plain sentences of each pair (FLORES lines 201 on), so that the pair's watches know what
the bench's sentence phase teaches them, then `tolk bench quality --markup`'s first `units`
markdown and `units` HTML units of each pair, all at once.

    .venv/bin/python scripts/engine-requests.py [pairs] [warm] [units] [config] [change]
    # defaults: ne 80 3 configs/gpu-qwen2.5-coder-0.5b.yaml '{}'
    # change: JSON merged into the model's `checks`, e.g. '{"markup_split_unwritten": true}'

Slow on 2 cores (en-ne's budgets are 9 tokens a source token): 3-5 minutes as defaulted.
Prints a table by kind of request (markup segment or plain text; its sampling) and by finish
reason, and writes every request to .runtime/engine-requests.json.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml

from tolk.bench.quality_data import markup_units, read_lines
from tolk.config import load_config
from tolk.engine import engine as engine_module
from tolk.local.processes import free_port
from tolk.server.app import create_app

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared/quality/flores101/eng.txt"
CPU_ENGINE = {
    "max_num_seqs": 64,
    "max_num_batched_tokens": 8192,
    "max_model_len": 4096,
    "kv_cache_memory_bytes": "2GiB",
    "max_waiting": 1000,
}
RECORDS: list[dict[str, Any]] = []
# A placeholder as the model is shown one: a link `[text](1)` or a code span `` `2` `` in the
# markdown syntax, or `<g1>` / `<x2/>` in the tag syntax (tolk.translation.document.for_model).
SHOWN = re.compile(r"\]\(\d+\)|`\d+`|</?g\d+>|<x\d+/>")


def _recording(generate_n: Any) -> Any:
    async def recorded(
        self: Any, prompt_ids: list[int], max_tokens: int, *args: Any, **kw: Any
    ) -> Any:
        started = time.monotonic()
        outputs = await generate_n(self, prompt_ids, max_tokens, *args, **kw)
        sampling = args[0] if args else kw.get("sampling")
        user = str(self.tokenizer.decode(prompt_ids[-120:])).rsplit("<|im_start|>user", 1)[-1]
        RECORDS.append(
            {
                "kind": "markup segment" if SHOWN.search(user) else "plain text",
                "sampling": "model's"
                if sampling is None
                else sampling.model_dump(exclude_none=True),
                "n": len(outputs),
                "max_tokens": max_tokens,
                "prompt_tokens": len(prompt_ids),
                "seconds": round(time.monotonic() - started, 2),
                "outputs": [
                    {"tokens": g.completion_tokens, "finish": g.finish_reason, "text": g.text}
                    for g in outputs
                ],
            }
        )
        return outputs

    return recorded


def config_file(path: Path, change: dict[str, Any], port: int, folder: Path) -> Path:
    """The config's first model on CPU_ENGINE, `change` merged into its checks, on `port`."""
    data = yaml.safe_load(path.read_text())
    model = data["models"][0]
    model["path"] = str((path.parent / model["path"]).resolve())
    model["engine"] = CPU_ENGINE
    model["checks"] = {**model.get("checks", {}), **change}
    data["models"] = [model]
    data["server"] |= {"port": port, "request_timeout": 1200, "segment_timeout": 1000}
    out = folder / "config.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def run(config: Path, port: int, pairs: list[str], warm: int, units: int) -> list[Any]:
    """The sentences, then the markup units; the markup units' answers."""
    app = create_app(load_config(config))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()  # (raises what stopped it)
        await asyncio.sleep(0.2)
    english = read_lines(DATA)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=1200) as client:
            started = time.monotonic()
            sentences = [
                {"text": english[200 + i], "source_lang": "en", "target_lang": t}
                for i in range(warm)
                for t in pairs
            ]
            await asyncio.gather(*(client.post("/translate", json=body) for body in sentences))
            say(f"{len(sentences)} sentences in {time.monotonic() - started:.0f} s")
            RECORDS.clear()
            started = time.monotonic()
            bodies = [
                {"text": u.source, "source_lang": "en", "target_lang": u.target_lang}
                | {"format": u.format}
                for u in markup_units(english, pairs, units, 0)
            ]
            answers = await asyncio.gather(*(client.post("/translate", json=b) for b in bodies))
            say(f"{len(bodies)} markup units in {time.monotonic() - started:.0f} s")
    finally:
        server.should_exit = True
        await serving
    return [a.json() if a.status_code == 200 else {"status": a.status_code} for a in answers]


def main(pairs: list[str], warm: int, units: int, config: Path, change: dict[str, Any]) -> None:
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        made = config_file(config, change, port, Path(folder))
        answers = asyncio.run(run(made, port, pairs, warm, units))
    warnings = collections.Counter(w["code"] for a in answers for w in a.get("warnings", []))
    failed = sum("status" in a for a in answers)
    say(f"{len(answers)} answers, {failed} failed; warnings {dict(warnings)}")
    table: dict[tuple[str, str, str], list[int]] = collections.defaultdict(list)
    for record in RECORDS:
        sampling = json.dumps(record["sampling"]) if record["sampling"] != "model's" else "model's"
        for output in record["outputs"]:
            table[(record["kind"], sampling, output["finish"])].append(output["tokens"])
    say("| request | sampling | finish | outputs | tokens | each (min-max) |")
    say("|---|---|---|---|---|---|")
    for (kind, sampling, finish), tokens in sorted(table.items()):
        each = f"{min(tokens)}-{max(tokens)}"
        say(f"| {kind} | {sampling} | {finish} | {len(tokens)} | {sum(tokens)} | {each} |")
    out = ROOT / ".runtime/engine-requests.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(RECORDS, ensure_ascii=False, indent=1))
    say(f"every request: {out}")


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen_pairs = (args[0] if args else "ne").split(",")
    engine_module.ModelEngine.generate_n = _recording(engine_module.ModelEngine.generate_n)  # type: ignore[method-assign]
    main(
        chosen_pairs,
        int(args[1]) if len(args) > 1 else 80,
        int(args[2]) if len(args) > 2 else 3,
        Path(args[3]) if len(args) > 3 else ROOT / "configs/gpu-qwen2.5-coder-0.5b.yaml",
        json.loads(args[4]) if len(args) > 4 else {},
    )
