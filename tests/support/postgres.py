"""A real PostgreSQL on loopback for the tests: Debian's package, initdb into a temporary
directory, started with pg_ctl on a free port and stopped by the fixture (tests/conftest.py's
`postgres_url`). CI installs the package and sets TOLK_REQUIRE_POSTGRES=1 (.ci/run): there
these tests run or fail; elsewhere, without PostgreSQL, they are skipped with how to get it.

PostgreSQL refuses to run as root; as root (CI), its programs run as Debian's `postgres` user
(runuser), in a directory that user owns.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tolk.local.processes import free_port

HOW_TO = (
    "no PostgreSQL here: install Debian's package (apt-get install postgresql, as .ci/run "
    "does) to run the fleet store's tests"
)


def _program(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    # Debian keeps the server's programs out of PATH.
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def require_postgres() -> tuple[str, str]:
    """initdb's and pg_ctl's paths, or a skip (a failure under TOLK_REQUIRE_POSTGRES)."""
    initdb, pg_ctl = _program("initdb"), _program("pg_ctl")
    if initdb is None or pg_ctl is None:
        if os.environ.get("TOLK_REQUIRE_POSTGRES"):
            pytest.fail("TOLK_REQUIRE_POSTGRES is set, but PostgreSQL's initdb is not installed")
        pytest.skip(HOW_TO)
    return initdb, pg_ctl


@contextmanager
def running_postgres() -> Iterator[str]:
    """A fresh PostgreSQL cluster on 127.0.0.1; yields an SQLAlchemy URL of database `tolk`."""
    initdb, pg_ctl = require_postgres()
    as_postgres: list[str] = []
    # In /tmp, not TMPDIR: the `postgres` user must reach it, and its socket's path must stay
    # under the 107 bytes a Unix socket's name may have.
    folder = Path(tempfile.mkdtemp(prefix="tolk-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        as_postgres = ["runuser", "-u", "postgres", "--"]
        shutil.chown(folder, "postgres")
    data = folder / "data"
    port = free_port()

    def run(*command: str) -> None:
        done = subprocess.run(
            [*as_postgres, *command], capture_output=True, text=True, check=False, cwd=folder
        )
        assert done.returncode == 0, done.stdout + done.stderr

    run(initdb, "-D", str(data), "-A", "trust", "-U", "tolk", "--no-sync", "-E", "UTF8")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
    try:
        from sqlalchemy import create_engine, text

        admin = create_engine(
            f"postgresql+psycopg://tolk@127.0.0.1:{port}/postgres", isolation_level="AUTOCOMMIT"
        )
        with admin.connect() as connection:
            connection.execute(text("CREATE DATABASE tolk"))
        admin.dispose()
        yield f"postgresql+psycopg://tolk@127.0.0.1:{port}/tolk"
    finally:
        run(pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def fresh_database(url: str, name: str) -> str:
    """A new, empty database `name` on the server of `url` (dropped first if it exists): a
    test's own store. Returns its URL."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)
