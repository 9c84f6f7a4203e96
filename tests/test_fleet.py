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
from tolk.fleet_cli import READY

URL_ROW = re.compile(r"│ (?P<what>[^│]+?) +│ (?P<url>http://127\.0\.0\.1:\d+) +│")


@pytest.mark.slow
def test_a_fleet_starts_serves_and_stops_without_leftovers(
    tmp_path: Path, test_model: Path
) -> None:
    out = tmp_path / "fleet.out"
    family: list[psutil.Process] = []
    config = tmp_path / "fleet.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"shutdown_grace": 5},
                "models": [model_config("demo", test_model, languages=["en", "de"])],
            }
        )
    )
    command = [
        sys.executable, "-m", "tolk", "fleet", "--config", str(config), "--servers", "1",
        "--port", "0",
        "--prometheus-port", "0", "--scrape-interval", "1", "--workdir", str(tmp_path / "run"),
    ]  # fmt: skip
    with out.open("wb") as sink:
        fleet = subprocess.Popen(
            command, cwd=REPO, env=runtime_env(), stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 300
        while READY not in out.read_text():
            assert fleet.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.5)
        family = psutil.Process(fleet.pid).children(recursive=True)
        urls = {m["what"]: m["url"] for m in URL_ROW.finditer(out.read_text())}
        proxy = urls["proxy (send requests here)"]
        assert set(urls) >= {"proxy (send requests here)", "server 1"}

        answer = httpx.post(
            f"{proxy}/translate",
            json={"text": "Good morning.", "source_lang": "en", "target_lang": "de"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-tolk-upstream"] == urls["server 1"]

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

            while jobs_up() != {"tolk-server", "tolk-proxy"}:
                assert time.monotonic() < deadline, jobs_up()
                time.sleep(0.5)

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
