"""`tolk bench quality`: how well a model translates through tolk, against the same model
behind a plain vLLM OpenAI server, on human references.

Until a real model was served, tolk's benchmarks measured speed on random weights; a real
model shows where translation itself breaks: the wrong language, the source echoed, a loop
until the budget ends, a character cut in half, markup lost. This benchmark sends every
system the same sentences (quality_data: FLORES-101's aligned files; optionally a markup set
made from them and the case-study articles at each split mode) and scores what comes back
(quality_report: sacrebleu's chrF++ and BLEU with confidence intervals, and the failure
checks tolk's server itself applies), beside latency, output tokens and what tolk flagged.
With `--alternatives N`, tolk's and LibreTranslate's APIs are also asked for N alternatives
per sentence, as a system of their own in the same run: what the samples cost in tokens and
latency beside the same API without them, and how the alternatives score.

Systems: a tolk server (`--url`, or started from `--config`) through each of its APIs:
tolk's /translate, the DeepL-compatible /v2/translate and the LibreTranslate-compatible
/translate; and any OpenAI-compatible server (`--openai`, or vLLM's own started on a model
directory with tolk's engine arguments, `--openai-start`) sent the plain prompt a user of
raw `vllm serve` would write, greedy, at most 512 tokens: the baseline. One text a request,
at a bounded concurrency; servers started here run one at a time and are stopped by PID.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import platform
import re
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from rich.progress import Progress

from tolk.bench import quality_report
from tolk.bench.loadgen import BYPASS_MEMORY
from tolk.bench.quality_data import Unit
from tolk.bench.run import progress_callback
from tolk.config import EngineSettings, ModelSettings, load_config
from tolk.languages import lang
from tolk.local.processes import LocalServer, free_port, start_server

APIS = ("tolk", "deepl", "libretranslate")
ALTERNATIVE_APIS = ("tolk", "libretranslate")  # the APIs that have alternatives
SYSTEM_NAMES = {"tolk": "tolk", "deepl": "tolk-deepl", "libretranslate": "tolk-libretranslate"}
OPENAI_PROMPT = (
    "Translate the following {source} text into {target}. Reply with the translation only."
    "\n\n{text}"
)
OPENAI_MAX_TOKENS = 512
REQUEST_TIMEOUT = 3600.0  # a long document on a CPU
OVERLOAD_RETRIES = 30
# FLORES lines tolk.budget sizes output budgets on (src/tolk/data/parallel): not test data.
BUDGET_SAMPLE_FROM = 400


@dataclass(frozen=True)
class System:
    name: str  # tolk, tolk-deepl, tolk-libretranslate, openai
    api: str  # tolk | deepl | libretranslate | openai
    url: str
    model: str | None = None  # the model name an OpenAI server is asked for
    alternatives: int = 0  # asked of the tolk and LibreTranslate APIs
    translation_memory: str | None = None  # named in tolk's and DeepL's requests

    def takes(self, unit: Unit) -> bool:
        """Documents go through tolk's API only (the split mode is its option); markdown
        where a format can be named or the prompt carries it as text; alternatives are
        asked for sentences."""
        if self.alternatives or self.translation_memory:  # measured on sentences
            return unit.kind == "sentence"
        if unit.kind == "document":
            return self.api == "tolk"
        return unit.kind != "markdown" or self.api in ("tolk", "openai")


@dataclass(frozen=True)
class Plan:
    units: Sequence[Unit]
    concurrency: int = 8
    url: str | None = None  # a running tolk server
    config: Path | None = None  # or one started from this config
    model: str | None = None  # with --config: only this model of it
    apis: Sequence[str] = ("tolk",)
    openai: str | None = None  # a running OpenAI-compatible server
    openai_model: str | None = None
    openai_start: Path | None = None  # or vLLM's own, started on this model directory
    languages: Sequence[str] = ()  # the languages the output checks tell apart
    settings: Mapping[str, Any] = field(default_factory=dict)  # for the report
    alternatives: int = 0  # also measure tolk's and LibreTranslate's APIs asked for these
    translation_memory: str | None = None  # named in tolk's and DeepL's requests


def openai_prompt(unit: Unit) -> str:
    return OPENAI_PROMPT.format(
        source=lang(unit.source_lang).base_name,
        target=lang(unit.target_lang).base_name,
        text=unit.source,
    )


def request(system: System, unit: Unit) -> tuple[str, dict[str, Any]]:
    """The path and JSON body that send `unit` to `system`'s API."""
    src, tgt, html = unit.source_lang, unit.target_lang, unit.format == "html"
    if system.api == "tolk":
        body: dict[str, Any] = {"text": unit.source, "source_lang": src, "target_lang": tgt}
        if unit.format != "text":
            body["format"] = unit.format
        if unit.split is not None:
            body["split"] = unit.split
        if system.alternatives:
            body["alternatives"] = system.alternatives
        if system.translation_memory:
            body["translation_memory_id"] = system.translation_memory
        return "/translate", body
    if system.api == "deepl":
        body = {"text": [unit.source], "source_lang": src, "target_lang": tgt}
        if system.translation_memory:
            body["translation_memory_id"] = system.translation_memory
        return "/v2/translate", body | ({"tag_handling": "html"} if html else {})
    if system.api == "libretranslate":
        fmt = "html" if html else "text"
        body = {"q": unit.source, "source": src, "target": tgt, "format": fmt}
        if system.alternatives:
            body["alternatives"] = system.alternatives
        return "/translate", body
    return "/v1/chat/completions", {
        "model": system.model,
        "messages": [{"role": "user", "content": openai_prompt(unit)}],
        "temperature": 0,
        "max_tokens": OPENAI_MAX_TOKENS,
    }


