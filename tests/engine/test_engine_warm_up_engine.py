"""The engine's warm-up on the shared real-engine main server: its engine is warmed, with no
failure, before the server says it is ready."""

from __future__ import annotations

from tests.support.servers import ServerProcess


def test_a_real_server_warms_its_engine_before_it_is_ready(main_server: ServerProcess) -> None:
    """The main server (a real engine, the random model, its checks off): warmed before it
    answered /ready."""
    log = main_server.log_path.read_text()
    warmed = log.index("engine for model 'demo' warmed up in")
    assert "(decoding setups: 1)" in log[warmed:].splitlines()[0]
    assert warmed < log.index("tolk ready:")
    assert "warming up the engine" not in log  # no failure
