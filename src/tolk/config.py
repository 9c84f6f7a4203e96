"""Settings: one YAML file, environment overrides on top, CLI flags on top of those.

Environment overrides name a field by its path with `__` between parts, list items by index:
`TOLK_SERVER__PORT=9000`, `TOLK_MODELS__0__ENGINE__MAX_NUM_SEQS=32`. Values are parsed as
YAML scalars, so numbers and booleans keep their types.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tolk.languages import InvalidLanguageCode, LanguageCoverage, normalize, parse_pair

PromptFormatName = Literal["chat", "hunyuan-mt", "seed-x", "tower", "alma", "translategemma"]
PlaceholderSyntax = Literal["links", "tags"]  # tolk.translation.document.for_model

ENV_PREFIX = "TOLK_"
# The segment cache's section (SegmentCacheSettings), and the name it had before: still read,
# with a deprecation warning (`memory:` in the file, TOLK_MEMORY__... in the environment).
SEGMENT_CACHE_KEY = "segment_cache"
OLD_SEGMENT_CACHE_KEY = "memory"

log = logging.getLogger(__name__)


class ConfigError(Exception):
    """Configuration that cannot be used; the message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineSettings(_Strict):
    """vLLM engine settings, always passed explicitly (AsyncLLM's in-process defaults are small)."""

    max_num_seqs: int = Field(16, ge=1, description="Sequences decoded together per step.")
    max_num_batched_tokens: int = Field(8192, ge=16, description="Tokens scheduled per step.")
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="GPU only: fraction of GPU memory for this model's weights + KV cache; "
        "default 0.9 divided among the server's models.",
    )
    kv_cache_memory_bytes: ByteSize | None = Field(
        None,
        description="KV cache size, e.g. '1GiB'. Required on CPU (default 1GiB there); "
        "on GPU it overrides gpu_memory_utilization.",
    )
    max_model_len: int | None = Field(
        None, ge=16, description="Context length (model's own if unset)."
    )
    dtype: str = "auto"
    enforce_eager: bool | None = Field(
        None,
        description="Skip torch.compile and CUDA graphs: faster start, slower steps. "
        "Default: off on a GPU (CUDA graphs on), on for the CPU engine (saves ~30 s of "
        "compilation at each start).",
    )
    enable_prefix_caching: bool = True
    seed: int = 0
    trust_remote_code: bool = False
    max_waiting: int = Field(
        64,
        ge=0,
        description="Admission bound: requests waiting beyond the running batch; more get 503.",
    )
    scheduling: Literal["fcfs", "shortest_first"] = Field(
        "fcfs",
        description="Which waiting engine request runs next. fcfs: first come, first served "
        "(vLLM's default). shortest_first: vLLM's priority scheduling, each engine request "
        "ranked by the size of the translation request it belongs to (its segments, in powers "
        "of two), so a sentence runs before the waiting segments of a document that came "
        "first; requests of one size stay first come, first served. Running requests are "
        "never interrupted for it.",
    )
    gather_ms: float = Field(
        0,
        ge=0,
        le=200,
        description="GPU: while more than `gather_above` engine requests are in flight, hand "
        "new ones to vLLM together, each group this many milliseconds after its first arrived, "
        "so that their prompts are read in one engine step and the steps between them only "
        "decode (vLLM runs those as whole CUDA graphs, steps that read prompts in pieces; "
        "tolk.engine.gather). 0: each at once, as vLLM's own server does.",
    )
    gather_above: int = Field(
        64, ge=0, description="Engine requests in flight above which `gather_ms` applies."
    )
    gather_most: int = Field(
        32,
        ge=0,
        description="A group of `gather_ms` goes as soon as it holds this many engine "
        "requests, without waiting out its milliseconds: a burst (a client's batch, a markup "
        "pass's units sent at once) fills a group in a few milliseconds, and its prompts make "
        "a large enough step by then. 0: every group waits its `gather_ms`.",
    )
    extra_args: dict[str, Any] = Field(
        default_factory=dict, description="Further vllm AsyncEngineArgs fields, passed as given."
    )


# The example sentences tolk.translation.examples may show, by their source's length in
# characters: long enough to show a whole sentence translated, short enough that two add
# about 200 prompt tokens (Qwen's tokenizer; 400 into Nepali). `prompt_example_chars` picks
# the longest within them.
SHORTEST_EXAMPLE, LONGEST_EXAMPLE = 60, 160


