"""`tolk bench quality` without a tolk server: scores against sacrebleu's own, failure counting
from given outputs, the markup set and its checks, the comparison of two runs, the report
files, the speed rounds and variants, and what each system sends; the OpenAI baseline and the
flag channels against an in-process stand-in server (aiohttp: neither tolk nor vLLM)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sacrebleu
from aiohttp import web
from rich.console import Group
from rich.table import Table

from tests.support.paths import REPO, TEST_DATA
from tolk.bench import quality, quality_data, quality_report, quality_speed
from tolk.bench.quality_data import Unit

SOURCE = "The dog runs quickly home because it is raining very hard today."


GERMAN = "Der Hund läuft schnell nach Hause, weil es heute sehr stark regnet."


def record(output: str, **fields: Any) -> dict[str, Any]:
    """A sentence record as a run keeps it (en>de, no error)."""
    return {
        "system": "tolk",
        "kind": "sentence",
        "pair": "en-de",
        "source_lang": "en",
        "target_lang": "de",
        "index": 0,
        "split": None,
        "source": SOURCE,
        "reference": GERMAN,
        "output": output,
        "flags": [],
        "latency_s": 0.5,
        "output_tokens": 20,
        "finish_reason": None,
        "error": None,
    } | fields


def results_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    quality_report.judge(records, ["en", "de", "fr", "ne"])
    results: dict[str, Any] = {
        "schema": quality_report.SCHEMA,
        "started_at": "2025-01-01T00:00:00+00:00",
        "command": "tolk bench quality --pairs en-de",
        "machine": {"cpus": 2},
        "systems": [{"name": "tolk", "api": "tolk", "url": "http://x", "model": "m"}],
        "data": "flores101",
        "offset": 0,
        "sentences_per_pair": len(records),
        "warnings": [],
        "records": records,
    }
    results["summary"] = quality_report.summarize(results)
    return results


def test_scores_are_sacrebleus_chrf_plus_plus_and_bleu_with_intervals() -> None:
    hyps = ["The cat sat on the mat.", "A dog barked loudly at night."]
    refs = ["The cat is sitting on the mat.", "A dog was barking loudly in the night."]
    scored = quality_report.score(hyps, refs, "en")
    assert scored["chrf"] == pytest.approx(46.019355, abs=1e-4)  # sacrebleu 2.x, chrF2++
    assert scored["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs], word_order=2).score)
    assert scored["bleu"] == pytest.approx(25.408590, abs=1e-4)
    assert scored["n"] == 2
    assert scored["tokenizer"] == "13a"
    for name in ("chrf", "bleu"):
        low, high = scored[f"{name}_ci"]
        assert 0 <= low <= scored[name] <= high <= 100
        assert "bs:1000" in scored[f"{name}_signature"]
    perfect = quality_report.score(refs, refs, "en")
    assert perfect["chrf"] == pytest.approx(100)
    assert perfect["bleu"] == pytest.approx(100)
    zero = quality_report.score(["", ""], refs, "en")
    assert zero["bleu"] == 0
    assert zero["bleu_ci"] == [0, 0]


def test_chinese_and_japanese_get_their_tokenizers() -> None:
    zh = quality_report.score(["我爱北京天安门。"], ["我爱北京的天安门。"], "zh")
    assert zh["tokenizer"] == "zh"
    assert zh["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(["我爱北京天安门。"], [["我爱北京的天安门。"]], tokenize="zh").score
    )
    assert quality_report.bleu_tokenizer("ja") in ("ja-mecab", "char")
    assert quality_report.bleu_tokenizer("de") == "13a"


def test_failures_are_counted_from_the_outputs_and_flags_matched() -> None:
    records = [
        record(GERMAN),
        record(SOURCE, flags=["echo"]),  # echo (and off-target), flagged as echo only
        record("This is clearly an English sentence about the weather today."),  # off-target
        record(
            "Der Hund läuft schnell nach Hause und " + "immer wieder " * 8, finish_reason="length"
        ),
        record(GERMAN[:-6] + "regn\ufffd"),  # cut inside a character
        record("", flags=["empty"]),
        record("", error="HTTP 500: boom", latency_s=0.1, output_tokens=None),
        record(GERMAN, finish_reason="stop"),
    ]
    results = results_of(records)
    problems = [r["problems"] for r in records]
    assert problems == [
        [], ["off_target", "echo"], ["off_target"], ["loop", "truncated"], ["cut_character"],
        ["empty"], [], [],
    ]  # fmt: skip
    (row,) = results["summary"]["sentences"]
    n = 8
    assert row["n"] == n
    assert row["errors"] == 1
    assert row["rates"]["off_target"] == pytest.approx(2 / n)
    assert row["rates"]["echo"] == row["rates"]["loop"] == pytest.approx(1 / n)
    assert row["rates"]["truncated"] == pytest.approx(1 / n)  # a finish reason was reported
    assert row["rates"]["cut_character"] == row["rates"]["empty"] == pytest.approx(1 / n)
    assert row["with_problems"] == 5
    assert row["flagged"] == 2
    assert row["flags_seen"] == 2
    # Unflagged: the echo's off-target (flagged as echo only), the English, the loop.
    assert row["unflagged"] == 3
    assert row["unflagged_share"] == pytest.approx(3 / n)
    assert row["latency_s"]["p50"] == pytest.approx(0.5)
    assert row["output_tokens"] == 20 * 7


def test_words_of_an_example_tolk_may_show_are_a_copy_unless_the_reference_has_them() -> None:
    from tolk.languages import lang
    from tolk.translation.examples import examples

    shown = examples(lang("en"), lang("de"), 8)[-1][1]  # a translation tolk may show
    records = [
        record(f"Der Hund läuft nach Hause. {shown}"),
        record(f"Der Hund läuft nach Hause. {shown}", flags=["copied_example"]),
        record(GERMAN),
        # The reference says the same words: no copy, whatever the sample holds.
        record(f"{GERMAN} {shown}", reference=f"{GERMAN} {shown}"),
    ]
    results_of(records)
    assert [("copied_example" in r["problems"]) for r in records] == [True, True, False, False]
    (row,) = results_of(records)["summary"]["sentences"]
    assert row["rates"]["copied_example"] == pytest.approx(2 / 4)
    assert row["unflagged"] == 1  # the first: a copy is no translation to pass off silently


def test_alternatives_are_counted_and_scored_beside_the_same_api_without() -> None:
    worse = "Der Hund rennt heim."
    base = [record(worse), record(worse)]
    alt = [
        record(worse, system="tolk+alt2", output_tokens=60, latency_s=0.75, alternatives=[]),
        record(
            worse,
            system="tolk+alt2",
            output_tokens=60,
            latency_s=0.75,
            alternatives=["Ein Hund.", GERMAN],  # the best of all is the reference itself
        ),
    ]
    results = results_of(base + alt)
    rows = {s["system"]: s for s in results["summary"]["sentences"]}
    assert "alternatives" not in rows["tolk"]
    counted = rows["tolk+alt2"]["alternatives"]
    assert counted["per_text"] == 1.0
    assert counted["without"] == 1
    first = quality_report.score([worse, "Ein Hund."], [GERMAN, GERMAN], "de", n_bootstrap=1)
    assert counted["chrf_first"] == pytest.approx(first["chrf"])
    best = quality_report.score([worse, GERMAN], [GERMAN, GERMAN], "de", n_bootstrap=1)
    assert counted["chrf_best"] == pytest.approx(best["chrf"])
    assert counted["chrf_best"] > rows["tolk+alt2"]["chrf"]
    (line,) = [x for x in quality_report.markdown(results).splitlines() if "tolk+alt2:" in x]
    assert "output tokens x3.00, p50 latency x1.50" in line, line


def test_truncation_is_not_counted_where_no_finish_reason_is_reported() -> None:
    results = results_of([record(GERMAN), record("Der Hund " + "immer wieder " * 8)])
    (row,) = results["summary"]["sentences"]
    assert row["rates"]["truncated"] is None
    assert row["rates"]["loop"] == pytest.approx(0.5)


def test_flags_are_read_from_the_tolk_body_and_the_drop_in_header() -> None:
    tolk = quality.System("tolk", "tolk", "http://x")
    body = {
        "translation": "x",
        "usage": {"completion_tokens": 7},
        "warnings": [{"text": 0, "code": "loop", "message": "..."}],
    }
    assert quality.reply(tolk, body, {}) == {
        "output": "x", "flags": ["loop"], "output_tokens": 7, "finish_reason": None
    }  # fmt: skip
    assert quality.reply(tolk, {"translation": "x"}, {})["flags"] == []  # no warnings yet
    deepl = quality.System("tolk-deepl", "deepl", "http://x")
    header = {"X-Tolk-Warnings": json.dumps([{"text": 0, "code": "off_target"}])}
    assert quality.reply(deepl, {"translations": [{"text": "y"}]}, header)["flags"] == [
        "off_target"
    ]
    assert quality.header_flags({"X-Tolk-Warnings": "not json"}) == []


def test_a_tolk_units_timing_is_read_from_its_server_timing() -> None:
    tolk = quality.System("tolk", "tolk", "http://x")
    header = {
        "server-timing": "engine;dur=800.0, to-engine;dur=52.5, to-first-token;dur=90.0, "
        'to-last-token;dur=610.0, to-first-output;dur=612.5, engine-requests;desc="3"'
    }
    assert quality.reply(tolk, {"translation": "x"}, header)["timing"] == {
        "engine": pytest.approx(0.8),
        "to-engine": pytest.approx(0.0525),
        "to-first-token": pytest.approx(0.09),
        "to-last-token": pytest.approx(0.61),
        "to-first-output": pytest.approx(0.6125),
        "engine_requests": 3,
    }
    # A unit from the segment cache alone reached no engine: only the marks there are.
    cached = {"server-timing": 'engine;dur=0.1, engine-requests;desc="0"'}
    assert quality.reply(tolk, {"translation": "x"}, cached)["timing"] == {
        "engine": pytest.approx(0.0001),
        "engine_requests": 0,
    }
    openai = quality.System("openai", "openai", "http://x")
    answer = {"choices": [{"message": {"content": "y"}}]}
    assert "timing" not in quality.reply(openai, answer, header)


def test_the_markup_set_is_made_deterministically_from_the_english() -> None:
    english = [
        "Short one.",
        "The committee approved the new budget after a long debate on Tuesday evening.",
        "Prices rose by 5 * 3 percent [sic] in the northern region last year alone.",
        "Scientists say the discovery could change how engineers design stronger bridges.",
    ]
    units = quality_data.markup_units(english, ["de", "zh"], count=2)
    assert units == quality_data.markup_units(english, ["de", "zh"], count=2)
    assert [(u.kind, u.index, u.target_lang) for u in units] == [
        ("markdown", 1, "de"),
        ("markdown", 1, "zh"),
        ("markdown", 3, "de"),
        ("markdown", 3, "zh"),
        ("html", 1, "de"),
        ("html", 1, "zh"),
        ("html", 3, "de"),
        ("html", 3, "zh"),
    ]  # the short line and the one with markup characters are skipped
    md = units[0].source
    assert md == (
        "The **committee** approved the new [budget](https://example.com/2) after a long debate "
        "on `Tuesday` evening."
    )
    assert units[4].source == (
        'The <b>committee</b> approved the new <a href="https://example.com/2">budget</a> after '
        "a long debate on <em>Tuesday</em> evening."
    )
    assert units[0].format == "markdown"
    assert units[4].format == "html"


def test_markup_intact_and_glued_words() -> None:
    md = (
        "The committee **approved** the new budget after a long "
        "[debate](https://example.com/2) on Tuesday `evening`."
    )
    good = (
        "Der Ausschuss **billigte** den Haushalt nach langer "
        "[Debatte](https://example.com/2) am Dienstag `evening`."
    )
    assert quality_data.markup_intact("markdown", md, good)
    assert quality_data.glued("markdown", md, good, "de") is False
    lost_link = "Der Ausschuss **billigte** den Haushalt nach langer Debatte am Dienstag `evening`."
    assert not quality_data.markup_intact("markdown", md, lost_link)
    other_url = good.replace("example.com/2", "example.com/9")
    assert not quality_data.markup_intact("markdown", md, other_url)
    glued = (
        "Der Ausschuss **billigte**den Haushalt nach "
        "[Debatte](https://example.com/2)am Dienstag `evening`."
    )
    assert quality_data.markup_intact("markdown", md, glued)
    assert quality_data.glued("markdown", md, glued, "de") is True
    assert quality_data.glued("markdown", md, glued, "zh") is None  # unspaced script

    html = 'A <b>long</b> debate on <a href="https://example.com/2">Tuesday</a> <em>evening</em>.'
    kept = (
        'Eine <b>lange</b> Debatte am <a href="https://example.com/2">Dienstag</a> <em>Abend</em>.'
    )
    assert quality_data.markup_intact("html", html, kept)
    assert not quality_data.markup_intact(
        "html", html, kept.replace("<em>", "").replace("</em>", "")
    )
    swapped = (
        'Eine <em>lange</em> Debatte am <a href="https://example.com/2">Dienstag</a> <b>Abend</b>.'
    )
    assert not quality_data.markup_intact("html", html, swapped)
    assert quality_data.glued("html", html, kept.replace("</b> ", "</b>"), "de") is True
    assert quality_data.glued("html", html, kept, "de") is False


def test_markup_records_are_judged_for_markup() -> None:
    md = quality_data.markdown_of(
        "The committee approved the new budget after a long debate on Tuesday evening.", 2
    )
    assert md is not None
    kept = md.replace("The committee", "Der Ausschuss")
    records = [
        record(kept, kind="markdown", source=md, reference=""),
        record(
            "Der Ausschuss hat den Haushalt gebilligt.",
            kind="markdown",
            source=md,
            reference="",
            flags=["markup_dropped"],
        ),
        # A request that failed (a deadline) kept nothing, though it carries no flag.
        record("", kind="markdown", source=md, reference="", error="HTTP 504: ..."),
    ]
    results = results_of(records)
    (row,) = results["summary"]["markup"]
    assert row["format"] == "markdown"
    assert row["n"] == 3
    assert row["errors"] == 1
    assert row["intact"] == pytest.approx(1 / 3)
    assert row["glued"] == pytest.approx(0.0)
    # tolk's own word: one unit fell back (flagged), one kept its placeholders.
    assert row["kept"] == pytest.approx(1 / 3)


def test_aligned_files_by_flores_or_plain_names(tmp_path: Path) -> None:
    for name, lines in (
        ("eng.txt", ["One.", "Two.", "Three."]),
        ("de.txt", ["Eins.", "Zwei.", "Drei."]),
        ("cmn_Hans.txt", ["一。", "二。", "三。"]),
        ("LICENSE.txt", ["not a language", "", ""]),
    ):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    files = quality_data.language_files(tmp_path)
    assert sorted(files) == ["de", "en", "zh"]
    pairs = quality_data.parse_pairs("en-de, eng>cmn_Hans,de-en")
    assert pairs == [("en", "de"), ("en", "zh"), ("de", "en")]
    units = quality_data.sentences(tmp_path, pairs, count=2, offset=1)
    # The pairs take turns, as mixed traffic would.
    assert [(u.pair, u.index, u.source, u.reference) for u in units] == [
        ("en-de", 1, "Two.", "Zwei."), ("en-zh", 1, "Two.", "二。"),
        ("de-en", 1, "Zwei.", "Two."), ("en-de", 2, "Three.", "Drei."),
        ("en-zh", 2, "Three.", "三。"), ("de-en", 2, "Drei.", "Three."),
    ]  # fmt: skip
    with pytest.raises(ValueError, match="no file for fr"):
        quality_data.sentences(tmp_path, [("en", "fr")], 2)
    with pytest.raises(ValueError, match="not a pair"):
        quality_data.parse_pairs("en")


def test_documents_are_cut_to_whole_lines_at_each_split_mode() -> None:
    units = quality_data.documents(400)
    assert [(u.index, u.split) for u in units] == [
        (0, "sentences"), (0, "paragraphs"), (0, "none"),
        (1, "sentences"), (1, "paragraphs"), (1, "none"),
    ]  # fmt: skip
    first = units[0]
    assert first.pair == "en-ne"
    assert 0 < len(first.source) <= 400
    assert first.source.startswith("Skip to main content")
    assert first.reference.startswith("लेखक")
    whole = quality_data.documents(None, ["none"])
    assert len(whole[0].source) > 10_000
    assert len(whole[0].reference) > 3000


def test_compare_finds_a_real_difference_and_not_a_null_one() -> None:
    sources = [
        f"Sentence number {i} is about the weather in the mountains today." for i in range(30)
    ]
    refs = [f"Satz Nummer {i} handelt heute vom Wetter in den Bergen." for i in range(30)]

    def run(outputs: list[str]) -> dict[str, Any]:
        return results_of(
            [
                record(o, index=i, source=s, reference=r)
                for i, (s, r, o) in enumerate(zip(sources, refs, outputs, strict=True))
            ]
        )

    bad, good = run(sources), run(refs)  # A echoes every source, B is the reference
    comparison = quality_report.compare(bad, good, n_bootstrap=200)
    assert comparison["schema"] == quality_report.COMPARE_SCHEMA
    (row,) = comparison["rows"]
    assert row["pair"] == "en-de"
    assert row["system"] == "tolk"
    assert row["n"] == 30
    assert row["chrf"]["b"] == pytest.approx(100)
    assert row["chrf"]["diff"] > 50
    assert row["chrf"]["significant"]
    assert row["bleu"]["significant"]
    echo = row["failures"]["echo"]
    assert echo["a"] == 1.0
    assert echo["b"] == 0.0
    assert echo["diff"] == -1.0
    assert echo["significant"]
    same = quality_report.compare(good, good, n_bootstrap=200)["rows"][0]
    assert same["chrf"]["diff"] == 0
    assert not same["chrf"]["significant"]
    assert not same["failures"]["any"]["significant"]
    assert "Δ chrF++" in quality_report.compare_markdown(comparison)
    assert quality_report.compare_rows(comparison)[0][5].endswith("*")
    assert comparison["markup"] == []  # no markup units: no markup section
    assert "## Markup" not in quality_report.compare_markdown(comparison)


def test_compare_judges_both_runs_by_todays_checks() -> None:
    """A run's file keeps the problems found when it was made; a check added since (here:
    the problems wiped, as a run from before the check would have them) counts in both."""
    old = results_of([record(SOURCE)])  # an echo of the source
    assert old["records"][0]["problems"]
    old["records"][0]["problems"] = []
    new = results_of([record(SOURCE)])
    (row,) = quality_report.compare(old, new, n_bootstrap=50)["rows"]
    assert row["failures"]["echo"]["a"] == 1.0
    assert row["failures"]["echo"]["b"] == 1.0


def test_compare_judges_each_run_with_the_languages_its_run_told_apart() -> None:
    """The detector's verdict depends on the languages it knows: Dutch for German passes
    among en and de alone. A run records its judge's languages; a compare uses them."""
    dutch = "Het museum gaat om negen uur 's ochtends open en sluit om zes uur 's avonds."
    old = results_of([record(dutch)])  # from before languages were recorded
    old.pop("languages", None)
    new = {**results_of([record(dutch)]), "languages": ["de", "en", "nl"]}
    (row,) = quality_report.compare(old, new, n_bootstrap=50)["rows"]
    assert row["failures"]["off_target"]["a"] == 0.0  # the records' en and de only
    assert row["failures"]["off_target"]["b"] == 1.0


