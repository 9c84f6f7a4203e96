"""The segment cache's configuration under its name (`segment_cache:`,
TOLK_SEGMENT_CACHE__...) and its old one (`memory:`, TOLK_MEMORY__...: read, with a
deprecation warning; not both); `tolk bench segment-cache` and its old name `bench memory`;
and where `tolk bench quality` finds its sentences (--data, else TOLK_QUALITY_DATA)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tolk.bench import quality_data
from tolk.cli import app
from tolk.config import ConfigError, SegmentCacheSettings, build_config, load_config

MODELS = [{"name": "m", "path": "some/model", "languages": ["en", "de"]}]
CACHE = {"enabled": False, "max_entries": 5, "scope": "shared"}


def _config(**sections: Any) -> dict[str, Any]:
    return {"models": MODELS, **sections}


def _deprecations(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "tolk.config" and r.levelno == logging.WARNING
    ]


@pytest.fixture(autouse=True)
def _capture_config_warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tolk.config")


def test_the_segment_cache_key_loads_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    config = build_config(_config(segment_cache=CACHE), environ={})
    assert config.segment_cache == SegmentCacheSettings(**CACHE)
    assert _deprecations(caplog) == []


def test_the_default_is_an_enabled_cache_per_key() -> None:
    cache = build_config(_config(), environ={}).segment_cache
    assert (cache.enabled, cache.url, cache.scope) == (True, None, "key")


def test_the_old_memory_key_still_loads_with_one_deprecation_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = build_config(_config(memory=CACHE), source="tolk.yaml", environ={})
    assert old == build_config(_config(segment_cache=CACHE), environ={})
    warnings = _deprecations(caplog)
    assert len(warnings) == 1
    assert "tolk.yaml" in warnings[0]
    assert "'memory'" in warnings[0]
    assert "'segment_cache'" in warnings[0]
    assert "deprecated" in warnings[0]


def test_both_keys_are_refused(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigError, match="keep only 'segment_cache'") as raised:
        build_config(_config(memory=CACHE, segment_cache=CACHE), environ={})
    assert "'memory'" in str(raised.value)


def test_an_invalid_old_section_is_reported_under_the_new_name() -> None:
    with pytest.raises(ConfigError, match=r"segment_cache\.max_entries"):
        build_config(_config(memory={"max_entries": 0}), environ={})


@pytest.mark.parametrize("prefix", ["TOLK_SEGMENT_CACHE__", "TOLK_MEMORY__"])
@pytest.mark.parametrize("section", ["segment_cache", "memory", None])
def test_environment_overrides_under_either_prefix(
    prefix: str, section: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """Either prefix overrides the file's section, under either name (or none)."""
    data = _config(**({section: {"max_entries": 5}} if section else {}))
    environ = {f"{prefix}SCOPE": "shared", f"{prefix}URL": "sqlite:////tmp/cache.db"}
    cache = build_config(data, environ=environ).segment_cache
    assert (cache.scope, cache.url) == ("shared", "sqlite:////tmp/cache.db")
    assert cache.max_entries == (5 if section else 1_000_000)
    warnings = _deprecations(caplog)
    # One warning per old name used (the file's, the environment's), whatever the fields.
    assert len(warnings) == (section == "memory") + (prefix == "TOLK_MEMORY__")
    if prefix == "TOLK_MEMORY__":
        assert any("TOLK_SEGMENT_CACHE__" in w for w in warnings)


def test_both_environment_prefixes_are_refused() -> None:
    environ = {"TOLK_MEMORY__SCOPE": "shared", "TOLK_SEGMENT_CACHE__ENABLED": "false"}
    with pytest.raises(ConfigError, match="keep only TOLK_SEGMENT_CACHE__"):
        build_config(_config(), environ=environ)


@pytest.mark.parametrize("key", ["segment_cache", "memory"])
def test_a_relative_sqlite_url_is_relative_to_the_config_file(key: str, tmp_path: Path) -> None:
    folder = tmp_path / "configs"
    folder.mkdir()
    path = folder / "tolk.yaml"
    path.write_text(yaml.safe_dump(_config(**{key: {"url": "sqlite:///../data/cache.db"}})))
    config = load_config(path, environ={})
    assert config.segment_cache.url == f"sqlite:///{(tmp_path / 'data/cache.db').resolve()}"


@pytest.mark.parametrize("key", ["segment_cache", "memory"])
def test_an_absolute_or_other_url_is_kept(key: str, tmp_path: Path) -> None:
    path = tmp_path / "tolk.yaml"
    for url in ("sqlite:////var/lib/tolk/cache.db", "postgresql+psycopg://tolk@db/tolk"):
        path.write_text(yaml.safe_dump(_config(**{key: {"url": url}})))
        assert load_config(path, environ={}).segment_cache.url == url


# -- tolk bench segment-cache, and its old name ------------------------------------------------


def _plain(text: str) -> str:
    """CLI output without rich's boxes and line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def _says(output: str, words: str) -> bool:
    """Whether `output` holds `words`, whitespace aside: on a narrow terminal rich breaks a
    long path inside its error panel."""
    return "".join(words.split()) in "".join(output.split())


@pytest.mark.parametrize("name", ["segment-cache", "memory"])
def test_bench_segment_cache_and_its_old_name_both_run(name: str) -> None:
    result = CliRunner().invoke(app, ["bench", name, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "The segment cache" in _plain(result.output)
    assert "--requests" in result.output


def test_bench_lists_segment_cache_not_its_old_name() -> None:
    result = CliRunner().invoke(app, ["bench", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    commands = re.findall(r"^│ (\S+)", result.output, flags=re.MULTILINE)
    assert "segment-cache" in commands
    assert "memory" not in commands


# -- tolk bench quality's data ------------------------------------------------------------------


def test_quality_data_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(quality_data.DATA_ENV, str(tmp_path))
    assert quality_data.default_data() == tmp_path
    monkeypatch.setenv(quality_data.DATA_ENV, "")
    assert quality_data.default_data() is None
    monkeypatch.delenv(quality_data.DATA_ENV)
    assert quality_data.default_data() is None


def _quality(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app,
        ["bench", "quality", "--url", "http://127.0.0.1:9", "--pairs", "en-de", *args],
        terminal_width=200,
    )
    return result.exit_code, _plain(result.output)


def test_bench_quality_without_data_says_where_it_lives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(quality_data.DATA_ENV, raising=False)
    code, output = _quality()
    assert code == 2
    assert "--data" in output
    assert "TOLK_QUALITY_DATA" in output
    assert "../shared/quality/flores101" in output


def test_bench_quality_reads_the_directory_the_environment_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The directory is used (and found wanting: it has no German), not refused as missing."""
    (tmp_path / "en.txt").write_text("One sentence.\n")
    monkeypatch.setenv(quality_data.DATA_ENV, str(tmp_path))
    code, output = _quality()
    assert code == 2
    assert "TOLK_QUALITY_DATA" not in output
    assert _says(output, f"no file for de in {tmp_path}")


def test_bench_quality_data_option_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(quality_data.DATA_ENV, str(tmp_path / "missing"))
    given = tmp_path / "given"
    given.mkdir()
    code, output = _quality("--data", str(given))
    assert code == 2
    assert _says(output, f"in {given}")
