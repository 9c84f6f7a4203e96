"""`tolk fleet` without engines: what it started stops even when it is killed (a stand-in
child, `python -m http.server`), each server gets a GPU in turn, and its configs are one or one
per server."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.paths import REPO
from tests.support.processes import still_running
from tests.support.servers import runtime_env
from tolk.local.fleet import place, visible_gpus


def test_what_the_fleet_started_stops_even_if_the_fleet_is_killed(tmp_path: Path) -> None:
    """`kill -9` of the process that started them (no Ctrl-C, no cleanup): each process it
    started with stop_with_parent gets SIGTERM from the kernel."""
    starter = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tolk.local.processes import LocalServer, free_port\n"
        "port = free_port()\n"
        "command = [sys.executable, '-m', 'http.server', str(port), '--bind', '127.0.0.1']\n"
        "child = LocalServer.start(command, port, Path(sys.argv[1]), ready_path='/',\n"
        "                          stop_with_parent=True)\n"
        "print(child.proc.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", starter, str(tmp_path / "child.log")],
        cwd=REPO, env=runtime_env(), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert parent.stdout is not None
    child = psutil.Process(int(parent.stdout.readline()))
    try:
        assert child.is_running()
        parent.kill()
        parent.wait(10)
        assert still_running([child], 10) == []  # an orphan: init reaps it, maybe late
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


def test_gpus_each_server_gets_one_in_turn() -> None:
    none = dict[str, str]()
    assert visible_gpus("auto", none, lambda: 2) == ["0", "1"]
    assert visible_gpus("auto", none, lambda: 0) == []  # no NVIDIA driver: no placement
    # CUDA_VISIBLE_DEVICES says which GPUs this process may use: only those are handed out
    assert visible_gpus("auto", {"CUDA_VISIBLE_DEVICES": "2,3"}, lambda: 8) == ["2", "3"]
    assert visible_gpus("none", {"CUDA_VISIBLE_DEVICES": "2"}, lambda: 8) == []
    assert visible_gpus(" 1, GPU-abc ", none, lambda: 0) == ["1", "GPU-abc"]
    with pytest.raises(ValueError, match="auto, none or a list"):
        visible_gpus(",", none, lambda: 0)
    assert place(2, ["0", "1"]) == (["0", "1"], [])
    assert place(2, []) == ([None, None], [])
    placed, (note,) = place(3, ["0", "1"])
    assert placed == ["0", "1", "0"]
    assert "3 servers on 2 GPU(s)" in note


def test_configs_must_be_one_or_one_per_server(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tolk", "fleet", "--config", "configs/demo.yaml", "--config",
         "configs/demo.yaml", "--servers", "3"],
        cwd=REPO, env=runtime_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "2 configs for 3 servers" in result.stderr
