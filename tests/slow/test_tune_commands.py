"""`tolk tune` end to end on the test model (short sweeps: three settings, a few requests
each): reading a running server's workload and recommending, and ranking on its own engines for
documents and for mixed traffic."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.processes import tolk
from tests.support.servers import ServerProcess, model_config
from tolk.config import load_config
from tolk.tune.profile import read_profile


@pytest.mark.slow
def test_tune_reads_the_server_and_recommends(
    main_server: ServerProcess, test_model: Path, tmp_path: Path
) -> None:
    httpx.post(
        f"{main_server.url}/translate",
        json={"text": "A short text to measure.", "source_lang": "en", "target_lang": "de"},
        timeout=60,
    ).raise_for_status()
    profile = read_profile(main_server.url, "demo")
    assert profile.concurrency >= 1
    assert profile.texts >= 1
    assert "en>de" in profile.to_json()["pairs"]

    config = tmp_path / "tolk.yaml"
    model = model_config("demo", test_model, languages=["en", "de", "fr", "ne"])
    config.write_text(yaml.safe_dump({"models": [model]}))
    out = tmp_path / "tune"
    result = tolk(
        "tune",
        "--config",
        str(config),
        "--model",
        "demo",
        "--from-server",
        main_server.url,
        "--order",
        "up",
        "--candidates",
        "1,2",
        "--batched-tokens",
        "1024",
        "--requests",
        "6",
        "--warmup",
        "1",
        "--slo-p95",
        "300",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    data = json.loads((out / "tune.json").read_text())
    assert data["schema"] == "tolk.tune/1"
    assert data["source"]["kind"] == "server"
    assert data["concurrency"] == data["source"]["concurrency"] >= 1
    sweep = [p for p in data["points"] if p["phase"] == "sweep"]
    assert [p["max_num_seqs"] for p in sweep] == data["sweep"]["measured"]
    assert data["sweep"]["measured"][0] == 1
    tokens = [p for p in data["points"] if p["phase"] == "batched_tokens"]
    assert [p["max_num_batched_tokens"] for p in tokens] == [1024]
    for point in data["points"]:
        assert point["failed"] is None
        assert point["rps"] > 0
        assert point["p95"] >= point["p50"] > 0
        assert point["errors"] == 0
    choice = data["choice"]
    assert choice["met_slo"]
    best = max(p["rps"] for p in data["points"])
    assert choice["rps"] >= best * 0.97  # the fastest, or a smaller setting within noise of it
    assert any(
        (p["max_num_seqs"], p["max_num_batched_tokens"])
        == (choice["max_num_seqs"], choice["max_num_batched_tokens"])
        for p in data["points"]
    )
    # The snippet merged into the config is a config tolk accepts, with the chosen values.
    snippet = yaml.safe_load((out / "recommended.yaml").read_text())
    assert snippet["models"][0]["name"] == "demo"
    merged = yaml.safe_load(config.read_text())
    merged["models"][0]["engine"].update(snippet["models"][0]["engine"])
    config.write_text(yaml.safe_dump(merged))
    engine = load_config(config).models[0].engine
    assert engine.max_num_seqs == choice["max_num_seqs"]
    assert (out / "tune.png").stat().st_size > 5000
    assert "recommended: max_num_seqs" in result.stdout


def _documents_dir(tmp_path: Path) -> Path:
    """A user's own documents: markdown and plain text, a few paragraphs each."""
    folder = tmp_path / "my-documents"
    folder.mkdir()
    sentence = "Step {} batches the segments of many requests so that the device stays busy."
    paragraphs = "\n\n".join(
        " ".join(sentence.format(3 * p + s) for s in range(3)) for p in range(4)
    )  # distinct paragraphs: a request translates a repeated segment once
    (folder / "guide.md").write_text(f"# A guide\n\n{paragraphs}\n")
    (folder / "notes.txt").write_text(paragraphs + "\n")
    (folder / "ignored.bin").write_bytes(b"\x00\x01")
    return folder


def _tune_config(test_model: Path, tmp_path: Path) -> Path:
    config = tmp_path / "tolk.yaml"
    model = model_config("demo", test_model, languages=["en", "de"])
    model["engine"]["max_num_batched_tokens"] = 2048
    config.write_text(yaml.safe_dump({"segment_cache": {"enabled": False}, "models": [model]}))
    return config


