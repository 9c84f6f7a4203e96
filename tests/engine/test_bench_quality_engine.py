"""`tolk bench quality` end to end against the shared real-engine main server (the random
test model): tolk's API with an alternative and DeepL's, sentences, markup and documents,
the report's figures in range."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.processes import run_tolk
from tests.support.servers import ServerProcess


def test_bench_quality_against_a_real_tolk_server(
    main_server: ServerProcess, tmp_path: Path
) -> None:
    result = run_tolk(
        "bench", "quality", "--url", main_server.url, "--sentences", "3", "--pairs", "en-de",
        "--apis", "tolk,deepl", "--markup", "--markup-sentences", "1", "--documents",
        "--document-chars", "200", "--concurrency", "4", "--alternatives", "1", "--out", "q",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "chrF++" in result.stdout
    out = tmp_path / "q"
    data = json.loads((out / "quality.json").read_text())
    assert data["schema"] == "tolk.bench.quality/1"
    assert data["command"].startswith("tolk bench quality --url")
    assert [s["name"] for s in data["systems"]] == ["tolk", "tolk+alt1", "tolk-deepl"]
    sentences = [r for r in data["records"] if r["kind"] == "sentence"]
    assert len(sentences) == 9
    assert all(r["error"] is None and r["latency_s"] > 0 for r in sentences)
    for row in data["summary"]["sentences"]:
        assert row["n"] == 3
        assert row["pair"] == "en-de"
        assert 0 <= row["chrf_ci"][0] <= row["chrf"] <= 100
        assert 0 <= row["bleu"] <= 100
        assert all(v is None or 0 <= v <= 1 for v in row["rates"].values())
        assert 0 <= row["unflagged_share"] <= 1
        assert row["latency_s"]["p95"] >= row["latency_s"]["p50"] > 0
    assert data["summary"]["sentences"][0]["output_tokens"] > 0  # tolk's usage
    # Asked for one alternative: its sample's tokens on top, sentences only.
    plain, sampled = data["summary"]["sentences"][:2]
    assert sampled["system"] == "tolk+alt1"
    assert sampled["output_tokens"] > plain["output_tokens"]
    assert 0 <= sampled["alternatives"]["per_text"] <= 1
    assert "alternatives en-de tolk+alt1:" in (out / "quality.md").read_text()
    markup = data["summary"]["markup"]
    assert sorted((m["system"], m["format"]) for m in markup) == [
        ("tolk", "html"),
        ("tolk", "markdown"),
        ("tolk-deepl", "html"),
    ]
    assert all(0 <= m["intact"] <= 1 for m in markup)
    splits = [d["split"] for d in data["summary"]["documents"]]
    assert splits == ["sentences", "paragraphs", "none"]
    assert (out / "quality.png").stat().st_size > 0
    assert "| en-de | tolk |" in (out / "quality.md").read_text()

    compared = run_tolk(
        "bench", "quality-compare", "q", "q/quality.json", "--out", "c", cwd=tmp_path
    )
    assert compared.returncode == 0, compared.stderr[-3000:]
    comparison = json.loads((tmp_path / "c" / "quality-compare.json").read_text())
    assert [r["chrf"]["diff"] for r in comparison["rows"]] == [0, 0, 0]
    # The markup units are paired too (the same run against itself: no difference).
    assert len(comparison["markup"]) == 3
    assert all(m["intact"]["diff"] == 0 for m in comparison["markup"])
    assert "Markup units: B against A" in compared.stdout