def header_flags(headers: Mapping[str, str]) -> list[str]:
    """The codes in an `X-Tolk-Warnings` header (a JSON list of {text, code}) for text 0."""
    try:
        listed = json.loads(headers.get("X-Tolk-Warnings") or "[]")
    except ValueError:
        return []
    if not isinstance(listed, list):
        return []
    return [str(w["code"]) for w in listed if isinstance(w, dict) and w.get("text", 0) == 0]


def reply(system: System, body: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """output, flags, output_tokens and finish_reason of one API's answer (and its
    alternatives, when they were asked for)."""
    tokens: int | None = None
    finish: str | None = None
    if system.api == "tolk":
        output = body["translation"]
        flags = [str(w["code"]) for w in body.get("warnings") or [] if w.get("text", 0) == 0]
        tokens = body.get("usage", {}).get("completion_tokens")
    elif system.api == "deepl":
        output, flags = body["translations"][0]["text"], header_flags(headers)
    elif system.api == "libretranslate":
        output, flags = body["translatedText"], header_flags(headers)
    else:
        choice = body["choices"][0]
        output, flags = choice["message"].get("content") or "", []
        finish = choice.get("finish_reason")
        tokens = body.get("usage", {}).get("completion_tokens")
    answer = {"output": output, "flags": flags, "output_tokens": tokens, "finish_reason": finish}
    if system.alternatives:
        answer["alternatives"] = list(body.get("alternatives") or [])
    return answer


async def translate_one(
    session: aiohttp.ClientSession, system: System, unit: Unit
) -> dict[str, Any]:
    """One unit through one system: its record (output, flags, latency, tokens, error).
    A 503 with Retry-After (tolk's queue full) is waited out and not timed."""
    path, body = request(system, unit)
    record: dict[str, Any] = {
        "system": system.name,
        "kind": unit.kind,
        "pair": unit.pair,
        "source_lang": unit.source_lang,
        "target_lang": unit.target_lang,
        "index": unit.index,
        "split": unit.split,
        "source": unit.source,
        "reference": unit.reference,
        "output": "",
        "flags": [],
        "output_tokens": None,
        "finish_reason": None,
        "error": None,
    }
    for _ in range(OVERLOAD_RETRIES):
        started = time.perf_counter()
        try:
            async with session.post(path, json=body) as response:
                raw = await response.read()
                status, headers = response.status, response.headers
        except (aiohttp.ClientError, TimeoutError) as exc:
            return record | {"error": type(exc).__name__, "latency_s": None}
        latency = time.perf_counter() - started
        if status == 503 and "Retry-After" in headers:
            await asyncio.sleep(float(headers["Retry-After"]))
            continue
        break
    record["latency_s"] = latency
    try:
        answer = json.loads(raw)
        if status != 200:
            return record | {"error": f"HTTP {status}: {raw[:200].decode(errors='replace')}"}
        return record | reply(system, answer, headers)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return record | {"error": f"unreadable answer ({type(exc).__name__}): {raw[:200]!r}"}


async def translate_all(
    system: System, units: Sequence[Unit], concurrency: int, progress: Progress | None
) -> list[dict[str, Any]]:
    """Every unit `system` takes, `concurrency` at a time, in the units' order."""
    chosen = [u for u in units if system.takes(u)]
    advance = progress_callback(progress, f"{system.name}: texts", len(chosen))
    gate = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        system.url, timeout=timeout, connector=connector, headers=BYPASS_MEMORY
    ) as session:

        async def one(unit: Unit) -> dict[str, Any]:
            async with gate:
                record = await translate_one(session, system, unit)
            advance(1)
            return record

        return list(await asyncio.gather(*(one(u) for u in chosen)))


async def _get_json(url: str, path: str) -> Any:
    async with (
        aiohttp.ClientSession(url, timeout=aiohttp.ClientTimeout(total=30)) as session,
        session.get(path) as response,
    ):
        return await response.json() if response.status == 200 else None


