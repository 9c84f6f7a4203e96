"""`tolk bench quality`'s figures, from its per-text records alone: scores, failure rates,
tolk's flags, latency and tokens; quality.json, quality.md, quality.png; and the comparison
of two runs (`tolk bench quality-compare`).

Everything here is computed from the records a run keeps (source, reference, output, flags,
finish reason, latency), so a saved quality.json can be judged and scored again.

Scores are sacrebleu's, so they can be compared with published ones: chrF++ (CHRF with word
bigrams) and BLEU with the tokenizer its authors prescribe for the target ("zh" for Chinese,
"ja-mecab" for Japanese when MeCab is installed, else "char", and "13a" for the rest), each
with sacrebleu's 95% bootstrap confidence interval (1000 resamples, seeded) and the number
of sentences. Failures are tolk.translation.checks' verdicts on each output, the very
checks tolk's server applies, so the two agree on what a failure is. A comparison of two
runs uses sacrebleu's paired bootstrap test for the scores and a paired bootstrap over the
same sentences for the failure rates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.chrf import CHRF
from sacrebleu.significance import PairedTest, Result, _bootstrap_resample

from tolk.bench import profile, quality_speed
from tolk.bench.quality_data import UNSPACED, glued, markup_intact
from tolk.bench.report import json_safe, save_figure
from tolk.bench.stats import percentile
from tolk.languages import lang
from tolk.translation.checks import (
    REPLACEMENT,
    OutputChecks,
    copied_example,
    strip_cut_characters,
)
from tolk.translation.examples import showable
from tolk.translation.fidelity import MARKUP_WARNINGS

SCHEMA = "tolk.bench.quality/1"
COMPARE_SCHEMA = "tolk.bench.quality-compare/1"
N_BOOTSTRAP = 1000
SEED = 12345  # sacrebleu's own default seed
# The failures a report lists, in its order; then those a server must not leave unflagged.
FAILURES = (
    "off_target", "foreign_script", "copied_example", "echo", "loop", "cut_character",
    "truncated", "empty",
)  # fmt: skip
SILENT = ("off_target", "copied_example", "echo", "loop")
COLUMNS = [
    "pair", "system", "chrF++ [95% CI]", "BLEU", "n", "errors", "off-target %",
    "foreign script %", "copied example %", "echo %", "loop %", "cut %", "truncated %",
    "empty %", "flagged", "unflagged %", "p50 s", "p95 s", "out tokens",
]  # fmt: skip


@cache
def bleu_tokenizer(target: str) -> str:
    """sacrebleu's prescribed tokenizer for the target language, as it can run here."""
    if target == "zh":
        return "zh"
    if target == "ja":
        try:
            BLEU(tokenize="ja-mecab")
        except (RuntimeError, ImportError, AssertionError):
            return "char"
        return "ja-mecab"
    return "13a"


def score(
    hypotheses: Sequence[str],
    references: Sequence[str],
    target: str,
    n_bootstrap: int = N_BOOTSTRAP,
) -> dict[str, Any]:
    """chrF++ and BLEU of the hypotheses, each with its 95% bootstrap interval.

    The interval is sacrebleu's: its seeded resampling of the sentence statistics and the
    2.5th and 97.5th percentile of the resampled scores (the bounds its estimate_ci takes
    half the distance of). Called here rather than through corpus_score(n_bootstrap=...),
    which in sacrebleu 2.6 fails with "don't know how to coerce float and float32" when
    some resamples score exactly 0 and others do not (BLEU of a poor system)."""
    out: dict[str, Any] = {"n": len(hypotheses), "tokenizer": bleu_tokenizer(target)}
    for name, metric in (
        ("chrf", CHRF(word_order=2)),
        ("bleu", BLEU(tokenize=out["tokenizer"])),
    ):
        stats = metric._extract_corpus_statistics(list(hypotheses), [list(references)])
        out[name] = float(metric._aggregate_and_compute(stats).score)
        out[f"{name}_ci"] = None
        if n_bootstrap > 1 and stats:
            metric.seed, resampled = _bootstrap_resample(stats, metric, n_bootstrap)
            ordered = sorted(float(s.score) for s in resampled)
            cut = len(ordered) // 40
            out[f"{name}_ci"] = [min(100.0, ordered[cut]), min(100.0, ordered[-cut - 1])]
            metric.n_bootstrap = n_bootstrap  # the signature says so
        out[f"{name}_signature"] = metric.get_signature().format()
    return out


