"""The main server's configuration: its languages, limits, glossary and keys. conftest.py's
fixtures start it (`main_server`, real engine; `edge_server`, in-process over stand-ins);
tests that build a server like it use `main_config`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import model_config, server_config
from tolk.local.processes import free_port

# The main server: one model, max_num_seqs 16, up to 24 waiting, small limits to test.
MAIN_LIMITS = {
    # The 100 KB document (test_server_api) takes ~30 s here, more on a machine whose page
    # cache is being reclaimed; the deadline tests set their own, shorter deadlines.
    "request_timeout": 180,
    "max_request_chars": 120_000,
    "max_texts": 64,
    "max_body_bytes": 262_144,
    "shutdown_grace": 5,
}

MAIN_GLOSSARIES = {
    "product": {"source_lang": "en", "target_lang": "de", "entries": {"batch": "Stapel"}}
}


MAIN_LANGUAGES = ["en", "de", "fr", "es", "pt", "zh", "ne"]


@dataclass(frozen=True)
class MainKeys:
    """Keys in the main server's key store, made with `tolk keys add` before it starts."""

    db: Path
    full: str  # no quota, no rate
    tiny: str  # a quota of 20 characters a month
    slow: str  # 2 requests a minute


def main_config(
    test_model: Path, main_keys: MainKeys, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The main server's configuration on a free port, with a copy of its key store."""
    db = tmp_path_factory.mktemp("keys") / "keys.db"
    shutil.copyfile(main_keys.db, db)
    return server_config(
        [model_config("demo", test_model, languages=MAIN_LANGUAGES)],
        free_port(),
        MAIN_GLOSSARIES,
        {"db": str(db)},
        **MAIN_LIMITS,
    )
