"""Subtitles translated in context against cue by cue, measured with the real model.

An English SubRip file is made from FLORES-101 devtest sentences (lines 1-120 of
/work/shared/quality/flores101/eng.txt: consecutive lines come from the same articles), each
sentence broken into 1-3 cues at word boundaries as subtitlers break them (lines of about 42
characters, two to a cue, cut after a comma or before a conjunction where one is near), with
made-up timings. It is translated to German through `POST /translate/file` of a `tolk serve`
on loopback twice: once with `server.subtitles_in_context` on (cues of one sentence joined:
tolk.translation.subtitles) and once with it off (each cue alone, tolk's default). Each
sentence's cues are joined back and scored with chrF++ (sacrebleu) against the human German
lines (deu.txt); the cues left empty or unchanged and the lines outside cue text that differ
are counted. Written to docs/benchmarks/subtitles-context/ (results.json, results.md).

    nice -n 10 .venv/bin/python scripts/subtitle-context.py [--sentences 120] \
        [--config configs/qwen2.5-coder-0.5b.yaml]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import sacrebleu
import yaml

from tolk.local.processes import LocalServer, free_port
from tolk.translation.subtitles import parse_srt

REPO = Path(__file__).resolve().parent.parent
FLORES = Path("/work/shared/quality/flores101")
OUT = REPO / "docs" / "benchmarks" / "subtitles-context"
LINE = 42  # characters a subtitle line holds
CONJUNCTIONS = frozenset(
    (
        *("and", "but", "or", "because", "which", "who", "that", "when", "while", "so"),
        *("although", "though", "whereas", "if", "as", "since", "after", "before", "until"),
        *("where", "whether"),
    )
)


def breaks(words: list[str], pieces: int) -> list[list[str]]:
    """`words` in `pieces` runs of about equal length, each cut after a comma, semicolon or
    colon or before a conjunction when one is within a third of a run's length of the even
    cut, else at the nearest word boundary."""
    if pieces <= 1 or len(words) < pieces:
        return [words]
    lengths = [len(w) + 1 for w in words]
    total = sum(lengths)
    cuts: list[int] = []
    for k in range(1, pieces):
        target = total * k / pieces
        best: tuple[float, int] | None = None
        low = cuts[-1] + 1 if cuts else 1
        high = len(words) - (pieces - k) + 1
        at = sum(lengths[:low])
        for i in range(low, high):  # cut before words[i]
            good = words[i - 1][-1] in ",;:" or words[i].lower() in CONJUNCTIONS
            cost = abs(at - target) - (total / pieces / 3 if good else 0)
            if best is None or cost < best[0]:
                best = (cost, i)
            at += lengths[i]
        assert best is not None
        cuts.append(best[1])
    bounds = [0, *cuts, len(words)]
    return [words[a:b] for a, b in itertools.pairwise(bounds)]


def cues_of(sentence: str) -> list[str]:
    """A sentence as subtitlers break it: 1-3 cues of up to two lines of about 42
    characters, each cue's text with its line break."""
    words = sentence.split()
    count = max(1, min(3, math.ceil(len(sentence) / (2 * LINE))))
    out = []
    for cue in breaks(words, count):
        text = " ".join(cue)
        lines = breaks(cue, 2) if len(text) > LINE else [cue]
        out.append("\n".join(" ".join(line) for line in lines))
    return out