def judge(records: Iterable[dict[str, Any]], languages: Sequence[str]) -> None:
    """Each record's `problems` (sentences, documents) or `markup` verdict, in place."""
    checks = OutputChecks(sorted(set(languages)))
    for r in records:
        if r["kind"] in ("markdown", "html"):
            ok = r["error"] is None
            r["markup"] = {
                "intact": ok and markup_intact(r["kind"], r["source"], r["output"]),
                "glued": glued(r["kind"], r["source"], r["output"], r["target_lang"])
                if ok
                else None,
            }
            continue
        if r["error"] is not None:
            r["problems"] = []
            continue
        output, cut_at_end = strip_cut_characters(r["output"])
        cut = cut_at_end or (REPLACEMENT in output and REPLACEMENT not in r["source"])
        verdict = checks.check(
            r["source"],
            output,
            r["source_lang"],
            r["target_lang"],
            finish_reason=r.get("finish_reason"),
            cut_character=cut,
        )
        # Copying tolk's examples: judged against every one it may show for the pair (a run
        # does not record which the server showed), where neither source nor reference says it.
        shown = showable(lang(r["source_lang"]), lang(r["target_lang"]))
        copied = copied_example(output, shown, (r["source"], r["reference"]))
        r["problems"] = [*verdict.problems, *(["copied_example"] if copied else [])]
        r["detected"] = verdict.language


def _groups(records: Iterable[dict[str, Any]], kind: str) -> dict[tuple[str, ...], list[Any]]:
    groups: dict[tuple[str, ...], list[Any]] = {}
    for r in records:
        if r["kind"] == kind:
            key = (r["pair"], r["system"]) + ((r["split"],) if kind == "document" else ())
            groups.setdefault(key, []).append(r)
    return groups


def _timing(rows: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [r["latency_s"] for r in rows if r["error"] is None]
    tokens = [r["output_tokens"] for r in rows if r.get("output_tokens") is not None]
    return {
        "latency_s": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)},
        "output_tokens": sum(tokens) if tokens else None,
    }