async def tolk_models(url: str) -> str:
    """The models a tolk server serves, as the report names them."""
    listed = await _get_json(url, "/models")
    if not listed:
        return "unknown"
    return ", ".join(f"{m['model']} ({m['prompt_format']})" for m in listed["models"])


async def openai_model(url: str, wanted: str | None) -> str:
    if wanted:
        return wanted
    listed = await _get_json(url, "/v1/models")
    if not listed or not listed.get("data"):
        raise RuntimeError(f"{url}/v1/models lists no model: give --openai-model")
    return str(listed["data"][0]["id"])


def vllm_settings(plan: Plan) -> ModelSettings:
    """The model directory with the engine settings tolk would use: the config's model's
    (the same engine as the tolk server) or tolk's defaults with a 4096-token context."""
    assert plan.openai_start is not None
    path = str(plan.openai_start.resolve())
    if plan.config is not None:
        config = load_config(plan.config)
        model = next((m for m in config.models if m.name == plan.model), config.models[0])
        return model.model_copy(update={"path": path})
    name = re.sub(r"[^A-Za-z0-9._-]", "-", plan.openai_start.resolve().name).lstrip("._-")
    return ModelSettings(
        name=name or "model",
        path=path,
        languages=("en",),
        engine=EngineSettings(max_model_len=4096),
    )


def start_vllm(plan: Plan, workdir: Path) -> tuple[LocalServer, str]:
    """vLLM's OpenAI server on the model directory, as `tolk bench versus-vllm` starts it."""
    from tolk.bench.versus import vllm_command

    settings = vllm_settings(plan)
    port = free_port()
    server = LocalServer.start(
        vllm_command(settings, port),
        port,
        workdir.resolve() / "vllm-server.log",
        cwd=workdir.resolve(),
        ready_timeout=900,
        ready_path="/health",
    )
    return server, settings.name


def start_tolk(plan: Plan, workdir: Path) -> LocalServer:
    assert plan.config is not None
    config = load_config(plan.config)
    if plan.model is not None:
        models = tuple(m for m in config.models if m.name == plan.model)
        if not models:
            raise ValueError(f"no model '{plan.model}' in {plan.config}")
        config = config.model_copy(update={"models": models})
    return start_server(config, workdir, "quality-tolk", ready_timeout=900)


def machine() -> dict[str, Any]:
    """The client machine (where a started server runs too)."""
    import psutil

    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
    }


async def run_quality(
    plan: Plan, workdir: Path, progress: Progress | None = None
) -> dict[str, Any]:
    """Every system on the plan's units; the records, judged and summarised."""
    records: list[dict[str, Any]] = []
    systems: list[dict[str, Any]] = []
    if plan.url or plan.config:
        server = start_tolk(plan, workdir) if plan.config and not plan.url else None
        try:
            url = plan.url.rstrip("/") if plan.url else server.url  # type: ignore[union-attr]
            model = await tolk_models(url)
            for api in plan.apis:
                chosen = [System(SYSTEM_NAMES[api], api, url)]
                if plan.translation_memory and api in ("tolk", "deepl"):
                    chosen.append(
                        System(
                            f"{SYSTEM_NAMES[api]}+tm", api, url,
                            translation_memory=plan.translation_memory,
                        )
                    )  # fmt: skip
                if plan.alternatives and api in ALTERNATIVE_APIS:
                    name = f"{SYSTEM_NAMES[api]}+alt{plan.alternatives}"
                    chosen.append(System(name, api, url, alternatives=plan.alternatives))
                for system in chosen:
                    systems.append(
                        {"name": system.name, "api": api, "url": url, "model": model}
                        | ({"alternatives": system.alternatives} if system.alternatives else {})
                    )
                    records += await translate_all(system, plan.units, plan.concurrency, progress)
        finally:
            if server is not None:
                server.stop()
    if plan.openai or plan.openai_start:
        vllm: LocalServer | None = None
        if plan.openai:
            url, wanted = plan.openai.rstrip("/"), plan.openai_model
        else:
            vllm, wanted = start_vllm(plan, workdir)
            url = vllm.url
        try:
            system = System("openai", "openai", url, await openai_model(url, wanted))
            started_here = "vLLM's OpenAI server started here" if vllm else "OpenAI-compatible"
            systems.append(
                {"name": "openai", "api": started_here, "url": url, "model": system.model}
            )
            records += await translate_all(system, plan.units, plan.concurrency, progress)
        finally:
            if vllm is not None:
                vllm.stop()
    quality_report.judge(records, plan.languages)
    results = {
        "schema": quality_report.SCHEMA,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(["tolk", *sys.argv[1:]]),
        "machine": machine(),
        "systems": systems,
        **plan.settings,
        "records": records,
    }
    results["summary"] = quality_report.summarize(results)
    return results