def _tune(
    test_model: Path, tmp_path: Path, *args: str
) -> tuple[dict[str, Any], Path, subprocess.CompletedProcess[str]]:
    """`tolk tune` of the demo model (`_tune_config`, 2048 tokens a step, one warm-up) with
    `args`; its tune.json, output directory and run."""
    out = tmp_path / "tune"
    config = _tune_config(test_model, tmp_path)
    result = tolk(
        "tune", "--config", str(config), "--model", "demo", "--batched-tokens", "2048",
        "--warmup", "1", "--out", str(out), *args, cwd=tmp_path,
    )  # fmt: skip
    return json.loads((out / "tune.json").read_text()), out, result


@pytest.mark.slow
def test_tune_for_documents_ranks_documents_per_second(test_model: Path, tmp_path: Path) -> None:
    data, out, result = _tune(
        test_model,
        tmp_path,
        "--traffic",
        "documents",
        "--workload",
        str(_documents_dir(tmp_path)),
        "--concurrency",
        "2",
        "--candidates",
        "2,4",
        "--requests",
        "4",
    )
    assert (data["traffic"], data["unit"]) == ("documents", "documents/s")
    assert data["workload"]["items"] == 2  # the .md and the .txt, not the .bin
    assert data["candidates"] == [2, 4]
    assert data["rule"]["order"] == "up"
    for point in data["points"]:
        assert point["failed"] is None
        assert point["errors"] == 0
        assert point["rps"] == point["documents_per_s"] > 0
        assert point["p95"] == point["document_p95"] >= point["p50"] > 0
        # 4 paragraphs of 3 sentences, the markdown's heading too: whole units, one a line
        assert point["segments_per_document"] >= 4
        assert point["segments_per_s"] >= 4 * point["documents_per_s"] * 0.99
    best = max(p["rps"] for p in data["points"])
    assert data["choice"]["rps"] >= best * 0.97
    assert "documents/s" in (out / "tune.md").read_text()
    assert "documents traffic" in result.stdout


@pytest.mark.slow
def test_tune_for_mixed_traffic_measures_both_scheduling_policies(
    test_model: Path, tmp_path: Path
) -> None:
    data, out, _ = _tune(
        test_model,
        tmp_path,
        "--traffic",
        "mixed",
        "--documents",
        str(_documents_dir(tmp_path)),
        "--document-concurrency",
        "1",
        "--concurrency",
        "3",
        "--candidates",
        "4",
        "--requests",
        "8",
    )
    config = tmp_path / "tolk.yaml"
    assert (data["traffic"], data["unit"]) == ("mixed", "output tokens/s")
    assert data["documents"]["items"] == 2
    assert data["document_concurrency"] == 1
    points = {p["phase"]: p for p in data["points"]}
    assert set(points) == {"sweep", "scheduling"}
    assert (points["sweep"]["scheduling"], points["scheduling"]["scheduling"]) == (
        "fcfs",
        "shortest_first",
    )
    for point in points.values():
        assert point["failed"] is None
        assert point["errors"] == 0
        assert point["sentence_rps"] > 0
        assert point["sentence_p95_alone"] > 0
        assert point["documents_per_s"] > 0
        assert point["document_p95"] > 0
        assert point["rps"] > 0  # output tokens/s of both kinds
    verdict = data["scheduling"]
    assert verdict["measured"] == ["fcfs", "shortest_first"]
    chosen = points["scheduling" if verdict["better"] == "shortest_first" else "sweep"]
    assert data["choice"]["scheduling"] == chosen["scheduling"]
    # The snippet says which policy to run where it is not the default, and tolk accepts it.
    snippet = yaml.safe_load((out / "recommended.yaml").read_text())["models"][0]["engine"]
    assert snippet.get("scheduling", "fcfs") == verdict["better"]
    merged = yaml.safe_load(config.read_text())
    merged["models"][0]["engine"].update(snippet)
    config.write_text(yaml.safe_dump(merged))
    assert load_config(config).models[0].engine.scheduling == verdict["better"]
