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

from tolk.bench import profile, quality_report, quality_speed
from tolk.bench.loadgen import BYPASS_MEMORY, server_timings
from tolk.bench.quality_data import Unit
from tolk.bench.quality_speed import BASELINE
from tolk.bench.run import progress_callback
from tolk.config import EngineSettings, ModelSettings, load_config
from tolk.languages import lang
from tolk.local.processes import LocalServer, free_port, start_server

APIS = ("tolk", "deepl", "libretranslate", "chat", "chat-prompt")
ALTERNATIVE_APIS = ("tolk", "libretranslate")  # the APIs that have alternatives
SYSTEM_NAMES = {
    "tolk": "tolk",
    "deepl": "tolk-deepl",
    "libretranslate": "tolk-libretranslate",
    "chat": "tolk-chat",  # OpenAI's chat completions, the pair in the model's name
    "chat-prompt": "tolk-chat-prompt",  # ... with an app's prompt (Pot's), recognised
}
# What Pot (an OpenAI-compatible translation app) sends, verbatim (tests/data/chat_apps/
# pot-openai.json): tolk recognises it and translates the quoted text.
POT_SYSTEM = (
    "You are a professional translation engine, please translate the text into a colloquial, "
    "professional, elegant and fluent content, without the style of machine translation. You "
    "must only translate the text content, never interpret it."
)
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
    api: str  # tolk | deepl | libretranslate | chat | chat-prompt | openai (the baseline)
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
    rounds: int = 1  # passes over the units per system, the systems alternating
    variants: Sequence[str] = ()  # tolk again with a feature off (quality_speed.VARIANTS)
    profile: bool = False  # py-spy on each server started here during its first pass

    @property
    def measures_tolk(self) -> bool:
        return bool(self.url or self.config)

    @property
    def measures_baseline(self) -> bool:
        return bool(self.openai or self.openai_start)


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
    if system.api == "chat":  # tolk's OpenAI-compatible endpoint, the pair in the model's name
        return "/v1/chat/completions", {
            "model": f"tolk-{src}-{tgt}",
            "messages": [{"role": "user", "content": unit.source}],
        }
    if system.api == "chat-prompt":
        target = lang(tgt).base_name
        return "/v1/chat/completions", {
            "model": "tolk",
            "messages": [
                {"role": "system", "content": POT_SYSTEM},
                {"role": "user", "content": f'Translate into {target}:\n"""\n{unit.source}\n"""'},
            ],
        }
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


# What a tolk server's Server-Timing says of a unit's time (tolk.engine.timing), kept in its
# record as `timing`: the engine's time, and from its arrival to its first engine request
# handed to vLLM, to the first and last token of the first engine request back and its
# output, to its segments done and put back (and `engine_requests`, how many it made).
TIMING_MARKS = (
    "engine", "to-engine", "to-first-token", "to-last-token", "to-first-output", "to-translated",
    "to-rendered",
)  # fmt: skip
ENGINE_REQUESTS = re.compile(r'engine-requests;desc="([0-9]+)"')  # how many it made


