"""py-spy on a server while a benchmark loads it: where each of its processes' CPU goes.

`tolk bench quality --profile` records every server it started (tolk, its engine core;
vLLM's OpenAI server, its engine core) during that server's first pass, with
`py-spy record --subprocesses --threads --format raw` (py-spy, not a Python profiler in the
process: it samples from outside, so the server runs as it would, and it sees the engine's
processes as well as the API's). The raw format is one line per distinct stack, root first:

    process 880:"python -m tolk serve";process 883:"VLLM::EngineCore";
        thread (883): MainThread;fn (file.py:12);... 71     (one line)

Threads waiting (on a lock, the GIL, a socket, the GPU in a blocking call) are not sampled
(py-spy's default, no --idle), so a thread's samples over the seconds recorded times the rate
is the share of one core it kept busy: 1.0 is a thread that never waited, which for an event
loop means requests queue behind it.

What py-spy does not give (it ships no summary of its raw format) is written here: per thread,
its busy share and the functions holding most of its samples, inclusive and self.
"""

from __future__ import annotations

import itertools
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RATE = 100  # samples a second
TOP = 40  # functions kept per thread (inclusive and own)
MIN_BUSY = 0.02  # threads busier than this (a share of one core) are reported
TRUNK = 0.995  # a frame in this share of a thread's samples is its trunk, not reported
STEM = 0.7  # the report's lines name the branches below the frames in this share or more
# A process frame's command line may hold ';' itself (python -c "a; b"): it ends at the '";'
# before the next process or the thread.
_PROCESS = re.compile(r'process (\d+):"(.*?)";(?=process \d+:"|thread \()', re.S)
_THREAD = re.compile(r"^thread \((\w+)\)(?::\s*(.*))?$")
_FORKED = "BaseProcess._bootstrap ("  # where a multiprocessing child's own stack starts
_FRAME = re.compile(r"^(.*?) \(([^()]*?)(?::\d+)?\)$")


class ProfilerMissing(RuntimeError):
    pass


def py_spy() -> str:
    """py-spy's path (on PATH, or beside this Python: pip puts it in the environment's bin,
    which an unactivated environment does not put on PATH), or ProfilerMissing."""
    beside = Path(sys.executable).parent / "py-spy"
    found = shutil.which("py-spy") or (str(beside) if beside.is_file() else None)
    if found is None:
        raise ProfilerMissing("--profile needs py-spy (pip install py-spy)")
    return found


@dataclass
class Recording:
    """py-spy recording one process and its children until stop()."""

    pid: int
    output: Path
    rate: int = RATE
    _proc: subprocess.Popen[bytes] | None = None
    _started: float = 0.0
    seconds: float = 0.0

    def start(self) -> None:
        command = [
            py_spy(), "record", "--pid", str(self.pid), "--subprocesses", "--threads",
            "--rate", str(self.rate), "--format", "raw", "--nonblocking",
            "--output", str(self.output),
        ]  # fmt: skip
        log = self.output.with_suffix(".log").open("wb")
        with log:
            self._proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self._started = time.monotonic()

    def stop(self) -> bool:
        """Stop sampling (py-spy writes its file on SIGINT, as on Ctrl-C); whether it did."""
        if self._proc is None:
            return False
        self.seconds = time.monotonic() - self._started
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None
        return self.output.is_file()


@dataclass
class _Thread:
    process: str
    thread: str
    samples: int = 0
    inclusive: Counter[str] = field(default_factory=Counter)
    own: Counter[str] = field(default_factory=Counter)
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)  # (caller, callee)


def _frame_name(frame: str) -> str:
    """'fn (path/file.py:12)' as 'fn (file.py)': lines of one function counted together."""
    match = _FRAME.match(frame)
    if match is None:
        return frame
    return f"{match.group(1)} ({match.group(2).rsplit('/', 1)[-1]})"


def _process_name(command: str) -> str:
    """A process named by its command line, shortened: vLLM names its engine processes
    (VLLM::EngineCore), tolk and vLLM's server are known by their module."""
    words = command.split()
    for word in words:
        if word.startswith("VLLM::") or word.startswith("tolk"):
            return word
        if "vllm.entrypoints" in word or "api_server" in word:
            return "vllm-api-server"
    return words[0].rsplit("/", 1)[-1] if words else "?"


