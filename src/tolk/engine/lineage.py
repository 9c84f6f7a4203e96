"""An engine's processes end with the server that started them, however the server ends.

vLLM runs each engine in child processes: an EngineCore, which starts the Worker(s). vLLM
ties the Workers to the EngineCore (a "death pipe": a Worker exits when its EngineCore's end
of the pipe closes), but nothing ties the EngineCore to the process that started it. A
server killed with SIGKILL (the OOM killer, `kill -9`, a crash) therefore left its
EngineCore running, and with it the Worker: ~2 GB and a busy core, for good.

Linux has the mechanism: a process can ask for a signal when its parent dies
(`prctl(PR_SET_PDEATHSIG)`), and the request survives `exec`. It must be made in the child,
and vLLM starts its children itself, by one of Python's multiprocessing start methods:
- `spawn` (always on CPU; on GPUs once CUDA is initialised): the child is a new interpreter
  started from `multiprocessing`'s executable. tolk points that at a two-line launcher that
  makes the request and then `exec`s the real interpreter with the same arguments.
- `fork` (vLLM's default elsewhere): an `os.register_at_fork` hook makes the request in the
  child.
The EngineCore then gets SIGKILL the moment the server dies, and vLLM's death pipe takes the
Workers with it. No library does this for another library's children, hence this module.

The parent-death signal fires when the *thread* that started the child ends, so engines
must be started on a thread that lives as long as they do: the server's main thread, or the
supervisor's starter thread (tolk.engine.supervisor.Starter).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import multiprocessing
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

log = logging.getLogger("tolk.engine")

PR_SET_PDEATHSIG = 1

# Run by /bin/sh in place of the interpreter: `$PPID` is the process that started it. The
# request is made, the parent checked (it may have died before the request was in place),
# and the real interpreter takes over the process with the original arguments.
_LAUNCHER = """#!/bin/sh
exec {python} -I -c 'import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl({option}, {signal})
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])' "$PPID" "$@"
"""

_installed = False


def signal_on_parent_death(signum: int = signal.SIGKILL) -> None:
    """In a child (after fork, before or after exec): `signum` when the thread that started
    it ends. tolk.local.processes asks for SIGTERM, so what it starts can drain."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signum) != 0:
        os.write(2, b"tolk: prctl(PR_SET_PDEATHSIG) failed\n")


def _write_launcher() -> Path | None:
    """The launcher, in the first directory where it can be written and run (a temporary
    directory may be mounted noexec, a container's root read-only)."""
    text = _LAUNCHER.format(
        python=shlex.quote(sys.executable), option=PR_SET_PDEATHSIG, signal=int(signal.SIGKILL)
    )
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tolk"
    for directory in (Path(tempfile.gettempdir()), cache):
        launcher = directory / f"tolk-engine-python-{digest}"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if not launcher.exists() or launcher.read_text() != text:
                partial = launcher.with_suffix(f".{os.getpid()}")
                partial.write_text(text)
                partial.chmod(0o755)
                partial.replace(launcher)
            ran = subprocess.run(
                [str(launcher), "-c", "pass"], capture_output=True, timeout=30, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.debug("no engine launcher in %s: %s", directory, exc)
            continue
        if ran.returncode == 0:
            return launcher
        log.debug("the engine launcher in %s does not run: %r", directory, ran.stderr[-300:])
    return None


def bind_engines_to_this_process() -> bool:
    """From now on, every process multiprocessing starts from this one (vLLM's EngineCores)
    gets SIGKILL when the thread that started it ends. Linux only; idempotent. Returns
    whether it is in place."""
    global _installed
    if _installed:
        return True
    if not sys.platform.startswith("linux"):
        log.warning("engine processes are not bound to the server's life outside Linux")
        return False
    launcher = _write_launcher()
    if launcher is None:
        log.warning(
            "could not write a runnable engine launcher (temporary directory and ~/.cache "
            "not writable or mounted noexec): engines started with 'spawn' would outlive a "
            "server killed with SIGKILL"
        )
    else:
        multiprocessing.set_executable(str(launcher))
    os.register_at_fork(after_in_child=signal_on_parent_death)
    _installed = True
    return launcher is not None