def reply(system: System, body: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """output, flags, output_tokens and finish_reason of one API's answer (and its
    alternatives, when they were asked for); a tolk server's `timing` (TIMING_MARKS)."""
    tokens: int | None = None
    finish: str | None = None
    timing: dict[str, float] = {}
    if system.api == "tolk":
        output = body["translation"]
        flags = [str(w["code"]) for w in body.get("warnings") or [] if w.get("text", 0) == 0]
        tokens = body.get("usage", {}).get("completion_tokens")
        # Where its time went (tolk.engine.timing), seconds.
        timing = {n: s for n, s in server_timings(headers).items() if n in TIMING_MARKS}
        if made := ENGINE_REQUESTS.search(headers.get("server-timing", "")):
            timing["engine_requests"] = int(made.group(1))
    elif system.api == "deepl":
        output, flags = body["translations"][0]["text"], header_flags(headers)
    elif system.api == "libretranslate":
        output, flags = body["translatedText"], header_flags(headers)
    elif system.api in ("chat", "chat-prompt"):
        output = body["choices"][0]["message"]["content"]
        flags = header_flags(headers)
        tokens = body.get("usage", {}).get("completion_tokens")
        if system.api == "chat-prompt":  # Pot strips one quote from each end
            output = output[1:] if output.startswith('"') else output
            output = output[:-1] if output.endswith('"') else output
    else:
        choice = body["choices"][0]
        output, flags = choice["message"].get("content") or "", []
        finish = choice.get("finish_reason")
        tokens = body.get("usage", {}).get("completion_tokens")
    answer = {"output": output, "flags": flags, "output_tokens": tokens, "finish_reason": finish}
    if timing:
        answer["timing"] = timing
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


# A pass goes in phases, each its own closed loop timed apart (quality_speed): the sentences
# (what a throughput comparison is about), then the markup units, then the documents. Mixed in
# one loop, the few slow units at the end of one kind keep the next kind's clients waiting.
PHASES = {"sentence": "sentences", "markdown": "markup", "html": "markup", "document": "documents"}


def phases(system: System, units: Sequence[Unit]) -> list[tuple[str, list[Unit]]]:
    """The units `system` takes, by phase, in PHASES' order (the units' own within each)."""
    found: dict[str, list[Unit]] = {name: [] for name in PHASES.values()}
    for unit in units:
        if system.takes(unit):
            found[PHASES[unit.kind]].append(unit)
    return [(name, chosen) for name, chosen in found.items() if chosen]


async def translate_all(
    system: System, units: Sequence[Unit], concurrency: int, progress: Progress | None
) -> list[dict[str, Any]]:
    """Every unit `system` takes, `concurrency` at a time, in the units' order; each record
    says when its request was sent (`sent_s`, from the start of this call)."""
    chosen = [u for u in units if system.takes(u)]
    advance = progress_callback(progress, f"{system.name}: texts", len(chosen))
    gate = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    connector = aiohttp.TCPConnector(limit=concurrency)
    started = time.perf_counter()
    async with aiohttp.ClientSession(
        system.url, timeout=timeout, connector=connector, headers=BYPASS_MEMORY
    ) as session:

        async def one(unit: Unit) -> dict[str, Any]:
            async with gate:
                sent = time.perf_counter() - started
                record = await translate_one(session, system, unit)
            advance(1)
            return record | {"sent_s": sent}

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


def start_tolk(plan: Plan, workdir: Path, variant: str | None = None) -> LocalServer:
    """tolk from the plan's config (only its --model, where named), with `variant`'s feature
    switched off (quality_speed.VARIANTS)."""
    assert plan.config is not None
    config = load_config(plan.config)
    if plan.model is not None:
        models = tuple(m for m in config.models if m.name == plan.model)
        if not models:
            raise ValueError(f"no model '{plan.model}' in {plan.config}")
        config = config.model_copy(update={"models": models})
    if variant is not None:
        config = quality_speed.variant(variant)(config)
    name = f"quality-tolk-{variant}" if variant else "quality-tolk"
    return start_server(config, workdir, name, ready_timeout=900)


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


def tolk_systems(plan: Plan, url: str, variant: str | None) -> list[System]:
    """The systems a tolk server is measured as: each API, and its +tm and +altN where asked."""
    chosen = []
    for api in plan.apis:
        base = quality_speed.variant_name(SYSTEM_NAMES[api], variant)
        chosen.append(System(base, api, url))
        if plan.translation_memory and api in ("tolk", "deepl"):
            chosen.append(
                System(f"{base}+tm", api, url, translation_memory=plan.translation_memory)
            )
        if plan.alternatives and api in ALTERNATIVE_APIS:
            name = f"{base}+alt{plan.alternatives}"
            chosen.append(System(name, api, url, alternatives=plan.alternatives))
    return chosen


class Servers:
    """The servers a run measures, each up only while it is needed: a tolk server per block
    (the config as given, then each variant), stopped when its block has no more passes; the
    baseline started when first asked for and kept up to the end, so that rounds alternate
    against one baseline. Servers started here are stopped by PID."""

    def __init__(self, plan: Plan, workdir: Path) -> None:
        self.plan = plan
        self.workdir = workdir
        self.described: list[dict[str, Any]] = []
        self._tolk: LocalServer | None = None
        self._tolk_systems: list[System] | None = None
        self._vllm: LocalServer | None = None
        self._baseline: System | None = None

    async def tolk(self, variant: str | None) -> list[System]:
        if self._tolk_systems is not None:
            return self._tolk_systems
        if self.plan.url:
            url = self.plan.url.rstrip("/")
        else:
            self._tolk = start_tolk(self.plan, self.workdir, variant)
            url = self._tolk.url
        model = await tolk_models(url)
        self._tolk_systems = tolk_systems(self.plan, url, variant)
        for system in self._tolk_systems:
            self.described.append(
                {"name": system.name, "api": system.api, "url": url, "model": model}
                | ({"alternatives": system.alternatives} if system.alternatives else {})
                | ({"variant": variant} if variant else {})
            )
        return self._tolk_systems

    def stop_tolk(self) -> None:
        if self._tolk is not None:
            self._tolk.stop()
        self._tolk, self._tolk_systems = None, None

    async def baseline(self) -> System:
        if self._baseline is not None:
            return self._baseline
        if self.plan.openai:
            url, wanted = self.plan.openai.rstrip("/"), self.plan.openai_model
        else:
            self._vllm, wanted = start_vllm(self.plan, self.workdir)
            url = self._vllm.url
        self._baseline = System(BASELINE, "openai", url, await openai_model(url, wanted))
        started_here = "vLLM's OpenAI server started here" if self._vllm else "OpenAI-compatible"
        self.described.append(
            {"name": BASELINE, "api": started_here, "url": url, "model": self._baseline.model}
        )
        return self._baseline

    def pid_of(self, system: System) -> int | None:
        """The process serving `system`, where it was started here (py-spy needs it)."""
        server = self._vllm if system.name == BASELINE else self._tolk
        return server.proc.pid if server is not None else None

    def stop(self) -> None:
        self.stop_tolk()
        if self._vllm is not None:
            self._vllm.stop()
            self._vllm = None


def _recording(
    plan: Plan, servers: Servers, system: System, scored: set[str], workdir: Path
) -> profile.Recording | None:
    """py-spy started on `system`'s server for its first pass, where --profile asks and the
    server was started here."""
    pid = servers.pid_of(system)
    if not plan.profile or system.name in scored or pid is None:
        return None
    name = re.sub(r"[^A-Za-z0-9._-]", "-", system.name)
    recording = profile.Recording(pid, workdir.resolve() / f"profile-{name}.txt")
    recording.start()
    return recording


def schedule(plan: Plan) -> list[tuple[int, str | None, int, str]]:
    """(block, variant, round, "tolk" | "baseline") in the order the passes run: per block
    (the config, then each variant), rounds alternating which side goes first."""
    blocks: list[str | None] = [None, *plan.variants] if plan.measures_tolk else [None]
    out = []
    for block, variant in enumerate(blocks):
        for round_ in range(1, plan.rounds + 1):
            sides = ["tolk"] * plan.measures_tolk + ["baseline"] * plan.measures_baseline
            for side in sides if round_ % 2 else sides[::-1]:
                out.append((block, variant, round_, side))
    return out


async def run_quality(
    plan: Plan, workdir: Path, progress: Progress | None = None
) -> dict[str, Any]:
    """Every system on the plan's units, as many rounds as asked; the first pass of each
    system judged and summarised, every pass timed (quality_speed)."""
    records: list[dict[str, Any]] = []
    passes: list[dict[str, Any]] = []
    servers = Servers(plan, workdir)
    scored: set[str] = set()
    profiles: dict[str, dict[str, Any]] = {}
    steps = schedule(plan)
    try:
        for k, (block, variant, round_, side) in enumerate(steps):
            chosen = await servers.tolk(variant) if side == "tolk" else [await servers.baseline()]
            for system in chosen:
                recording = _recording(plan, servers, system, scored, workdir)
                found = []
                try:
                    for phase, units in phases(system, plan.units):
                        some, figures = await quality_speed.timed_pass(
                            system.name, system.url, round_,
                            translate_all(system, units, plan.concurrency, progress),
                            plan.concurrency,
                        )  # fmt: skip
                        found += some
                        passes.append(
                            figures | {"phase": phase, "block": block, "variant": variant}
                        )
                finally:  # py-spy stopped however the pass ends
                    recorded = recording is not None and recording.stop()
                if recorded:
                    assert recording is not None
                    profiles[system.name] = profile.summarize(
                        recording.output, recording.seconds, recording.rate
                    )
                if system.name not in scored:
                    scored.add(system.name)
                    records += found
            rest = steps[k + 1 :]
            if side == "tolk" and not any(b == block and s == "tolk" for b, _, _, s in rest):
                servers.stop_tolk()
    finally:
        servers.stop()
    quality_report.judge(records, plan.languages)
    results = {
        "schema": quality_report.SCHEMA,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(["tolk", *sys.argv[1:]]),
        "machine": machine(),
        "systems": servers.described,
        **plan.settings,
        "rounds": plan.rounds,
        "variants": list(plan.variants),
        "records": records,
        "speed": quality_speed.summarize(passes) | {"passes": passes},
        "profiles": profiles,
    }
    results["summary"] = quality_report.summarize(results)
    return results
