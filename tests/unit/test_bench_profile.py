"""py-spy's raw recordings read into each busy thread's share of a core and its hottest
functions (tolk.bench.profile): a real py-spy on a real process tree."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tolk.bench import profile

# A parent that keeps a thread and a spawned child busy in spin(), and itself waits.
TREE = textwrap.dedent(
    """
    import multiprocessing, sys, threading, time

    def spin():
        end = time.monotonic() + 30
        while time.monotonic() < end:
            sum(range(500))

    if __name__ == "__main__":
        child = multiprocessing.get_context("spawn").Process(target=spin)
        child.start()
        threading.Thread(target=spin, name="spinner", daemon=True).start()
        print("ready", flush=True)
        sys.stdin.read()  # waits (not sampled) until the test closes stdin
        child.terminate()
    """
)


def test_a_process_tree_is_recorded_and_each_busy_thread_summarised(tmp_path: Path) -> None:
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        recording = profile.Recording(proc.pid, tmp_path / "profile.txt", rate=50)
        recording.start()
        time.sleep(2)  # the recording's length: what is sampled, not a condition waited for
        assert recording.stop()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    found = profile.summarize(recording.output, recording.seconds, recording.rate)
    # The parent's spinning thread and the child's main thread, each about a core busy; the
    # parent's main thread waited on stdin and is not reported (multiprocessing's resource
    # tracker, a third process, may show its start-up).
    spinning = [t for t in found["threads"] if t["busy"] > 0.4]
    assert len(spinning) == 2, found["threads"]
    parent = [t for t in found["threads"] if t["process"].endswith(f"[{proc.pid}]")]
    assert [t["thread"] for t in parent] == ["spinner"]
    for thread in spinning:
        top, share = thread["own"][0]
        assert top == "spin (tree.py)"
        assert share > 0.9
    # Inclusive shares leave out the trunk (frames in every sample: here all of the
    # spinner's stack), so what is left are branches.
    for thread in spinning:
        assert all(share < 0.995 for _, share in thread["inclusive"])
    assert parent[0]["inclusive"] == []
    md = "\n".join(profile.markdown({"tolk": found}))
    assert "spin (tree.py)" in md


def test_raw_lines_by_process_and_thread() -> None:
    lines = [
        'process 10:"python -m tolk serve --config x";thread (10): MainThread;'
        "run (asyncio/base_events.py:600);handle (tolk/app.py:12) 7\n",
        'process 10:"python -m tolk serve";process 11:"VLLM::EngineCore";'
        "thread (11): MainThread;serve (tolk/cli.py:3);Popen._launch (popen_fork.py:71);"
        "BaseProcess._bootstrap (multiprocessing/process.py:314);"
        "busy_loop (vllm/core.py:5);step (vllm/core.py:9) 3\n",
        'process 10:"python -m tolk serve";process 11:"python -c a; b(fd=4)";'
        "thread (11): MainThread;busy_loop (vllm/core.py:6) 2\n",
        "py-spy> not a stack\n",
        # The same thread before py-spy read its name: counted with the named samples.
        'process 10:"python -m tolk serve --config x";thread (10);'
        "run (asyncio/base_events.py:600) 2\n",
    ]
    threads = profile.parse(lines)
    assert set(threads) == {
        ("tolk [10]", "MainThread"), ("VLLM::EngineCore [11]", "MainThread"),
        ("python [11]", "MainThread"),  # its command line's ';' does not split the frame
    }  # fmt: skip
    assert threads[("tolk [10]", "MainThread")].samples == 9
    core = threads[("VLLM::EngineCore [11]", "MainThread")]
    assert core.samples == 3
    # Forked: its parent's frames at the fork are not its own.
    assert core.inclusive == {"busy_loop (core.py)": 3, "step (core.py)": 3}
    assert core.own == {"step (core.py)": 3}
    # Who called whom, directly (scripts/profile-shares.py's `Caller>Callee`).
    assert core.calls == {("busy_loop (core.py)", "step (core.py)"): 3}
    assert threads[("tolk [10]", "MainThread")].calls == {
        ("run (base_events.py)", "handle (app.py)"): 7
    }
    other = threads[("python [11]", "MainThread")]
    assert other.own == {"busy_loop (core.py)": 2}  # lines of a function counted together


def test_without_py_spy_the_option_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(profile.ProfilerMissing, match="pip install py-spy"):
        profile.py_spy()