def test_compare_pairs_markup_units_too() -> None:
    """Two runs of the same markup units, B keeping the placeholders where A fell back."""
    units = [
        quality_data.markdown_of(f"Report number {i} covers the weather in the mountains.", i)
        for i in range(1, 31)
    ]
    assert all(units)

    def run(kept: bool) -> dict[str, Any]:
        return results_of(
            [
                record(
                    u.replace("Report number", "Bericht Nummer") if kept else "Bericht.",
                    kind="markdown",
                    index=i,
                    source=u,
                    reference="",
                    flags=[] if kept else ["markup_dropped"],
                )
                for i, u in enumerate(units)
                if u is not None
            ]
        )

    comparison = quality_report.compare(run(False), run(True), n_bootstrap=200)
    assert comparison["rows"] == []  # no sentences
    (row,) = comparison["markup"]
    assert (row["format"], row["pair"], row["system"], row["n"]) == (
        "markdown",
        "en-de",
        "tolk",
        30,
    )
    assert row["kept"]["a"] == 0.0
    assert row["kept"]["b"] == 1.0
    assert row["kept"]["significant"]
    assert row["intact"]["diff"] == 1.0
    table = quality_report.compare_markdown(comparison)
    assert "## Markup" in table
    assert "| markdown | en-de | tolk | 30 | 0.0 | 100.0 | +100.0* |" in table