def sentence_row(pair: str, system: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    target = rows[0]["target_lang"]
    problems = [r for r in rows if r["problems"]]
    unflagged = [r for r in rows if set(r["problems"]) & set(SILENT) - set(r["flags"])]
    reports_finish = any(r.get("finish_reason") is not None for r in rows)
    rates: dict[str, float | None] = {
        p: sum(p in r["problems"] for r in rows) / n for p in FAILURES
    }
    if not reports_finish:
        rates["truncated"] = None  # not observable without a finish reason
    return {
        "pair": pair,
        "system": system,
        **score([r["output"] for r in rows], [r["reference"] for r in rows], target),
        "errors": sum(r["error"] is not None for r in rows),
        "rates": rates,
        "with_problems": len(problems),
        "flagged": sum(bool(r["flags"]) for r in problems),
        "flags_seen": sum(len(r["flags"]) for r in rows),
        "unflagged": len(unflagged),
        "unflagged_share": len(unflagged) / n,
        **_timing(rows),
        **({"alternatives": _alternatives(rows, target)} if "alternatives" in rows[0] else {}),
    }


def _alternatives(rows: list[dict[str, Any]], target: str) -> dict[str, Any]:
    """How many alternatives came per sentence and how they score: chrF++ of each
    sentence's first alternative (its translation where it has none), and of the best of
    translation and alternatives per sentence (by sentence chrF++ against the reference: an
    upper bound on what choosing among them could give)."""
    listed = [[str(a) for a in r.get("alternatives") or []] for r in rows]
    references = [r["reference"] for r in rows]
    chrf = CHRF(word_order=2)
    best = [
        max([r["output"], *alts], key=lambda h: chrf.sentence_score(h, [ref]).score)
        for r, alts, ref in zip(rows, listed, references, strict=True)
    ]
    first = [alts[0] if alts else r["output"] for r, alts in zip(rows, listed, strict=True)]
    return {
        "per_text": sum(len(a) for a in listed) / len(rows),
        "without": sum(not a for a in listed),
        "chrf_first": score(first, references, target, n_bootstrap=1)["chrf"],
        "chrf_best": score(best, references, target, n_bootstrap=1)["chrf"],
    }


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """The figures of a run's records: per pair and system, per markup format, per split."""
    records = results["records"]
    markup = []
    for (pair, system), rows in _groups(records, "markdown").items():
        markup.append(_markup_row(pair, system, "markdown", rows))
    for (pair, system), rows in _groups(records, "html").items():
        markup.append(_markup_row(pair, system, "html", rows))
    documents = []
    for (pair, system, split), rows in _groups(records, "document").items():
        ok = [r for r in rows if r["error"] is None]
        scored = score(
            [r["output"] for r in rows], [r["reference"] for r in rows], "ne", n_bootstrap=1
        )
        documents.append(
            {
                "pair": pair, "system": system, "split": split, **scored,
                "errors": [r["error"] for r in rows if r["error"] is not None],
                "chars": sum(len(r["source"]) for r in rows),
                "problems": sorted({p for r in ok for p in r["problems"]}),
                **_timing(rows),
            }
        )  # fmt: skip
    return {
        "sentences": [
            sentence_row(p, s, rows) for (p, s), rows in _groups(records, "sentence").items()
        ],
        "markup": markup,
        "documents": documents,
    }


def _markup_row(pair: str, system: str, kind: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    glue = [r["markup"]["glued"] for r in rows if r["markup"]["glued"] is not None]
    return {
        "pair": pair,
        "system": system,
        "format": kind,
        "n": n,
        "errors": sum(r["error"] is not None for r in rows),
        "intact": sum(r["markup"]["intact"] for r in rows) / n,
        # tolk's own word on it: units returned without a markup fallback's warning (their
        # placeholders came back on the first try or the retry; a unit that errored kept
        # nothing); None for unflagging systems.
        "kept": sum(_kept(r) for r in rows) / n if system.startswith("tolk") else None,
        "glued": sum(glue) / len(glue) if glue else None,
        "flagged": sum(bool(r["flags"]) for r in rows),
        **_timing(rows),
    }


def _pct(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.1f}"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def rows(results: dict[str, Any]) -> list[list[str]]:
    out = []
    for s in results["summary"]["sentences"]:
        ci = s["chrf_ci"]
        rates = s["rates"]
        out.append(
            [
                s["pair"], s["system"], f"{s['chrf']:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]",
                f"{s['bleu']:.1f}", str(s["n"]), str(s["errors"]), _pct(rates["off_target"]),
                _pct(rates["foreign_script"]), _pct(rates["copied_example"]),
                _pct(rates["echo"]), _pct(rates["loop"]),
                _pct(rates["cut_character"]), _pct(rates["truncated"]), _pct(rates["empty"]),
                f"{s['flagged']}/{s['with_problems']}", _pct(s["unflagged_share"]),
                _num(s["latency_s"]["p50"]), _num(s["latency_s"]["p95"]),
                "-" if s["output_tokens"] is None else str(s["output_tokens"]),
            ]
        )  # fmt: skip
    return out


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"x{a / b:.2f}"


def _alternative_rows(results: dict[str, Any]) -> list[str]:
    """Each `+altN` system beside the same API without alternatives, in the same run."""
    sentences = results["summary"]["sentences"]
    by_key = {(s["pair"], s["system"]): s for s in sentences}
    lines = []
    for s in sentences:
        alt = s.get("alternatives")
        if alt is None:
            continue
        base = by_key.get((s["pair"], s["system"].rsplit("+alt", 1)[0]), {})
        lines.append(
            f"alternatives {s['pair']} {s['system']}: {alt['per_text']:.2f} per sentence "
            f"({alt['without']} without), chrF++ of the first {alt['chrf_first']:.1f}, best "
            f"of all {alt['chrf_best']:.1f} (translation {s['chrf']:.1f}); output tokens "
            f"{_ratio(s['output_tokens'], base.get('output_tokens'))}, p50 latency "
            f"{_ratio(s['latency_s']['p50'], (base.get('latency_s') or {}).get('p50'))}, "
            f"p95 {_ratio(s['latency_s']['p95'], (base.get('latency_s') or {}).get('p95'))} "
            "of the same API without"
        )
    return lines


def _extra_rows(results: dict[str, Any]) -> list[str]:
    """Markup, documents and alternatives, as lines of text (for the table's caption and
    the markdown)."""
    lines = _alternative_rows(results)
    for m in results["summary"]["markup"]:
        glue = f"{_pct(m['glued'])}% glued"
        if m["glued"] is None:
            glue = "glued n/a (unspaced script)" if m["pair"].split("-")[1] in UNSPACED else "-"
        lines.append(
            f"markup {m['format']} {m['pair']} {m['system']}: {_pct(m['intact'])}% intact, "
            f"{_pct(m.get('kept'))}% placeholders kept, "
            f"{glue}, n {m['n']}, errors {m['errors']}, p50 {_num(m['latency_s']['p50'])} s"
        )
    for d in results["summary"]["documents"]:
        errors = f", errors: {'; '.join(d['errors'])}" if d["errors"] else ""
        lines.append(
            f"document {d['pair']} {d['system']} split={d['split']}: chrF++ {d['chrf']:.1f}, "
            f"BLEU {d['bleu']:.1f}, {d['n']} articles, {d['chars']} characters, p50 "
            f"{_num(d['latency_s']['p50'], 1)} s{errors}"
        )
    return lines


def _notes(results: dict[str, Any]) -> list[str]:
    tokenizers = sorted({(s["pair"], s["tokenizer"]) for s in results["summary"]["sentences"]})
    notes = [
        "BLEU tokenizers: " + ", ".join(f"{p} {t}" for p, t in tokenizers),
        "truncated: only where the system reports a finish reason (OpenAI's); flagged: "
        "outputs with a problem that the server flagged; copied example: 20+ characters in a "
        "row of an example translation tolk may show for the pair (prompt_examples), which "
        "neither source nor reference holds; unflagged: off-target, copied example, echo or loop "
        "found by the checks and not flagged with that code, share of the sentences.",
    ]
    return notes + [f"warning: {w}" for w in results.get("warnings", [])]


_TEXT_COLUMNS = ("format", "pair", "system")


def _table(title: str, columns: Sequence[str], rows: list[list[str]], caption: str) -> Table:
    """A report table for the terminal: text columns left, figures right."""
    out = Table(title=title, caption=caption)
    for column in columns:
        out.add_column(column, justify="left" if column in _TEXT_COLUMNS else "right")
    for row in rows:
        out.add_row(*row)
    return out


def _markdown_table(columns: Sequence[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _speed_sections(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The ratio lines that open the report and the speed table's rows (none in a run
    written before speed was measured)."""
    speed = results.get("speed")
    if not speed:
        return [], []
    return quality_speed.ratio_lines(speed), quality_speed.rows(speed)


def table(results: dict[str, Any]) -> RenderableType:
    quality = _table(
        f"tolk bench quality: {results['sentences_per_pair']} sentences a pair",
        COLUMNS,
        rows(results),
        "\n".join(_extra_rows(results) + _notes(results)),
    )
    ratios, speed_rows = _speed_sections(results)
    if not speed_rows:
        return quality
    rounds = results.get("rounds", 1)
    speed = _table(
        f"Speed: {results.get('concurrency')} requests at once, {rounds} round(s) a system",
        quality_speed.SPEED_COLUMNS,
        speed_rows,
        "GPU busy: NVML, mean of the samples; running/waiting: the engine's requests, mean.",
    )
    later = quality_speed.markup_later_rows(results["speed"])
    tables = [speed]
    if later:
        title = "Markup units after each system's first pass: p50 latency"
        tables.append(_table(title, quality_speed.MARKUP_LATER_COLUMNS, later, ""))
    return Group(*(Text(line, style="bold") for line in ratios), *tables, quality)


def _markup_later_markdown(speed: dict[str, Any]) -> list[str]:
    rows = quality_speed.markup_later_rows(speed)
    if not rows:
        return []
    return [
        "",
        "Markup units after each system's first pass (what tolk learnt per pair in one pass "
        "shows in the next; the first pass's are in the markup table below), p50 latency "
        "and tolk's over the baseline's passes beside it:",
        "",
        *_markdown_table(quality_speed.MARKUP_LATER_COLUMNS, rows),
    ]


def _speed_markdown(results: dict[str, Any]) -> list[str]:
    ratios, speed_rows = _speed_sections(results)
    if not speed_rows:
        return []
    return [
        *(f"**{line}**  " for line in ratios),
        "",
        f"Speed ({results.get('concurrency')} requests at once, {results.get('rounds', 1)} "
        "round(s) a system, rounds alternating; GPU busy from NVML, running/waiting the "
        "engine's requests, means of the samples; client loop busy the CPU of this "
        "command's own event loop, where the clients run, over the wall time; engine "
        "steps and what they made from vLLM's counters before and after each pass, ms a "
        "step the wall time over them, TPOT the engine's mean time per output token; "
        "loop: tolk's event loop, the CPU its thread used over the wall time and per "
        "request, and how late its 10 ms heartbeat woke):",
        "",
        *_markdown_table(quality_speed.SPEED_COLUMNS, speed_rows),
        *_markup_later_markdown(results["speed"]),
        *profile.markdown(results.get("profiles") or {}),
        "",
        "Quality (each system's first pass):",
        "",
    ]


def markdown(results: dict[str, Any]) -> str:
    systems = "; ".join(
        f"{s['name']}: {s['api']} at {s['url']} ({s['model']})" for s in results["systems"]
    )
    lines = [
        "# tolk bench quality",
        "",
        f"- command: `{results['command']}`",
        f"- started: {results['started_at']}",
        f"- machine: {json.dumps(results['machine'])}",
        f"- systems: {systems}",
        f"- data: {results['data']}, lines {results['offset'] + 1}-"
        f"{results['offset'] + results['sentences_per_pair']}",
        "",
        *_speed_markdown(results),
        *_markdown_table(COLUMNS, rows(results)),
        "",
        *(f"- {line}" for line in _extra_rows(results) + _notes(results)),
        "",
        "Chart: quality.png.",
        "",
    ]
    return "\n".join(lines)


def chart(results: dict[str, Any], out_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = results["summary"]["sentences"]
    pairs = list(dict.fromkeys(s["pair"] for s in summary))
    systems = list(dict.fromkeys(s["system"] for s in summary))
    width = 0.8 / max(1, len(systems))
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colours = plt.get_cmap("tab10")
    for k, system in enumerate(systems):
        found = {s["pair"]: s for s in summary if s["system"] == system}
        xs = [i + k * width for i, p in enumerate(pairs) if p in found]
        chosen = [found[p] for p in pairs if p in found]
        values = [s["chrf"] for s in chosen]
        errors = [
            [max(0.0, s["chrf"] - s["chrf_ci"][0]) for s in chosen],
            [max(0.0, s["chrf_ci"][1] - s["chrf"]) for s in chosen],
        ]
        left.bar(xs, values, width, yerr=errors, capsize=3, label=system, color=colours(k))
        bottom = np.zeros(len(chosen))
        for j, problem in enumerate(FAILURES):
            share = np.array([100 * (s["rates"][problem] or 0.0) for s in chosen])
            right.bar(
                xs, share, width, bottom=bottom, color=plt.get_cmap("Set2")(j),
                edgecolor=colours(k), label=problem if k == 0 else None,
            )  # fmt: skip
            bottom += share
        for x, top in zip(xs, bottom, strict=True):
            right.text(x, top, system, rotation=90, fontsize=7, ha="center", va="bottom")
    for ax in (left, right):
        ax.set_xticks([i + width * (len(systems) - 1) / 2 for i in range(len(pairs))], pairs)
    left.set_ylabel("chrF++ (95% CI)")
    left.set_title("chrF++ per pair and system")
    left.legend(fontsize=8)
    right.set_ylabel("problems per 100 sentences")
    right.set_title("Failures: one bar per system, stacked by problem")
    right.margins(y=0.25)  # room for the systems' labels
    right.legend(fontsize=7)
    return save_figure(fig, out_dir / "quality.png")


def write(results: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "quality.json"
    json_path.write_text(json.dumps(json_safe(results), indent=1, ensure_ascii=False))
    md_path = out_dir / "quality.md"
    md_path.write_text(markdown(results))
    return [json_path, md_path, chart(results, out_dir)]


# --- Two runs compared -----------------------------------------------------------------


def _by_key(
    results: dict[str, Any], kinds: Sequence[str] = ("sentence",)
) -> dict[tuple[str, str, str], dict[tuple[int, str], Any]]:
    """Each run's records of `kinds` by pair, system and kind, then by unit; the unit's
    source is part of its key, so only the same text is paired."""
    out: dict[tuple[str, str, str], dict[tuple[int, str], Any]] = {}
    for r in results["records"]:
        if r["kind"] in kinds:
            key = (r["pair"], r["system"], r["kind"])
            out.setdefault(key, {})[(r["index"], r["source"])] = r
    return out


def _kept(record: dict[str, Any]) -> bool:
    """tolk's own word that a markup unit kept its placeholders (no fallback's warning)."""
    return record["error"] is None and not set(record["flags"]) & MARKUP_WARNINGS.keys()


def compare_markup(
    a: dict[str, Any], b: dict[str, Any], n_bootstrap: int = N_BOOTSTRAP
) -> list[dict[str, Any]]:
    """Per pair, system and format in both runs, over the markup units both translated: B
    minus A in units whose markup came back intact, and (tolk) whose placeholders it kept."""
    runs_a, runs_b = _by_key(a, ("markdown", "html")), _by_key(b, ("markdown", "html"))
    out = []
    for key in (k for k in runs_a if k in runs_b):
        shared = sorted(runs_a[key].keys() & runs_b[key].keys())
        if not shared:
            continue
        ra, rb = [runs_a[key][s] for s in shared], [runs_b[key][s] for s in shared]
        pair, system, kind = key
        rates = {
            "intact": ([r["markup"]["intact"] for r in ra], [r["markup"]["intact"] for r in rb])
        }
        if system.startswith("tolk"):
            rates["kept"] = ([_kept(r) for r in ra], [_kept(r) for r in rb])
        figures = {}
        for name, (x, y) in rates.items():
            rate = paired_rate(x, y, n_bootstrap)
            figures[name] = {**rate, "significant": rate["p"] < 0.05 and rate["diff"] != 0}
        out.append({"pair": pair, "system": system, "format": kind, "n": len(shared), **figures})
    return out


def _has(record: dict[str, Any], problem: str) -> bool:
    if problem == "any":
        return bool(record["problems"])
    if problem == "unflagged":
        return bool(set(record["problems"]) & set(SILENT) - set(record["flags"]))
    return problem in record["problems"]


def paired_rate(a: Sequence[bool], b: Sequence[bool], n_bootstrap: int) -> dict[str, Any]:
    """B's rate minus A's over the same sentences, with a paired bootstrap: the 95% interval
    of the difference and a two-sided p-value (as sacrebleu computes its own)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = float(y.mean() - x.mean())
    rng = np.random.default_rng(SEED)
    idx = rng.choice(len(x), size=(n_bootstrap, len(x)), replace=True)
    samples = y[idx].mean(1) - x[idx].mean(1)
    low, high = np.percentile(samples, [2.5, 97.5])
    shifted = np.abs(samples - samples.mean())
    p = (np.sum(shifted >= abs(diff) - 1e-12) + 1) / (n_bootstrap + 1) if diff else 1.0
    return {
        "a": float(x.mean()),
        "b": float(y.mean()),
        "diff": diff,
        "ci": [float(low), float(high)],
        "p": float(p),
    }


def compare(a: dict[str, Any], b: dict[str, Any], n_bootstrap: int = N_BOOTSTRAP) -> dict[str, Any]:
    """Per pair and system in both runs, over the sentences both translated: B minus A in
    chrF++ and BLEU (sacrebleu's paired bootstrap test) and in each failure rate."""
    # Both judged again by tolk's checks as they are now, so that a check added since a run
    # counts in both (a run's file keeps the problems found when it was made), with the
    # languages its own judge told apart (the detector's verdicts depend on them); a run
    # from before they were recorded, with the languages of its records.
    for run in (a, b):
        records = run["records"]
        languages = run.get("languages") or sorted(
            {r[k] for r in records for k in ("source_lang", "target_lang")}
        )
        judge(records, languages)
    runs_a, runs_b = _by_key(a), _by_key(b)
    rows_out = []
    for key in (k for k in runs_a if k in runs_b):
        shared = sorted(runs_a[key].keys() & runs_b[key].keys())
        if not shared:
            continue
        ra, rb = [runs_a[key][s] for s in shared], [runs_b[key][s] for s in shared]
        tokenizer = bleu_tokenizer(ra[0]["target_lang"])
        test = PairedTest(
            [("A", [r["output"] for r in ra]), ("B", [r["output"] for r in rb])],
            {"BLEU": BLEU(tokenize=tokenizer), "chrF++": CHRF(word_order=2)},
            [[r["reference"] for r in ra]],
            test_type="bs",
            n_samples=n_bootstrap,
        )
        _, scores = test()
        metrics = {}
        for name, results in scores.items():
            if name == "System":
                continue
            base, other = (r for r in results if isinstance(r, Result))
            # sacrebleu's test calls a zero difference significant (p = 1/(n+1)): none is.
            same = other.score == base.score
            p = 1.0 if other.p_value is None or same else float(other.p_value)
            metrics["chrf" if name.lower().startswith("chrf") else "bleu"] = {
                "a": base.score,
                "b": other.score,
                "diff": other.score - base.score,
                "p": p,
                "significant": p < 0.05,
            }
        failures = {}
        for problem in (*FAILURES, "any", "unflagged"):
            rate = paired_rate(
                [_has(r, problem) for r in ra], [_has(r, problem) for r in rb], n_bootstrap
            )
            failures[problem] = {**rate, "significant": rate["p"] < 0.05 and rate["diff"] != 0}
        pair, system, _ = key
        rows_out.append(
            {
                "pair": pair,
                "system": system,
                "n": len(shared),
                "tokenizer": tokenizer,
                **metrics,
                "failures": failures,
            }
        )
    return {
        "schema": COMPARE_SCHEMA,
        "a": {"command": a.get("command"), "started_at": a.get("started_at")},
        "b": {"command": b.get("command"), "started_at": b.get("started_at")},
        "n_bootstrap": n_bootstrap,
        "rows": rows_out,
        "markup": compare_markup(a, b, n_bootstrap),
    }


COMPARE_COLUMNS = ["pair", "system", "n", "chrF++ A", "chrF++ B", "Δ chrF++", "p", "BLEU A",
    "BLEU B", "Δ BLEU", "p", "Δ off-target pp", "Δ foreign script pp", "Δ copied example pp",
    "Δ echo pp", "Δ loop pp", "Δ cut pp",
    "Δ empty pp", "Δ any problem pp", "Δ unflagged pp"]  # fmt: skip


COMPARED_FAILURES = (
    "off_target", "foreign_script", "copied_example", "echo", "loop", "cut_character", "empty",
    "any", "unflagged",
)  # fmt: skip


def _delta(entry: dict[str, Any], scale: float = 1.0) -> str:
    mark = "*" if entry["significant"] else ""
    return f"{scale * entry['diff']:+.1f}{mark}"


def compare_rows(comparison: dict[str, Any]) -> list[list[str]]:
    out = []
    for r in comparison["rows"]:
        f = r["failures"]
        out.append(
            [
                r["pair"], r["system"], str(r["n"]), f"{r['chrf']['a']:.1f}",
                f"{r['chrf']['b']:.1f}", _delta(r["chrf"]), f"{r['chrf']['p']:.3f}",
                f"{r['bleu']['a']:.1f}", f"{r['bleu']['b']:.1f}", _delta(r["bleu"]),
                f"{r['bleu']['p']:.3f}",
                *(_delta(f[p], 100) for p in COMPARED_FAILURES),
            ]
        )  # fmt: skip
    return out


COMPARE_MARKUP_COLUMNS = [
    "format", "pair", "system", "n", "intact A %", "intact B %", "Δ intact pp", "p",
    "kept A %", "kept B %", "Δ kept pp", "p",
]  # fmt: skip


def compare_markup_rows(comparison: dict[str, Any]) -> list[list[str]]:
    out = []
    for r in comparison.get("markup", []):
        row = [r["format"], r["pair"], r["system"], str(r["n"])]
        for name in ("intact", "kept"):
            f = r.get(name)
            row += [_pct(f["a"]), _pct(f["b"]), _delta(f, 100), f"{f['p']:.3f}"] if f else ["-"] * 4
        out.append(row)
    return out


COMPARE_MARKUP_NOTE = (
    "Markup units: intact = the markup came back valid and complete (fallbacks included); "
    "kept = tolk kept the placeholders, first try or retry (no markup warning). B minus A in "
    "percentage points, paired bootstrap over the same units; * p < 0.05."
)

COMPARE_NOTE = (
    "B minus A over the sentences both runs translated, both judged by tolk's checks as they "
    "are now; * significant at p < 0.05 (scores: "
    "sacrebleu's paired bootstrap test; failure rates in percentage points: paired bootstrap "
    "over the same sentences)."
)


def compare_table(comparison: dict[str, Any]) -> RenderableType:
    """The sentences' table, and the markup units' where both runs had any."""
    sentences = _table(
        "tolk bench quality: B against A",
        COMPARE_COLUMNS,
        compare_rows(comparison),
        f"A: {comparison['a']['command']}\nB: {comparison['b']['command']}\n{COMPARE_NOTE}",
    )
    markup = compare_markup_rows(comparison)
    if not markup:
        return sentences
    return Group(
        sentences,
        _table("Markup units: B against A", COMPARE_MARKUP_COLUMNS, markup, COMPARE_MARKUP_NOTE),
    )


def compare_markdown(comparison: dict[str, Any]) -> str:
    return "\n".join(
        [
            "# tolk bench quality: B against A",
            "",
            f"- A: `{comparison['a']['command']}` ({comparison['a']['started_at']})",
            f"- B: `{comparison['b']['command']}` ({comparison['b']['started_at']})",
            "",
            *_markdown_table(COMPARE_COLUMNS, compare_rows(comparison)),
            "",
            COMPARE_NOTE,
            "",
            *_markup_section(comparison),
        ]
    )


def _markup_section(comparison: dict[str, Any]) -> list[str]:
    rows = compare_markup_rows(comparison)
    if not rows:
        return []
    return [
        "## Markup",
        "",
        *_markdown_table(COMPARE_MARKUP_COLUMNS, rows),
        "",
        COMPARE_MARKUP_NOTE,
        "",
    ]


def write_compare(comparison: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "quality-compare.json"
    json_path.write_text(json.dumps(json_safe(comparison), indent=1))
    md_path = out_dir / "quality-compare.md"
    md_path.write_text(compare_markdown(comparison))
    return [json_path, md_path]
