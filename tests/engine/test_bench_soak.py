"""`tolk bench soak` against the shared real-engine server: the server's and its engine's
processes sampled."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.processes import tolk
from tests.support.servers import ServerProcess


def test_bench_soak_samples_the_servers_memory(main_server: ServerProcess, tmp_path: Path) -> None:
    tolk(
        "bench", "soak", "--url", main_server.url, "--pid", str(main_server.proc.pid),
        "--concurrency", "4", "--minutes", "0.1", "--interval", "1", "--items", "20",
        "--out", "soak", cwd=tmp_path,
    )  # fmt: skip
    data = json.loads((tmp_path / "soak" / "soak.json").read_text())
    assert data["requests"] >= 1
    assert data["statuses"].get("200", 0) >= 1
    assert len(data["samples"]) >= 3
    # The server and its engine's processes, each sampled.
    assert {"server", "EngineCore", "Worker"} <= set(data["memory"])
    assert data["memory"]["total"]["max_mib"] > 500
    assert (tmp_path / "soak" / "soak.png").stat().st_size > 1000