def parse(lines: Iterable[str]) -> dict[tuple[str, str], _Thread]:
    """py-spy's raw lines by (process, thread name); lines that are not stacks are skipped.
    A thread is known by its id (py-spy names it only once it has read the name, so one
    thread's first samples may carry its id alone)."""
    threads: dict[tuple[str, str], _Thread] = {}  # by (process, thread id)
    for line in lines:
        stack, _, count_text = line.rstrip("\n").rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        process, thread, name = "?", "?", ""
        body: list[str] = []
        while (found := _PROCESS.match(stack)) is not None:  # the last is the sampled one
            process = f"{_process_name(found.group(2))} [{found.group(1)}]"
            stack = stack[found.end() :]
        for frame in stack.split(";"):
            if thread == "?" and (named := _THREAD.match(frame)) is not None:
                thread, name = named.group(1), named.group(2) or ""
            elif frame.startswith(_FORKED):
                # A forked process (vLLM's engine under tolk) keeps its parent's stack at the
                # fork below its own: only what it runs counts.
                body = []
            else:
                body.append(_frame_name(frame))
        entry = threads.setdefault((process, thread), _Thread(process, thread))
        if name:
            entry.thread = name
        entry.samples += count
        for name in set(body):
            entry.inclusive[name] += count
        for call in set(itertools.pairwise(body)):
            entry.calls[call] += count
        if body:
            entry.own[body[-1]] += count
    by_name: dict[tuple[str, str], _Thread] = {}
    for (process, tid), entry in threads.items():
        key = (process, entry.thread)
        if key in by_name:  # two threads of one name: told apart by their ids
            key = (process, f"{entry.thread} ({tid})")
            entry.thread = key[1]
        by_name[key] = entry
    return by_name


def summarize(path: Path, seconds: float, rate: int = RATE) -> dict[str, Any]:
    """Per thread busier than MIN_BUSY: its busy share of one core and its TOP functions by
    inclusive and by own samples (shares of the thread's samples)."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        threads = parse(lines)
    possible = max(seconds * rate, 1.0)
    out = []
    for entry in sorted(threads.values(), key=lambda t: -t.samples):
        busy = entry.samples / possible
        if busy < MIN_BUSY:
            continue

        def top(counter: Counter[str], samples: int = entry.samples) -> list[list[Any]]:
            return [[name, round(n / samples, 4)] for name, n in counter.most_common(TOP)]

        # The trunk (frames in every sample: the thread's bootstrap, an event loop's
        # run_forever) says nothing: inclusive shares start below it.
        branches = Counter({k: n for k, n in entry.inclusive.items() if n < TRUNK * entry.samples})
        out.append(
            {
                "process": entry.process,
                "thread": entry.thread,
                "samples": entry.samples,
                "busy": round(busy, 3),
                "inclusive": top(branches),
                "own": top(entry.own),
            }
        )
    return {"file": path.name, "seconds": round(seconds, 1), "rate": rate, "threads": out}


def markdown(profiles: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The report's profile section: per system, each busy thread and its hottest functions."""
    if not profiles:
        return []
    lines = [
        "",
        "Profile (py-spy on each server started here during its first pass, its engine's "
        "processes included; busy: the share of one core a thread kept, waits not counted; "
        "functions: share of that thread's samples, inclusive (below its stem: the frames in "
        "70% or more), then own):",
    ]
    for system, found in profiles.items():
        lines += ["", f"**{system}** ({found['seconds']} s at {found['rate']} Hz, {found['file']})"]
        for thread in found["threads"]:
            lines.append(
                f"- {thread['process']} / {thread['thread']}: busy {thread['busy']:.2f}; "
                + ", ".join(
                    f"{name} {share:.0%}"
                    for name, share in [i for i in thread["inclusive"] if i[1] < STEM][:8]
                )
                + "; own: "
                + ", ".join(f"{name} {share:.0%}" for name, share in thread["own"][:5])
            )
    return lines
