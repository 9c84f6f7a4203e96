"""Running `python -m tolk` commands, and waiting for processes to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil

from tests.support.servers import runtime_env


def run_tolk(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m tolk ARGS` in `cwd`, with the servers' runtime environment."""
    return subprocess.run(
        [sys.executable, "-m", "tolk", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=runtime_env(),
        timeout=900,
    )


def tolk(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`run_tolk`, failing the test unless the command succeeds (with its output's end)."""
    result = run_tolk(*args, cwd=cwd)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def still_running(processes: list[psutil.Process], within: float) -> list[psutil.Process]:
    """Those of `processes` still running after waiting up to `within` seconds for them to
    end. A zombie has ended (it holds no memory and runs nothing); it only waits for its
    new parent, which on some hosts (this machine's init) reaps it seconds later."""
    _, alive = psutil.wait_procs(processes, timeout=within)

    def running(process: psutil.Process) -> bool:
        try:
            return bool(process.status() != psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return False

    return [p for p in alive if running(p)]