def timestamp(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


@dataclass(frozen=True)
class Subtitles:
    srt: str
    sentence_of_cue: list[int]  # cue index (0-based) -> its sentence
    cue_texts: list[str]


def subtitles(sentences: list[str]) -> Subtitles:
    blocks: list[str] = []
    owner: list[int] = []
    texts: list[str] = []
    clock = 1.0
    for s, sentence in enumerate(sentences):
        for text in cues_of(sentence):
            length = 1.0 + len(text) / 15
            n = len(blocks) + 1
            blocks.append(f"{n}\n{timestamp(clock)} --> {timestamp(clock + length)}\n{text}\n")
            owner.append(s)
            texts.append(text)
            clock += length + 0.2
        clock += 0.5
    return Subtitles("\n".join(blocks), owner, texts)


def cue_texts(srt: str) -> tuple[list[str], list[str]]:
    """Each cue's text (its lines joined by a space) and every line that is not cue text."""
    texts: list[str] = []
    rest: list[str] = []
    for block in srt.strip("\n").split("\n\n"):
        lines = block.split("\n")
        rest += lines[:2]
        texts.append(" ".join(lines[2:]))
    return texts, rest


def start(command: list[str], config: dict[str, Any], workdir: Path, name: str) -> LocalServer:
    port = free_port()
    config = {**config, "server": {**config["server"], "host": "127.0.0.1", "port": port}}
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    env = dict(os.environ)
    runtime = REPO / ".runtime"
    for key, sub in (
        ("TMPDIR", "tmp"),
        ("VLLM_CACHE_ROOT", "vllm"),
        ("XDG_CACHE_HOME", "cache"),
        ("HF_HOME", "huggingface"),
        ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
    ):
        env.setdefault(key, str(runtime / sub))
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    return LocalServer.start(
        [*command, "serve", "--config", str(path)],
        port,
        workdir / f"{name}.log",
        env=env,
        cwd=REPO,
        ready_timeout=900,
    )


def translate(server: LocalServer, srt: str) -> tuple[str, float, dict[str, str]]:
    began = time.monotonic()
    response = httpx.post(
        f"{server.url}/translate/file",
        files={"file": ("flores.srt", srt.encode())},
        data={"source_lang": "en", "target_lang": "de"},
        timeout=7200,
    )
    response.raise_for_status()
    tolk_headers = {k: v for k, v in response.headers.items() if k.lower().startswith("x-tolk")}
    return response.content.decode("utf-8"), time.monotonic() - began, tolk_headers


def scored(
    made: Subtitles, out: str, references: list[str], sentences: list[str]
) -> dict[str, Any]:
    texts, rest = cue_texts(out)
    _, source_rest = cue_texts(made.srt)
    joined = [""] * len(sentences)
    for text, s in zip(texts, made.sentence_of_cue, strict=True):
        joined[s] = f"{joined[s]} {text}".strip()
    source_flat = [re.sub(r"\s+", " ", t) for t in made.cue_texts]
    chrf = sacrebleu.corpus_chrf(joined, [references], word_order=2)
    per_sentence = [
        sacrebleu.sentence_chrf(h, [r], word_order=2).score
        for h, r in zip(joined, references, strict=True)
    ]
    multi = [i for i, s in enumerate(sentences) if made.sentence_of_cue.count(i) > 1]
    return {
        "chrf++": round(chrf.score, 2),
        "chrf++_sentences_over_several_cues": round(
            sacrebleu.corpus_chrf(
                [joined[i] for i in multi], [[references[i] for i in multi]], word_order=2
            ).score,
            2,
        ),
        "cues": len(texts),
        "empty_cues": sum(1 for t in texts if not t.strip()),
        "unchanged_cues": sum(1 for t, s in zip(texts, source_flat, strict=True) if t == s),
        "other_lines_changed": sum(1 for a, b in zip(rest, source_rest, strict=True) if a != b),
        "translations": joined,
        "sentence_chrf++": [round(x, 2) for x in per_sentence],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=120)
    parser.add_argument("--config", type=Path, default=REPO / "configs/qwen2.5-coder-0.5b.yaml")
    args = parser.parse_args()
    sentences = (FLORES / "eng.txt").read_text(encoding="utf-8").splitlines()[: args.sentences]
    references = (FLORES / "deu.txt").read_text(encoding="utf-8").splitlines()[: args.sentences]
    made = subtitles(sentences)
    doc = parse_srt(made.srt)
    grouped = sum(1 for u in doc.units if type(u).__name__ == "CueGroup")
    config = yaml.safe_load(args.config.read_text())
    for model in config["models"]:
        model["path"] = str((args.config.parent / model["path"]).resolve())
    config["segment_cache"] = {"enabled": False}  # each mode's own engine work
    config["server"] |= {"request_timeout": 7200, "segment_timeout": 600}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "flores-en.srt").write_text(made.srt, encoding="utf-8")
    modes = {"cue_by_cue": False, "in_context": True}  # server.subtitles_in_context
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="subtitle-context-") as tmp:
        for mode, in_context in modes.items():
            setting = {**config, "server": {**config["server"], "subtitles_in_context": in_context}}
            server = start([sys.executable, "-m", "tolk"], setting, Path(tmp), mode)
            try:
                out, seconds, headers = translate(server, made.srt)
            finally:
                server.stop()
            (OUT / f"flores-de-{mode}.srt").write_text(out, encoding="utf-8")
            results[mode] = {
                "seconds": round(seconds, 1),
                "headers": headers,
                **scored(made, out, references, sentences),
            }
            brief = {k: v for k, v in results[mode].items() if not isinstance(v, list)}
            sys.stdout.write(f"{mode} {brief}\n")
    report = {
        "model": [m["name"] for m in config["models"]],
        "sentences": len(sentences),
        "cues": len(made.cue_texts),
        "sentences_over_several_cues": len(set(made.sentence_of_cue))
        - sum(1 for s in range(len(sentences)) if made.sentence_of_cue.count(s) == 1),
        "units_in_context": len(doc.units),
        "cue_groups_in_context": grouped,
        "results": results,
    }
    (OUT / "results.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    rows = [
        "| mode | chrF++ | chrF++ (sentences over 2-3 cues) | empty cues | unchanged cues "
        "| other lines changed | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, r in results.items():
        rows.append(
            f"| {mode} | {r['chrf++']} | {r['chrf++_sentences_over_several_cues']} | "
            f"{r['empty_cues']} / {r['cues']} | {r['unchanged_cues']} | "
            f"{r['other_lines_changed']} | {r['seconds']} |"
        )
    (OUT / "results.md").write_text(
        "# Subtitles in context against cue by cue\n\n"
        f"`scripts/subtitle-context.py`: FLORES-101 devtest lines 1-{len(sentences)} as "
        f"{len(made.cue_texts)} SubRip cues ({report['sentences_over_several_cues']} sentences "
        f"over 2-3 cues; {grouped} cue groups in context), English to German, model "
        f"{', '.join(m['name'] for m in config['models'])} (`{args.config.name}`), "
        "through `POST /translate/file`; "
        "each sentence's cues joined back and scored against the human German (chrF++, "
        "sacrebleu).\n\n" + "\n".join(rows) + "\n"
    )


if __name__ == "__main__":
    main()
