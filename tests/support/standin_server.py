"""`python tests/support/standin_server.py CONFIG`: `tolk serve` over stand-in engines
(tolk.testing.fake_engine) in a process of its own, on the config's host and port.

For tests that measure the server's event loop from outside (tests/edge/test_loop_bounds_edge.py): a
server on a thread of the test process shares the test's interpreter lock, so a client there
would time the lock, not the server. The engines are stand-ins because what is measured is
tolk's own work per request, not the engine's steps."""

from __future__ import annotations

import sys
from pathlib import Path

from tolk.cli import tolk_server
from tolk.config import load_config
from tolk.testing.fake_engine import FakeEngines


def main() -> None:
    settings = load_config(Path(sys.argv[1]))
    server, _ = tolk_server(settings, FakeEngines())
    server.run()


if __name__ == "__main__":
    main()