def test_the_report_files_hold_the_figures(tmp_path: Path) -> None:
    results = results_of([record(GERMAN), record(SOURCE), record("")])
    written = quality_report.write(results, tmp_path)
    assert [p.name for p in written] == ["quality.json", "quality.md", "quality.png"]
    assert (tmp_path / "quality.png").stat().st_size > 5000
    saved = json.loads((tmp_path / "quality.json").read_text())
    assert saved["schema"] == "tolk.bench.quality/1"
    assert len(saved["records"]) == 3
    assert saved["records"][1]["problems"] == ["off_target", "echo"]
    # Saved records can be scored again to the same figures.
    assert quality_report.summarize(saved)["sentences"][0]["chrf"] == pytest.approx(
        results["summary"]["sentences"][0]["chrf"]
    )
    text = (tmp_path / "quality.md").read_text()
    row = results["summary"]["sentences"][0]
    assert f"| en-de | tolk | {row['chrf']:.1f} [" in text
    assert "| 33.3 |" in text  # off-target and echo: 1 of 3
    assert "BLEU tokenizers: en-de 13a" in text
    table = quality_report.table(results)  # a run without speed: the quality table alone
    assert isinstance(table, Table)
    assert table.row_count == 1


@pytest.fixture
async def standin() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A stand-in server on 127.0.0.1 (not vLLM, not tolk): OpenAI's chat completions
    answering 'Hallo Welt' (cut at the budget for a long text), tolk's /translate with a
    warning, LibreTranslate's /translate and DeepL's /v2/translate with X-Tolk-Warnings."""
    seen: list[dict[str, Any]] = []

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        long = len(body["messages"][0]["content"]) > 150
        return web.json_response(
            {
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "content": "Hallo Welt " * (9 if long else 1),
                        },
                        "finish_reason": "length" if long else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 30, "completion_tokens": 512 if long else 3},
            }
        )

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "standin-model"}]})

    async def translate(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        if "q" in body:  # LibreTranslate's shape
            header = json.dumps([{"text": 0, "code": "echo"}])
            return web.json_response(
                {"translatedText": body["q"]}, headers={"X-Tolk-Warnings": header}
            )
        warning = {"text": 0, "code": "off_target", "message": "not German"}
        timing = (
            'engine;dur=3.0, to-engine;dur=0.5, to-first-output;dur=2.5, engine-requests;desc="2"'
        )
        return web.json_response(
            {"translation": "Hallo", "usage": {"completion_tokens": 2}, "warnings": [warning]},
            headers={"Server-Timing": timing},
        )

    async def deepl(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response({"translations": [{"text": "Hallo"}]})

    async def tolk_models(request: web.Request) -> web.Response:
        return web.json_response({"models": [{"model": "standin", "prompt_format": "chat"}]})

    async def metrics(request: web.Request) -> web.Response:
        # The engine's gauges as vLLM publishes them (both tolk and vLLM's server do), and its
        # counters as if each request took 10 engine steps of 3 tokens made, 20% cache hits.
        served = len(seen)
        text = (
            "# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{engine="0"} 3.0\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            'vllm:num_requests_waiting{engine="0"} 1.0\n'
            "# TYPE vllm:iteration_tokens_total histogram\n"
            f'vllm:iteration_tokens_total_bucket{{engine="0",le="+Inf"}} {10 * served}\n'
            f'vllm:iteration_tokens_total_count{{engine="0"}} {10 * served}\n'
            f'vllm:iteration_tokens_total_sum{{engine="0"}} {50 * served}\n'
            "# TYPE vllm:generation_tokens counter\n"
            f'vllm:generation_tokens_total{{engine="0"}} {30 * served}\n'
            "# TYPE vllm:prefix_cache_queries counter\n"
            f'vllm:prefix_cache_queries_total{{engine="0"}} {100 * served}\n'
            "# TYPE vllm:prefix_cache_hits counter\n"
            f'vllm:prefix_cache_hits_total{{engine="0"}} {20 * served}\n'
            "# TYPE vllm:request_success counter\n"
            f'vllm:request_success_total{{engine="0",finished_reason="stop"}} {served}\n'
            # tolk's event loop: 2 ms of its thread's CPU a request, its heartbeat 0.1 ms late.
            "# TYPE tolk_event_loop_cpu_seconds counter\n"
            f"tolk_event_loop_cpu_seconds_total {0.002 * served}\n"
            "# TYPE tolk_event_loop_stall_seconds histogram\n"
            f"tolk_event_loop_stall_seconds_count {10 * served}\n"
            f"tolk_event_loop_stall_seconds_sum {0.001 * served}\n"
            # 50 ms in the engine a request, 10 ms waiting for its group before; two HTTP
            # requests in the server whenever sampled, and the scrape itself.
            "# TYPE vllm:e2e_request_latency_seconds histogram\n"
            f'vllm:e2e_request_latency_seconds_count{{engine="0"}} {served}\n'
            f'vllm:e2e_request_latency_seconds_sum{{engine="0"}} {0.05 * served}\n'
            "# TYPE tolk_engine_gather_wait_seconds counter\n"
            f'tolk_engine_gather_wait_seconds_total{{model="standin"}} {0.01 * served}\n'
            "# TYPE tolk_requests_in_flight gauge\n"
            "tolk_requests_in_flight 3.0\n"
        )
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/translate", translate)
    app.router.add_post("/v2/translate", deepl)
    app.router.add_get("/models", tolk_models)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


async def test_openai_baseline_and_drop_in_apis_against_a_standin(
    standin: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, seen = standin
    units = [
        Unit("sentence", "en", "de", 0, "The weather is lovely in the mountains.", "Schön."),
        Unit("sentence", "en", "de", 1, "Hello world. " * 20, "Hallo Welt. " * 20),
        Unit("document", "en", "ne", 0, "A document.", "कागजात।", "paragraphs"),
    ]
    plan = quality.Plan(
        units=units, url=url, apis=("tolk", "deepl", "libretranslate"), openai=url,
        concurrency=2, languages=["en", "de", "ne"],
        settings={"data": "x", "offset": 0, "sentences_per_pair": 2, "warnings": []},
    )  # fmt: skip
    results = await quality.run_quality(plan, tmp_path)
    by_system = {s["name"]: s for s in results["systems"]}
    assert sorted(by_system) == ["openai", "tolk", "tolk-deepl", "tolk-libretranslate"]
    assert by_system["openai"]["model"] == "standin-model"
    prompts = [b for b in seen if "messages" in b]
    assert len(prompts) == 2  # sentences only: documents go to tolk's API alone
    assert {
        "role": "user",
        "content": "Translate the following English text into German. Reply with the "
        "translation only.\n\nThe weather is lovely in the mountains.",
    } in [p["messages"][0] for p in prompts]
    assert prompts[0]["temperature"] == 0
    assert prompts[0]["max_tokens"] == 512
    openai = [r for r in results["records"] if r["system"] == "openai"]
    assert [r["finish_reason"] for r in openai] == ["stop", "length"]
    assert "truncated" in openai[1]["problems"]  # (not a loop: its source repeats itself)
    document = [b for b in seen if b.get("split") == "paragraphs"]
    assert document == [
        {"text": "A document.", "source_lang": "en", "target_lang": "ne", "split": "paragraphs"}
    ]
    rows = {s["system"]: s for s in results["summary"]["sentences"]}
    assert rows["tolk"]["flags_seen"] == 2  # tolk's `warnings`
    assert rows["tolk-libretranslate"]["flagged"] == 2  # X-Tolk-Warnings, on its echoes
    assert rows["tolk-libretranslate"]["unflagged"] == 2  # flagged echo, not off-target
    assert rows["openai"]["rates"]["truncated"] == pytest.approx(0.5)
    assert rows["tolk"]["rates"]["truncated"] is None
    assert rows["openai"]["output_tokens"] == 515
    assert results["summary"]["documents"][0]["split"] == "paragraphs"


async def test_rounds_alternate_and_every_pass_is_timed_with_the_ratio_first(
    standin: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, seen = standin
    units = [
        Unit("sentence", "en", "de", i, f"Sentence number {i}.", f"Satz {i}.") for i in range(4)
    ]
    units.append(Unit("markdown", "en", "de", 0, "Some **bold** words.", "Fette Worte."))
    plan = quality.Plan(
        units=units, url=url, apis=("tolk",), openai=url, concurrency=2, rounds=2,
        languages=["en", "de"],
        settings={"data": "x", "offset": 0, "sentences_per_pair": 4, "warnings": [],
                  "concurrency": 2},
    )  # fmt: skip
    results = await quality.run_quality(plan, tmp_path)
    passes = results["speed"]["passes"]
    # Each system twice, the side that goes first alternating; each pass in two phases, the
    # sentences then the markup units, each timed as its own closed loop.
    assert [(p["round"], p["system"], p["phase"]) for p in passes] == [
        (1, "tolk", "sentences"), (1, "tolk", "markup"),
        (1, "openai", "sentences"), (1, "openai", "markup"),
        (2, "openai", "sentences"), (2, "openai", "markup"),
        (2, "tolk", "sentences"), (2, "tolk", "markup"),
    ]  # fmt: skip
    assert len(seen) == 20  # every unit to every system in every round
    assert len(results["records"]) == 10  # the first pass of each is scored
    for p in passes[::2]:  # the sentences' passes
        assert p["requests"] == 4
        assert p["errors"] == 0
        assert p["wall_s"] > 0
        assert p["requests_per_s"] == pytest.approx(4 / p["wall_s"])
        # Two clients for four sentences: both busy until the last one was sent, and what
        # was answered by then counted over that time.
        assert 1 <= p["saturated_requests"] <= 3
        assert 0 < p["saturated_s"] < p["wall_s"]
        assert p["saturated_requests_per_s"] == p["saturated_requests"] / p["saturated_s"]
        assert 0 < p["clients_mean"] <= 2  # never more than the clients
        assert 0 < p["client_busy"] <= 1.05  # this thread's CPU over the wall time
        assert p["running_mean"] == 3.0
        assert p["waiting_mean"] == 1.0
        # The engine's counters read before and after the pass: 4 requests, 10 steps each.
        engine = p["engine"]
        assert engine["steps"] == 40
        assert engine["step_ms"] == pytest.approx(1000 * p["wall_s"] / 40)
        assert engine["generated_per_step"] == 3.0
        assert engine["tokens_per_step"] == 5.0
        assert engine["engine_requests"] == 4
        assert engine["prefix_cache_hit_rate"] == pytest.approx(0.2)
        assert engine["tpot_ms"] is None  # not published by the stand-in
        assert engine["loop_cpu_s"] == pytest.approx(0.008)
        assert engine["loop_lag_ms"] == pytest.approx(0.1)
    for p in passes[1::2]:  # one markup unit: never more than the clients, never saturated
        assert p["requests"] == 1
        assert p["saturated_requests_per_s"] is None
        assert p["engine"]["engine_requests"] == 1
        # Its latency kept per pass (only the first pass's records are): by pair and format.
        ((group, latencies),) = p["unit_latencies_s"].items()
        assert group == "en-de markdown"
        assert len(latencies) == 1
        assert latencies[0] > 0
        # And its tokens, by the same groups (what each pair's units cost, every pass).
        assert p["unit_tokens"] == {"en-de markdown": p["output_tokens"]}
    # And where each tolk unit's time went up to its first engine output (its Server-Timing).
    for p in passes[1::2]:
        expected = {"to-engine": [0.0005], "to-first-output": [0.0025], "engine_requests": [2]}
        timing = {"en-de markdown": {"engine": [0.003], **expected}}
        assert p["unit_timing"] == (timing if p["system"] == "tolk" else None)
    assert all(p["unit_latencies_s"] is None for p in passes[::2])
    assert all(p["unit_tokens"] is None for p in passes[::2])
    assert all(p["unit_timing"] is None for p in passes[::2])
    # The markup units after each system's first pass: round 2's, tolk's over openai's.
    later = {m["system"]: m for m in results["speed"]["markup_later"]}
    (tolk_later,) = passes[7]["unit_latencies_s"].values()
    (openai_later,) = passes[5]["unit_latencies_s"].values()
    assert later["tolk"]["p50_s"] == tolk_later[0]
    assert later["tolk"]["units"] == 1
    assert later["tolk"]["over_baseline"] == pytest.approx(tolk_later[0] / openai_later[0])
    assert later["openai"]["group"] == "en-de markdown"
    tolk_tokens = [p["output_tokens"] for p in passes if p["system"] == "tolk"]
    assert tolk_tokens == [8, 2, 8, 2]  # 2 a text in the stand-in's usage
    rows = {(r["system"], r["phase"]): r for r in results["speed"]["systems"]}
    assert [key for key in rows] == [
        ("tolk", "sentences"), ("openai", "sentences"), ("tolk", "markup"), ("openai", "markup"),
    ]  # fmt: skip
    assert rows[("tolk", "sentences")]["passes"] == rows[("openai", "markup")]["passes"] == 2
    sentences, markup = results["speed"]["ratios"]
    assert (sentences["system"], sentences["phase"]) == ("tolk", "sentences")
    tolk, openai = rows[("tolk", "sentences")], rows[("openai", "sentences")]
    assert sentences["requests_per_s"] == pytest.approx(
        tolk["requests_per_s"] / openai["requests_per_s"]
    )
    assert sentences["saturated_requests_per_s"] == pytest.approx(
        tolk["saturated_requests_per_s"] / openai["saturated_requests_per_s"]
    )
    assert markup["phase"] == "markup"
    assert markup["saturated_requests_per_s"] is None
    md = quality_report.markdown(results)
    first = md.split("\n\n")[2]  # after the title and the run's description
    assert first.startswith("**sentences: tolk / openai: requests/s x")
    assert "(all clients busy: x" in first
    assert "| tolk | sentences | 2 | 8 | 0 |" in md
    assert "| tolk | markup | 2 | 2 | 0 |" in md
    assert "| 80 | " in md  # the engine steps of both sentence passes
    loop = tolk["engine"]
    assert loop["loop_ms_per_request"] == pytest.approx(2.0)
    assert loop["loop_busy"] == pytest.approx(0.016 / rows[("tolk", "sentences")]["wall_s"])
    assert "| 2.00 | 0.1 |" in md  # loop ms a request, loop lag ms
    # Where a request's time went: the clients' latencies, the server's two in flight over
    # the wall time, the group's 10 ms and the engine's 50 ms, per request answered.
    sentence_passes = [p for p in passes if p["system"] == "tolk" and p["phase"] == "sentences"]
    assert all(p["server_in_flight_mean"] == 2.0 for p in sentence_passes)
    times, wall = tolk["time_ms"], tolk["wall_s"]
    assert times["latency"] == pytest.approx(
        1000 * sum(p["clients_mean"] * p["wall_s"] for p in sentence_passes) / 8
    )
    assert times["in_server"] == pytest.approx(1000 * 2.0 * wall / 8)
    assert times["gathering"] == pytest.approx(10.0)
    assert times["in_engine"] == pytest.approx(50.0)
    assert f"| {times['in_server']:.0f} | 10 | 50 |" in md
    ratio = later["tolk"]["over_baseline"]
    assert f"| tolk | en-de markdown | 1 | {tolk_later[0]:.2f} | {ratio:.2f} |" in md
    report = quality_report.table(results)
    assert isinstance(report, Group)
    titles = [str(t.title) for t in report.renderables if isinstance(t, Table)]
    assert titles[1].startswith("Markup units after each system's first")


def test_variants_run_as_blocks_each_alternating_with_one_baseline() -> None:
    plan = quality.Plan(
        units=[], config=Path("tolk.yaml"), openai_start=Path("model"), rounds=2,
        variants=("examples-off", "retry-off"),
    )  # fmt: skip
    assert quality.schedule(plan) == [
        (0, None, 1, "tolk"), (0, None, 1, "baseline"),
        (0, None, 2, "baseline"), (0, None, 2, "tolk"),
        (1, "examples-off", 1, "tolk"), (1, "examples-off", 1, "baseline"),
        (1, "examples-off", 2, "baseline"), (1, "examples-off", 2, "tolk"),
        (2, "retry-off", 1, "tolk"), (2, "retry-off", 1, "baseline"),
        (2, "retry-off", 2, "baseline"), (2, "retry-off", 2, "tolk"),
    ]  # fmt: skip
    # One round, no variants: tolk, then the baseline (tolk is stopped before it starts).
    assert quality.schedule(quality.Plan(units=[], url="u", openai="o")) == [
        (0, None, 1, "tolk"), (0, None, 1, "baseline"),
    ]  # fmt: skip


def test_each_variant_switches_one_feature_off_on_every_model() -> None:
    from tolk.config import SamplingSettings, load_config

    shipped = load_config(REPO / "configs/gpu-qwen2.5-coder-0.5b.yaml")
    (model,) = shipped.models
    assert model.prompt_examples == 2
    assert model.checks.enabled
    assert model.checks.retry
    off = {name: change(shipped).models[0] for name, change in quality_speed.VARIANTS.items()}
    assert off["examples-off"].prompt_examples == 0
    assert off["examples-1"].prompt_examples == 1
    assert off["examples-1"].checks == model.checks
    assert off["examples-off"].checks.enabled
    assert not off["checks-off"].checks.enabled
    assert off["checks-off"].prompt_examples == 2
    assert off["retry-off"].checks.enabled
    assert not off["retry-off"].checks.retry
    assert off["retry-off"].engine == model.engine  # nothing else changes
    assert model.checks.retry_sampling.repetition_penalty == 1.2
    sampled = off["retry-sampled"].checks.retry_sampling
    assert sampled.repetition_penalty is None
    assert sampled.temperature > 0
    assert model.checks.markup_candidates == 4
    assert off["markup-one-retry"].checks.markup_candidates == 1
    assert off["markup-one-retry"].checks.retry_sampling == model.checks.retry_sampling
    assert not model.checks.markup_first_clean
    assert off["markup-first-clean"].checks.markup_first_clean
    assert off["markup-first-clean"].checks.markup_candidates == 4
    assert off["retry-greedy"].checks.retry_sampling == SamplingSettings()
    assert off["markup-twin"].candidates.markup_n == 2
    assert off["markup-twin-off"].candidates.markup_n == 1
    assert off["markup-twin"].candidates.n == model.candidates.n
    assert model.checks.markup_skip_limit == 0.8
    assert off["markup-whole-always"].checks.markup_skip_limit == 1.0
    assert off["markup-whole-always"].checks.markup_candidates == model.checks.markup_candidates
    assert model.candidates.markup_twin_pairs == 3
    assert off["markup-twin-every"].candidates.markup_twin_pairs == 0
    assert off["markup-twin-every"].candidates.markup_n == model.candidates.markup_n
    assert off["markup-twins-2"].candidates.markup_n == 3
    assert off["markup-twins-2"].candidates.markup_twin_pairs == 3
    assert model.checks.markup_skip_unwritten
    assert not off["markup-unwritten-learnt"].checks.markup_skip_unwritten
    assert off["markup-unwritten-learnt"].checks.markup_skip_limit == model.checks.markup_skip_limit
    assert not model.checks.markup_split_unwritten
    assert off["markup-split-unwritten"].checks.markup_split_unwritten
    assert off["markup-split-unwritten"].checks.markup_skip_unwritten
    assert model.checks.retry_min_mended == 0.2
    assert off["retry-always"].checks.retry_min_mended == 0
    assert model.checks.markup_fallback_early
    assert not off["fallback-late"].checks.markup_fallback_early
    assert off["fallback-late"].checks.retry_min_mended == 0.2
    assert model.checks.first_as_retry_limit == 0.5
    assert off["first-as-usual"].checks.first_as_retry_limit == 1.0
    assert off["first-as-usual"].checks.retry_sampling == model.checks.retry_sampling
    assert model.prompt_example_chars == 160
    assert off["examples-short"].prompt_example_chars == 90
    assert off["examples-short"].prompt_examples == 2
    assert model.prompt_example_turns == "asked"
    assert off["examples-bare"].prompt_example_turns == "bare"
    assert off["examples-bare"].prompt_example_chars == 160
    bare_short = off["examples-bare-short"]
    assert (bare_short.prompt_example_turns, bare_short.prompt_example_chars) == ("bare", 90)
    assert model.placeholders_told
    assert not off["markup-untold"].placeholders_told
    # Shipped: requests gathered every 50 ms, graphs captured up to 2,048-token steps.
    shipped_graphs = {"max_cudagraph_capture_size": 2048}
    assert model.engine.extra_args["compilation_config"] == shipped_graphs
    assert model.engine.gather_ms == 50
    assert off["gather-off"].engine.gather_ms == 0
    assert off["gather-10"].engine.gather_ms == 10
    assert off["gather-25"].engine == model.engine.model_copy(update={"gather_ms": 25})
    full = off["cudagraph-full"].engine
    # Merged into the shipped compilation_config, not replacing it.
    assert full.extra_args["compilation_config"] == {**shipped_graphs, "cudagraph_mode": "FULL"}
    assert full.model_copy(update={"extra_args": {}}) == model.engine.model_copy(
        update={"extra_args": {}}
    )
    smaller = off["cudagraph-1024"].engine.extra_args["compilation_config"]
    assert smaller == {"max_cudagraph_capture_size": 1024}
    assert off["cudagraph-512"].engine.extra_args["compilation_config"] == {
        "max_cudagraph_capture_size": 512
    }
    assert off["gather-50"].engine.gather_ms == 50
    assert model.engine.gather_most == 32
    assert off["gather-whole"].engine == model.engine.model_copy(update={"gather_most": 0})
    assert off["checks-off"].engine == model.engine
    # The server's: small requests prepared on the loop, or none (every model unchanged).
    assert shipped.server.inline_chars == 1000
    inline_off = quality_speed.VARIANTS["inline-off"](shipped)
    assert inline_off.server.inline_chars == 0
    assert inline_off.server.model_copy(update={"inline_chars": 1000}) == shipped.server
    assert off["inline-off"] == model


def test_variants_joined_by_plus_make_all_their_changes() -> None:
    from tolk.config import load_config

    shipped = load_config(REPO / "configs/gpu-qwen2.5-coder-0.5b.yaml")
    both = quality_speed.variant("gather-25+cudagraph-1024+examples-1")(shipped).models[0]
    assert both.engine.gather_ms == 25
    assert both.engine.extra_args["compilation_config"] == {"max_cudagraph_capture_size": 1024}
    assert both.prompt_examples == 1
    assert both.checks == shipped.models[0].checks
    assert quality_speed.known("gather-25+cudagraph-1024")
    assert quality_speed.known("retry-off")
    for wrong in ("gather-25+gather-25", "gather-25+", "gather-7", ""):
        assert not quality_speed.known(wrong), wrong


def test_translation_memory_and_alternative_systems_say_so_in_their_requests() -> None:
    unit = Unit("sentence", "en", "de", 0, "The weather is lovely.", "Schönes Wetter.")
    markup = Unit("html", "en", "de", 0, "<b>Hi</b>", "<b>Hallo</b>")
    tm = quality.System("tolk+tm", "tolk", "http://x", translation_memory="tm-1")
    assert quality.request(tm, unit)[1]["translation_memory_id"] == "tm-1"
    deepl_tm = quality.System("tolk-deepl+tm", "deepl", "http://x", translation_memory="tm-1")
    assert quality.request(deepl_tm, unit)[1]["translation_memory_id"] == "tm-1"
    plain = quality.System("tolk", "tolk", "http://x")
    assert "translation_memory_id" not in quality.request(plain, unit)[1]
    assert tm.takes(unit)
    assert not tm.takes(markup)  # measured on sentences


def test_the_chat_systems_send_what_tolk_recognises_as_the_same_translation() -> None:
    """`--apis chat,chat-prompt`: OpenAI's chat completions with the pair in the model's
    name, and with Pot's own prompt (tests/data/chat_apps/pot-openai.json); tolk reads both
    as the unit's text and pair, so their scores measure the endpoint, not a prompt."""
    from tolk.wire.chat_prompts import recognise

    unit = Unit("sentence", "en", "de", 0, 'He said "yes".\nThen he left.', "Er sagte ja.")
    pot = json.loads((TEST_DATA / "chat_apps/pot-openai.json").read_text())
    # Pot's prompt names the target only: tolk detects the source, as for its other APIs
    # asked without one.
    for api, shape, source in (("chat", "model", "en"), ("chat-prompt", "prompt:pot", None)):
        path, body = quality.request(quality.System(f"tolk-{api}", api, "u"), unit)
        assert path == "/v1/chat/completions"
        found = recognise(body)
        assert found is not None
        assert (found.shape, found.texts, found.source, found.target) == (
            shape, (unit.source,), source, "de"
        )  # fmt: skip
    _, sent = quality.request(quality.System("tolk-chat-prompt", "chat-prompt", "u"), unit)
    assert sent["messages"][0] == pot["body"]["messages"][0]  # Pot's system prompt, verbatim
    answer = {"choices": [{"message": {"content": '"Er sagte ja."'}}], "usage": {}}
    system = quality.System("tolk-chat-prompt", "chat-prompt", "u")
    assert quality.reply(system, answer, {})["output"] == "Er sagte ja."  # as Pot strips it


def test_the_cli_takes_variants_joined_by_plus_and_names_the_known_ones() -> None:
    from typer import BadParameter
    from typer.testing import CliRunner

    from tolk.bench.cli import _quality_variants
    from tolk.cli import app

    config = REPO / "configs/gpu-qwen2.5-coder-0.5b.yaml"
    assert _quality_variants("gather-25+cudagraph-1024, retry-off", config) == [
        "gather-25+cudagraph-1024",
        "retry-off",
    ]
    args = ["bench", "quality", "--config", str(config), "--variants", "gather-25+gather-7"]
    result = CliRunner().invoke(app, args, terminal_width=400)
    assert result.exit_code == 2
    assert "--variants" in result.output
    with pytest.raises(BadParameter, match="cudagraph-2048"):  # the known names listed
        _quality_variants("gather-25+gather-7", config)
