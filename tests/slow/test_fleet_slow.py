"""`tolk fleet` end to end: two servers on engines of their own, the proxy and (with the
binary) Prometheus with tolk's rules on loopback, their URLs printed, and Ctrl-C stopping
every process it started."""

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

from tests.support.paths import REPO
from tests.support.polling import wait_until_sync
from tests.support.processes import still_running
from tests.support.servers import model_config, runtime_env
from tolk.cli.fleet import READY

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
