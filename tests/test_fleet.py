"""`tolk fleet`: one command starts a server, the proxy and (with the binary) Prometheus with
tolk's rules on loopback, prints their URLs, and Ctrl-C stops every process it started."""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from tests.helpers import REPO, model_config, runtime_env, still_running
from tests.support.polling import wait_until_sync
from tolk.cli.fleet import READY
from tolk.local.fleet import place, visible_gpus

URL_ROW = re.compile(r"│ (?P<what>[^│]+?) +│ (?P<url>http://127\.0\.0\.1:\d+) +│")


@pytest.mark.slow
def test_a_fleet_starts_serves_and_stops_without_leftovers(
    tmp_path: Path, test_model: Path
) -> None:
    """Two servers serving different pairs (a config each), each placed on its own "GPU"
    (CUDA_VISIBLE_DEVICES, which the CPU engine ignores), the proxy routing by pair."""
    out = tmp_path / "fleet.out"
    family: list[psutil.Process] = []
    configs = []
    for target in ("de", "fr"):
        config = tmp_path / f"fleet-{target}.yaml"
        model = model_config("demo", test_model, languages=["en", target])
        config.write_text(yaml.safe_dump({"server": {"shutdown_grace": 5}, "models": [model]}))
        configs += ["--config", str(config)]
    command = [
        sys.executable, "-m", "tolk", "fleet", *configs, "--gpus", "3,5", "--port", "0",
        "--prometheus-port", "0", "--scrape-interval", "1", "--workdir", str(tmp_path / "run"),
    ]  # fmt: skip
    with out.open("wb") as sink:
        fleet = subprocess.Popen(
            command, cwd=REPO, env=runtime_env(), stdout=sink, stderr=subprocess.STDOUT
        )
    try:

        def ready() -> bool:
            if READY in out.read_text():
                return True
            assert fleet.poll() is None, out.read_text()
            return False

        began = time.monotonic()  # 300 s for the fleet to be ready and Prometheus to scrape it
        wait_until_sync(ready, within=300, interval=0.5, message=out.read_text)
        family = psutil.Process(fleet.pid).children(recursive=True)
        urls = {m["what"]: m["url"] for m in URL_ROW.finditer(out.read_text())}
        proxy = urls["proxy (send requests here)"]
        assert set(urls) >= {"proxy (send requests here)", "server 1 (GPU 3)", "server 2 (GPU 5)"}
        # each server process (tolk serve --config .../server-N.yaml) sees its own GPU
        for number, gpu in ((1, "3"), (2, "5")):
            (server,) = [p for p in family if f"server-{number}.yaml" in " ".join(p.cmdline())]
            assert server.environ()["CUDA_VISIBLE_DEVICES"] == gpu

        for target, name in (("de", "server 1 (GPU 3)"), ("fr", "server 2 (GPU 5)")):
            answer = httpx.post(
                f"{proxy}/translate",
                json={"text": "Good morning.", "source_lang": "en", "target_lang": target},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-tolk-upstream"] == urls[name]

        if shutil.which("prometheus") is None:
            assert "no `prometheus` on PATH" in out.read_text()
        else:
            prometheus = urls["prometheus"]
            groups = httpx.get(f"{prometheus}/api/v1/rules", timeout=10).json()["data"]["groups"]
            assert {g["name"] for g in groups} == {"tolk-recording", "tolk-alerts"}

            def jobs_up() -> set[str]:
                targets = httpx.get(f"{prometheus}/api/v1/targets", timeout=10).json()
                active = targets["data"]["activeTargets"]
                return {t["labels"]["job"] for t in active if t["health"] == "up"}

            wait_until_sync(
                lambda: jobs_up() == {"tolk-server", "tolk-proxy"},
                within=300 - (time.monotonic() - began),
                interval=0.5,
                message=jobs_up,
            )

        fleet.send_signal(signal.SIGINT)
        assert fleet.wait(120) == 0, out.read_text()
    finally:
        if fleet.poll() is None:  # the test failed: leave nothing running for the next ones
            family += psutil.Process(fleet.pid).children(recursive=True)
            fleet.kill()
            for process in family:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
    alive = still_running(family, 30)
    assert alive == [], f"left behind: {[p.pid for p in alive]}"
    assert "no process of the fleet is left" in out.read_text()


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