class SamplingSettings(_Strict):
    """Decoding settings; greedy unless a model card recommends otherwise."""

    temperature: float = Field(0.0, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = None
    repetition_penalty: float | None = Field(None, gt=0)


def _sampled(count: int, sampling: SamplingSettings, count_name: str, sampling_name: str) -> None:
    """Several candidates of one prompt differ only if they are sampled."""
    if count > 1 and sampling.temperature == 0:
        raise ValueError(
            f"{count_name} > 1 needs {sampling_name}.temperature > 0 (greedy candidates are "
            f"all the same); set a temperature or {count_name}: 1"
        )


class CheckSettings(_Strict):
    """What tolk does with output that is not a translation (tolk.translation.checks): in the
    wrong language, the source echoed, a loop, cut at the budget. Such a segment is tried
    once more with `retry_sampling` and, for formats that take instructions, a firmer
    instruction; whatever is still wrong is returned with a warning, never silently."""

    enabled: bool = Field(True, description="Check every segment's output.")
    retry: bool = Field(True, description="Try a segment with a problem once more.")
    stop_loops: bool = Field(
        True,
        description="Have vLLM stop a generation whose last tokens repeat one pattern of "
        "1-24 tokens 8 times, rather than let the loop run to the output budget (vLLM's "
        "repetition detection, in 0.26 and 0.32; a release without it runs it to the budget).",
    )
    retry_instruction: bool = Field(
        True, description="The retry's prompt says again which language to answer in."
    )
    retry_sampling: SamplingSettings = Field(
        default_factory=lambda: SamplingSettings(repetition_penalty=1.2),
        description="Decoding settings of the retry (a repetition penalty breaks loops).",
    )
    markup_candidates: int = Field(
        4,
        ge=1,
        le=16,
        description="A unit whose placeholders did not come back is retried with this many "
        "outputs sampled in one engine request (vLLM's `n`: the prompt is read once) with "
        "`markup_sampling`; the one with the fewest problems is kept (`markup_first_clean`: "
        "the first without one). 1: one retry with "
        "`retry_sampling`, as for other problems.",
    )
    markup_first_clean: bool = Field(
        False,
        description="The markup retry's `markup_candidates` go as that many engine requests "
        "of one output each (vLLM runs `n` as such requests too, the prompt read once), and "
        "the first to come back with no problem is kept, the others aborted in the engine: "
        "the unit waits for its quickest good candidate, not for the longest of them. Where "
        "none is without a problem, all are waited for and the least bad kept, as with false "
        "(one request with `n`). Off by default: on one H100 with the 0.5B Qwen (11 rounds "
        "each, docs/benchmarks.md section 34) de/fr/es markup units were no faster against "
        "vLLM's server beside them (HTML p50 1.83x against 1.75x, markdown 1.58x against "
        "1.56x) and the engine made as many tokens: a third of the units retried get no "
        "candidate back with their markup (then all are waited for either way), and a clean "
        "one is seldom much shorter than the rest.",
    )
    markup_guided: bool = Field(
        False,
        description="Constrain the markup retry's outputs (vLLM's structured outputs, a "
        "regular expression from tolk.translation.guide) to bring back every placeholder "
        "exactly once, in the source's order; the model still chooses the words. Off by "
        "default: the 0.5B Qwen, forced so, often wrote its translation and then rambled on "
        "until it could place the placeholder (docs/benchmarks.md, Quality).",
    )
    markup_fallback_early: bool = Field(
        True,
        description="A unit whose placeholders did not come back has its fallback (its "
        "plain text, without emphasis) translated at once, beside its markup retry, rather "
        "than after it: the unit's answer comes one try sooner where the retry does not mend, "
        "and where it does the fallback's engine request is aborted, its tokens so far spent.",
    )
    markup_retry_min_mended: float = Field(
        0.2,
        ge=0,
        le=1,
        description="A language pair whose markup retries brought every placeholder back in "
        "less than this share of its last 200 goes without them: its units fall back to "
        "their plain text at once (one in 10 is still retried, so that the share keeps being "
        "measured); 0: always retried (tolk.translation.watch).",
    )
    markup_skip_limit: float = Field(
        0.8,
        gt=0,
        le=1,
        description="A language pair whose markup units with emphasis, sent whole, kept "
        "their paired markup (first try or markup retry; the engine's outputs, not the "
        "segment cache's) in less than 1 minus this share of its last 200 has its next "
        "requests' units with emphasis start without it, as their fallback would "
        "(flagged `markup_dropped`): the whole unit's first try and markup retry are engine "
        "requests spent on outputs thrown away (on one H200 the 0.5B Qwen's en-ne units "
        "kept it in 3 of 24; so started, its markup passes made 28% fewer tokens at the "
        "same latencies: docs/benchmarks.md, section 30). One request in 10 still goes "
        "whole, so the share keeps being measured; 1: every unit whole first "
        "(tolk.translation.watch).",
    )
    markup_skip_unwritten: bool = Field(
        True,
        description="A language pair whose plain first tries go as retries "
        "(`first_as_retry_limit`: the model does not write the target language; known after "
        "20 plain texts, never with `first_as_retry_limit` 1 or `candidates.n` > 1, where "
        "first tries are not watched) skips the "
        "markup steps that `markup_skip_limit` and `markup_retry_min_mended` would skip "
        "(its units with emphasis start without it; a unit whose placeholders did not come "
        "back goes to its fallback without a markup retry) from its first markup unit on, "
        "not only once 20 of its own outcomes say so: a markup pass sends all its units at "
        "once, so those outcomes come after every unit went whole and was retried (on one "
        "H200 the 0.5B Qwen's en-ne units took 4.7-5.6 s in their first pass, 3.8 s once "
        "learnt, section 30 of docs/benchmarks.md; presumed, 2.8-4.1 s in their first pass "
        "of four runs, section 31). One in 10 still does them, and once the "
        "pair has 20 outcomes of its own they decide. Applies only where those steps' own "
        "watches are on.",
    )
    markup_split_unwritten: bool = Field(
        False,
        description="A language pair whose plain first tries go as retries "
        "(`first_as_retry_limit`: the model does not write the target language) sends the "
        "text runs of its units with inline markup one by one from the start, each a short "
        "plain segment going as a retry, the markup kept where it was (flagged "
        "`markup_split`), rather than first the whole sentence with placeholders and its "
        "retries. The trade, on one H200 with the 0.5B Qwen (docs/benchmarks.md, section "
        "33): en-ne markup units 1.2 s a unit p50 against 4.3 s, 45% fewer markup tokens; but "
        "the runs keep about twice the sequences in the engine through the pass, and the "
        "de/fr/es markup units beside them took 1.4x as long (1.16 s against 0.85 s p50). Decided "
        "by the first-try watch, so a pair goes back to whole sentences once its first tries "
        "stop being replaced.",
    )
    retry_min_mended: float = Field(
        0.2,
        ge=0,
        le=1,
        description="A language pair whose retries (other than markup retries and retries "
        "of a copied example, always done) gave a less bad output in less than this share of "
        "its last 200 goes without them: its first tries are returned with their problems "
        "flagged (one in 10 is still retried, so that the share keeps being measured); 0: "
        "always retried (tolk.translation.watch).",
    )
    first_as_retry_limit: float = Field(
        0.5,
        gt=0,
        le=1,
        description="A language pair whose plain texts' first tries were replaced by their "
        "retry's output in more than this share of its last 200 (copies of an example aside: "
        "the examples' watch) gets those first tries as its retries are: without "
        "examples, told again which language to answer in, with `retry_sampling`; one engine "
        "request where it took two, and no greedy loop run first (one in 10 still goes as "
        "usual, so that the share keeps being measured; a segment with placeholders is "
        "neither counted nor switched, nor are requests with alternatives or `candidates.n` "
        "> 1); 1: first tries "
        "always as usual (tolk.translation.watch).",
    )
    markup_sampling: SamplingSettings = Field(
        default_factory=lambda: SamplingSettings(temperature=0.7, top_p=0.95),
        description="Decoding settings of the markup retry's candidates (sampled: greedy "
        "ones would all be the same).",
    )

    @model_validator(mode="after")
    def _candidates_differ(self) -> CheckSettings:
        _sampled(
            self.markup_candidates, self.markup_sampling, "markup_candidates", "markup_sampling"
        )
        return self


class CandidateSettings(_Strict):
    """Minimum-Bayes-risk selection (tolk.translation.consensus): each segment translated
    `n` times, the greedy output and `n`-1 sampled with `sampling` (two engine requests, the
    prompt read once thanks to prefix caching), and the candidate with the fewest problems
    that agrees most with the others (mean chrF++) kept. Costs about `n` times the output
    tokens; worth it where the engine has room (a GPU), see docs/benchmarks.md "Quality"."""

    n: int = Field(1, ge=1, le=16, description="Candidates per segment; 1: greedy alone.")
    markup_n: int = Field(
        1,
        ge=1,
        le=16,
        description="With output checks on, candidates for the first try of a segment with "
        "placeholders (inline markup), where more than `n`: beside the greedy output, "
        "`markup_n`-1 sampled with `sampling` (the prompt read once), waited for only if the "
        "greedy output has problems, else aborted (their tokens are then not in the "
        "request's usage); the one with the fewest problems kept. None for a pair whose "
        "plain first tries are mostly replaced by their retries (`checks.first_as_retry_limit`"
        ": the model does not write that language). With `n` > 1 or alternatives asked for, "
        "as many are sampled and all waited for. On the CPU, units one at a time, with 2: HTML "
        "p50 3.1-3.3 s against 4.4-5.8, markdown 3.0-3.2 against 2.0-2.2 (docs/benchmarks.md,"
        " section 29).",
    )
    markup_twin_pairs: int = Field(
        0,
        ge=0,
        le=16,
        description="`markup_n`'s twins (where it is above `n`) only for a segment with at "
        "least this many paired "
        "placeholders (emphasis, links: each one the greedy output may lose; a code span or "
        "an image, unpaired, it rarely does); 0: every segment with placeholders. A twin "
        "is one more sequence in the engine's batch while its greedy output runs, and a step "
        "takes longer with every sequence it holds. On one H200 at 3 (the bench's HTML units "
        "have three pairs, its markdown units two and a code span), de/fr/es markup units' "
        "p50 was 1.66x vLLM's server's for markdown and 2.12x for HTML over 17 rounds of "
        "four runs, against 1.80x and 2.35x with a twin for every segment (7 rounds, "
        "blocks run after: docs/benchmarks.md, section 31). On the CPU the 0.5B Qwen's "
        "greedy first tries lost a placeholder in 14 of 36 such markdown units and 19 of 36 "
        "HTML units.",
    )
    sampling: SamplingSettings = Field(
        default_factory=lambda: SamplingSettings(temperature=0.7, top_p=0.95),
        description="Decoding settings of the sampled candidates.",
    )

    @model_validator(mode="after")
    def _candidates_differ(self) -> CandidateSettings:
        _sampled(self.n, self.sampling, "candidates.n", "candidates.sampling")
        _sampled(self.markup_n, self.sampling, "candidates.markup_n", "candidates.sampling")
        return self


class ModelSettings(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    path: str = Field(min_length=1, description="Local directory or Hugging Face model id.")
    prompt_format: PromptFormatName = "chat"
    placeholders: PlaceholderSyntax = Field(
        "links",
        description="How inline markup's placeholders are shown to the model: markdown links "
        "and code spans ([words](1), `2`), or XML tags (<g1>words</g1>, <x2/>).",
    )
    placeholders_told: bool = Field(
        False,
        description="Chat format, `links`: a segment whose placeholders are shown as links and "
        "code spans gets a system message naming them and asking for each once, around the "
        "translated words (tags always get theirs). On the CPU the 0.5B Qwen lost a "
        "placeholder on 21 of 48 first tries told, 28 untold (docs/benchmarks.md, section "
        "25).",
    )
    prompt_examples: int = Field(
        0,
        ge=0,
        le=8,
        description="Chat format only: show the model this many example translations (human "
        "translations from the parallel sample tolk ships) as earlier turns before its text; "
        "a segment with placeholders gets one with placeholders. The same for every request "
        "of a pair, so prefix caching reads them once (tolk.translation.examples).",
    )
    prompt_example_chars: int = Field(
        LONGEST_EXAMPLE,
        ge=SHORTEST_EXAMPLE,
        le=LONGEST_EXAMPLE,
        description="The longest example shown (its source sentence, in characters; the "
        "sample's sentences of 60 to this many, in its order). Shorter examples make every "
        "prompt of the pair shorter, and the engine's steps with them (docs/benchmarks.md, "
        "section 24).",
    )
    prompt_example_turns: Literal["asked", "bare"] = Field(
        "asked",
        description="How each example's turn asks for its translation: `asked`, in the "
        "same words as the text's own turn (the instruction, then the sentence); `bare`, "
        "the sentence alone, the instruction written once, with the text. `bare` spares "
        "every prompt about 26 tokens an example (Qwen's tokenizer, English instruction).",
    )
    examples_copy_limit: float = Field(
        0.5,
        gt=0,
        le=1,
        description="With prompt_examples and checks: a language pair whose first tries copied "
        "an example in more than this share of its last 200 gets its first tries without "
        "examples, as its retries are (one in 10 still shows them, so that the share keeps "
        "being measured); 1: always shown (tolk.translation.watch).",
    )
    languages: tuple[str, ...] = Field((), description="Serve any pair among these languages.")
    pairs: tuple[str, ...] = Field((), description="Serve these pairs, written 'en>de'.")
    max_tokens_ratio: float | None = Field(
        None,
        gt=0,
        description="Output budget: this many tokens per source token, plus extra, for every "
        "pair. Default: measured per language pair with the model's own tokenizer on the "
        "parallel sample tolk ships (tolk.budget); 2.0 outside it.",
    )
    max_tokens_extra: int = Field(16, ge=1)
    max_segment_tokens: int = Field(
        200,
        ge=8,
        description="With split 'sentences', a line longer than this many tokens is cut at "
        "sentence boundaries into segments of at most this size, translated side by side.",
    )
    sampling: SamplingSettings = SamplingSettings()
    checks: CheckSettings = CheckSettings()
    candidates: CandidateSettings = CandidateSettings()
    engine: EngineSettings = EngineSettings()

    @field_validator("languages")
    @classmethod
    def _normalise_languages(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            return tuple(dict.fromkeys(normalize(code) for code in value))
        except InvalidLanguageCode as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("pairs")
    @classmethod
    def _normalise_pairs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            return tuple(dict.fromkeys(str(parse_pair(text)) for text in value))
        except InvalidLanguageCode as exc:
            raise ValueError(str(exc)) from exc

    @model_validator(mode="after")
    def _needs_languages(self) -> ModelSettings:
        if not self.languages and not self.pairs:
            raise ValueError("give 'languages' (any pair among them) or 'pairs' ('en>de'), or both")
        return self

    @property
    def markup_twins(self) -> int:
        """Sampled twins beside a markup segment's greedy first try (`candidates.markup_n`):
        where more than `candidates.n` and the checks are on (without them nothing finds a
        problem in the greedy output, so a twin is never needed)."""
        n, markup_n = self.candidates.n, self.candidates.markup_n
        return markup_n - 1 if markup_n > n and self.checks.enabled else 0

    @property
    def coverage(self) -> LanguageCoverage:
        return LanguageCoverage(
            languages=self.languages, pairs=tuple(parse_pair(p) for p in self.pairs)
        )

    def missing_directory(self) -> str | None:
        """Why `path` cannot be loaded, when it names a local directory (absolute, ./, ../
        or ~) that is not there; None otherwise. Without this check vLLM takes the missing
        directory for a hub id and fails with an unrelated repo-id message."""
        if not re.match(r"^(/|\.\.?/|~)", self.path):
            return None
        where = Path(self.path).expanduser()
        if where.exists():
            return None
        return (
            f"model '{self.name}': there is nothing at {where}. For the demo model run "
            f"`make demo-model` (or `tolk make-test-model {where}`); for a real model give "
            "its directory or a Hugging Face id such as Qwen/Qwen2.5-1.5B-Instruct"
        )


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    request_timeout: float = Field(30.0, gt=0, description="Per-request deadline in seconds.")
    segment_timeout: float = Field(
        0.0,
        ge=0,
        description="Seconds added to a request's deadline for each round of segments it "
        "brings (its segments divided by how many the model runs at once), so the deadline "
        "follows the amount of work: a long document gets longer than a sentence.",
    )
    max_request_chars: int = Field(
        131_072, ge=1, description="Most characters of text in one request, all texts together."
    )
    max_texts: int = Field(50, ge=1, description="Most texts in one request.")
    max_alternatives: int = Field(
        3,
        ge=0,
        description="Most alternative translations a request may ask for per text (each is "
        "a sampled output of every segment, so n alternatives cost about n times the output "
        "tokens); LibreTranslate's web page asks for 3.",
    )
    max_body_bytes: ByteSize = Field(
        ByteSize(128 << 10), description="Largest request body (DeepL's limit: 128 KiB)."
    )
    max_file_bytes: ByteSize = Field(
        ByteSize(10 << 20),
        description="Largest file sent to /translate/file, or glossary sent to DeepL's "
        "glossary endpoints (DeepL's limit for both: 10 MB).",
    )
    max_file_chars: int = Field(
        1_000_000, ge=1, description="Most characters of text in one translated file."
    )
    max_unzipped_bytes: ByteSize = Field(
        ByteSize(64 << 20),
        description="Most bytes a zipped file (.docx, .pptx, .xlsx, .odt, .odp, .ods, .epub) may "
        "inflate to, all its members together, checked before it is parsed (a zip bomb is "
        "refused with 413).",
    )
    prepare_threads: int = Field(
        2,
        ge=1,
        description="Threads that parse, segment and put back together requests' texts and "
        "files, off the event loop (work that grows with the input); also how many requests "
        "do so at once.",
    )
    inline_chars: int = Field(
        1000,
        ge=0,
        description="Requests of texts (not files) of at most this many characters, without a "
        "glossary, are parsed, segmented and put back together on the event loop, bounded "
        "work cheaper than the preparation threads' hand-offs (docs/benchmarks.md, section "
        "28); larger ones go to the threads. 0: every request to the threads.",
    )
    turn_budget_ms: float = Field(
        5.0,
        ge=0,
        description="Milliseconds of per-text work (a segment's prompt built and handed to "
        "the engine, a document parsed) the event loop runs in one pass before it reads its "
        "sockets again (tolk.translation.pacing): a probe or a refusal waits behind at most "
        "twice this much of a burst. 0: one piece a pass (slower to take in a burst).",
    )
    subtitles_in_context: bool = Field(
        False,
        description="Translate a sentence that runs over several subtitle cues as one unit, "
        "split back into its cues (by the cue boundaries the model keeps, else by the cues' "
        "share of the text), instead of each cue alone. Off: with Qwen2.5-Coder-0.5B it "
        "scored lower (chrF++ 32.97 against 34.72 cue by cue, docs/benchmarks.md); try it "
        "with a larger model.",
    )
    loop_stall_warning: float = Field(
        0.1,
        gt=0,
        description="Seconds the event loop may be kept busy by one step before a warning "
        "with the step's stack is logged (and tolk_event_loop_stalls_total counts it).",
    )
    shutdown_grace: float = Field(
        20.0, ge=0, description="On SIGTERM, how long in-flight requests may run before 503."
    )
    document_timeout: float = Field(
        600.0,
        gt=0,
        description="Deadline of a document translated in the background (DeepL's /v2/document).",
    )
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    max_restarts: int = Field(
        5,
        ge=0,
        description="Engine restarts allowed within restart_window; one more death and the "
        "server gives up: /health turns 503 and the process exits with status 3 after draining, "
        "for its supervisor (Kubernetes, systemd, Docker) to start a fresh one.",
    )
    restart_window: float = Field(
        600.0, gt=0, description="Seconds over which max_restarts is counted."
    )
    restart_backoff: float = Field(
        1.0,
        ge=0,
        description="Wait before the first restart of a dead engine; doubles with "
        "each further restart in the window.",
    )
    restart_backoff_max: float = Field(60.0, ge=0, description="The longest wait before a restart.")
    max_connections: int | None = Field(
        2048,
        ge=1,
        description="Open connections at most (uvicorn's limit_concurrency); beyond it new "
        "requests get 503 before any work. None: unbounded.",
    )
    header_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds a request's line and headers may take to arrive, from the "
        "connection (or the request's first byte) on; a slower client is disconnected.",
    )
    keep_alive: float = Field(
        5.0, gt=0, description="Seconds an idle keep-alive connection is kept open."
    )
    body_timeout: float = Field(
        30.0,
        gt=0,
        description="Seconds a request body may take to arrive, and the longest pause between "
        "two of its chunks; a slower client gets 408 and is disconnected.",
    )
    backlog: int = Field(2048, ge=1, description="Pending connections the socket queues.")


class GlossarySettings(_Strict):
    """A named glossary for one language pair, used by requests that give its `glossary_id`."""

    source_lang: str = Field(min_length=1)
    target_lang: str = Field(min_length=1)
    entries: dict[str, str] = Field(min_length=1, description="Source term -> target term.")


class AccessSettings(_Strict):
    """API keys, rates and quotas (tolk.server.access). Keys are made with `tolk keys add`."""

    db: Path | None = Field(
        None,
        description="The SQLite file of keys, usage and API-made glossaries; none: kept in "
        "memory (no keys, glossaries lost at restart).",
    )
    require_key: bool = Field(False, description="Refuse requests that send no key.")
    anonymous_rate: str | None = Field(
        None, description="Request rate for callers without a key, e.g. '20/second'."
    )
    max_glossaries: int = Field(
        100,
        ge=1,
        description="Glossaries one key may keep (made through DeepL's API), and style rules.",
    )
    max_glossary_bytes: ByteSize = Field(
        ByteSize(16 << 20),
        description="Bytes of entries one key's glossaries may hold, all together (every "
        "server keeps every key's glossaries in memory).",
    )

    @field_validator("anonymous_rate")
    @classmethod
    def _valid_rate(cls, value: str | None) -> str | None:
        return valid_rate(value)


def valid_rate(value: str | None) -> str | None:
    """A rate in the `limits` notation ('10/second', '100 per minute'), or ValueError."""
    if value is not None:
        import limits

        try:
            limits.parse(value)
        except ValueError as exc:
            raise ValueError(f"'{value}' is not a rate; write it like '10/second'") from exc
    return value


class StoreSettings(_Strict):
    """Where a fleet keeps what its servers share (tolk.store.database)."""

    url: str | None = Field(
        None,
        description="SQLAlchemy URL of one database for keys, usage, API-made glossaries and "
        "style rules, and the segment cache: postgresql+psycopg://user@host/db for servers "
        "that share them. Instead of access.db.",
    )


class SegmentCacheSettings(_Strict):
    """The segment cache (tolk.store.segment_cache): translated segments are not sent to the
    engine again, across requests, restarts and (with a shared database) servers. Read under
    its old name `memory:` too (logged as deprecated; not both)."""

    enabled: bool = Field(True, description="Look segments up before the engine; store them.")
    url: str | None = Field(
        None,
        description="SQLAlchemy URL of the segment cache's database: sqlite:///path/cache.db "
        "(one server), postgresql+psycopg://user@host/db (a fleet shares it); none: "
        "store.url's database, else this process's memory only.",
    )
    max_entries: int = Field(
        1_000_000, ge=1, description="Segments kept; the least recently used go first."
    )
    scope: Literal["key", "shared"] = Field(
        "key",
        description="Whose segments answer a caller. key: its own only (partitioned per API "
        "key; callers without a key share one partition), so a hit reveals nothing of another "
        "key's texts, at the cost of translating a segment once per key. shared: every "
        "caller's; answers then report no segment cache hits (`memory_segments`) or token "
        "counts, though their timing still tells a hit.",
    )


class DeeplSettings(_Strict):
    model_types: dict[Literal["quality_optimized", "latency_optimized"], str] = Field(
        default_factory=dict,
        description="DeepL's model_type mapped to a configured model's name; unmapped: ignored.",
    )


class TolkConfig(_Strict):
    server: ServerSettings = ServerSettings()
    access: AccessSettings = AccessSettings()
    deepl: DeeplSettings = DeeplSettings()
    segment_cache: SegmentCacheSettings = SegmentCacheSettings()
    store: StoreSettings = StoreSettings()
    models: tuple[ModelSettings, ...] = Field(min_length=1)
    glossaries: dict[str, GlossarySettings] = Field(
        default_factory=dict, description="Named glossaries, by the id requests give."
    )

    @field_validator("models")
    @classmethod
    def _unique_names(cls, value: tuple[ModelSettings, ...]) -> tuple[ModelSettings, ...]:
        names = [m.name for m in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"model names must be unique; repeated: {', '.join(dupes)}")
        return value

    @model_validator(mode="after")
    def _one_key_store(self) -> TolkConfig:
        if self.store.url and self.access.db:
            raise ValueError(
                "give the key store once: access.db (a SQLite file) or store.url (a database "
                "URL), not both"
            )
        return self


def describe_validation_error(exc: ValidationError, source: str) -> str:
    lines = [f"invalid configuration ({source}):"]
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "(top level)"
        lines.append(f"  {where}: {err['msg']}")
    return "\n".join(lines)


def _set_path(data: dict[str, Any], path: list[str], value: Any) -> None:
    """Set data[path] for an env override; list items are addressed by index."""
    node: Any = data
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"override {'__'.join(path)}: no list item {part}")
            key: Any = int(part)
        else:
            key = part
        if last:
            node[key] = value
        else:
            if not isinstance(node, list) and key not in node:
                node[key] = {}
            node = node[key]


def env_overrides(environ: Mapping[str, str]) -> list[tuple[list[str], Any]]:
    """(path, value) for every TOLK_SECTION__FIELD variable."""
    out = []
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        out.append((path, yaml.safe_load(raw) if raw else raw))
    return out


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Model paths, the access db and a SQLite segment cache's file (under `segment_cache:`
    or its old name `memory:`) starting with ./ or ../ are relative to the config file."""
    for model in data.get("models") or []:
        path = model.get("path") if isinstance(model, dict) else None
        if isinstance(path, str) and re.match(r"^\.\.?/", path):
            model["path"] = str((base / path).resolve())
    access = data.get("access")
    if isinstance(access, dict):
        db = access.get("db")
        if isinstance(db, str) and re.match(r"^\.\.?/", db):
            access["db"] = str((base / db).resolve())
    for key in (SEGMENT_CACHE_KEY, OLD_SEGMENT_CACHE_KEY):
        cache = data.get(key)
        if isinstance(cache, dict):
            url = cache.get("url")
            relative = re.match(r"^sqlite:///(\.\.?/.*)$", url) if isinstance(url, str) else None
            if relative:
                cache["url"] = f"sqlite:///{(base / relative[1]).resolve()}"


def _renamed_segment_cache(data: dict[str, Any], source: str) -> dict[str, Any]:
    """`data` with its old `memory:` section under `segment_cache:`, logged as deprecated;
    a ConfigError when both are given."""
    if OLD_SEGMENT_CACHE_KEY not in data:
        return data
    if SEGMENT_CACHE_KEY in data:
        raise ConfigError(
            f"{source}: '{OLD_SEGMENT_CACHE_KEY}' and '{SEGMENT_CACHE_KEY}' are both given; "
            f"'{OLD_SEGMENT_CACHE_KEY}' is the old name of '{SEGMENT_CACHE_KEY}': keep only "
            f"'{SEGMENT_CACHE_KEY}'"
        )
    log.warning(
        "%s: the configuration key '%s' is deprecated: rename it '%s' (the segment cache; "
        "the old name is still read)",
        source,
        OLD_SEGMENT_CACHE_KEY,
        SEGMENT_CACHE_KEY,
    )
    return {
        (SEGMENT_CACHE_KEY if key == OLD_SEGMENT_CACHE_KEY else key): value
        for key, value in data.items()
    }


def _renamed_env_paths(
    overrides: list[tuple[list[str], Any]],
) -> list[tuple[list[str], Any]]:
    """Env overrides with TOLK_MEMORY__... (the segment cache's old name) read as
    TOLK_SEGMENT_CACHE__..., logged as deprecated; a ConfigError when both prefixes are set."""
    old = [path for path, _ in overrides if path[0] == OLD_SEGMENT_CACHE_KEY]
    if not old:
        return overrides
    old_prefix = f"{ENV_PREFIX}{OLD_SEGMENT_CACHE_KEY.upper()}__"
    new_prefix = f"{ENV_PREFIX}{SEGMENT_CACHE_KEY.upper()}__"
    if any(path[0] == SEGMENT_CACHE_KEY for path, _ in overrides):
        raise ConfigError(
            f"environment: {old_prefix}... and {new_prefix}... variables are both set; "
            f"{old_prefix} is the old name of {new_prefix}: keep only {new_prefix}..."
        )
    log.warning(
        "environment: %s... variables are deprecated: rename them %s... (the segment cache; "
        "the old name is still read)",
        old_prefix,
        new_prefix,
    )
    return [
        ([SEGMENT_CACHE_KEY, *path[1:]] if path[0] == OLD_SEGMENT_CACHE_KEY else path, value)
        for path, value in overrides
    ]


def build_config(
    data: dict[str, Any],
    *,
    source: str = "configuration",
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TolkConfig:
    """Validate `data` after applying env overrides, then `overrides` ({"server.port": 1}).
    The segment cache's old key `memory` (in `data` and as TOLK_MEMORY__...) is read as
    `segment_cache`, with a deprecation warning logged once for each."""
    data = _renamed_segment_cache(dict(data), source)
    for path, value in _renamed_env_paths(
        env_overrides(os.environ if environ is None else environ)
    ):
        _set_path(data, path, value)
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set_path(data, dotted.split("."), value)
    try:
        return TolkConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, source)) from exc


def require_model_directories(settings: TolkConfig) -> None:
    """ConfigError naming each configured local model directory that is missing."""
    missing = [m for m in (model.missing_directory() for model in settings.models) if m]
    if missing:
        raise ConfigError("; ".join(missing))


def read_yaml_mapping(path: Path, expected: str) -> dict[str, Any]:
    """A YAML file whose top level is a mapping, or a ConfigError saying what is wrong."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be {expected}")
    return data


def load_config(
    path: Path,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TolkConfig:
    data = read_yaml_mapping(path, "a mapping with 'server' and 'models'")
    _resolve_paths(data, path.parent)
    return build_config(data, source=str(path), environ=environ, overrides=overrides)
