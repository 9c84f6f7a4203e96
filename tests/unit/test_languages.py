from __future__ import annotations

import pytest

from tolk.languages import (
    InvalidLanguageCode,
    LanguageCoverage,
    lang,
    normalize,
    parse_pair,
    serves,
    warm,
)


@pytest.mark.parametrize(
    ("code", "tag"),
    [
        ("EN", "en"),
        ("en", "en"),
        ("eng", "en"),
        ("en-us", "en-US"),
        ("en_US", "en-US"),
        (" de-DE ", "de-DE"),
        ("ZH-HANS", "zh-Hans"),
        ("zh-tw", "zh-TW"),
        ("cmn", "zh"),
        ("nep", "ne"),
        ("pt-BR", "pt-BR"),
    ],
)
def test_normalize(code: str, tag: str) -> None:
    assert normalize(code) == tag


@pytest.mark.parametrize("code", ["", "  ", "english", "xx-yy-zz1", "qq", "12"])
def test_normalize_rejects(code: str) -> None:
    with pytest.raises(InvalidLanguageCode, match="not a known language code"):
        normalize(code)


def test_lang_names() -> None:
    pt = lang("pt_br")
    assert (pt.tag, pt.code, pt.name, pt.base_name) == (
        "pt-BR",
        "pt",
        "Portuguese (Brazil)",
        "Portuguese",
    )
    assert lang("en").name_in("zh") == "英语"


@pytest.mark.parametrize(
    ("served", "requested", "expected"),
    [
        ("en", "en", True),
        ("en", "en-US", True),
        ("en", "en-GB", True),
        ("en-GB", "en-US", False),
        ("en-GB", "en-GB", True),
        ("zh-Hant", "zh-TW", True),
        ("zh-Hant", "zh", False),
        ("zh", "zh-Hant", True),
        ("de", "en", False),
    ],
)
def test_serves(served: str, requested: str, expected: bool) -> None:
    assert serves(served, requested) is expected


def test_parse_pair() -> None:
    pair = parse_pair("EN>de_DE")
    assert (pair.source, pair.target, str(pair)) == ("en", "de-DE", "en>de-DE")
    with pytest.raises(ValueError, match="source>target"):
        parse_pair("en-de")


def test_coverage() -> None:
    any_pair = LanguageCoverage(languages=("en", "de", "ne"))
    assert any_pair.covers("en-US", "ne")
    assert any_pair.covers("de", "en")
    assert not any_pair.covers("en", "fr")
    explicit = LanguageCoverage(pairs=(parse_pair("en>ne"),))
    assert explicit.covers("en", "ne")
    assert not explicit.covers("ne", "en")
    assert explicit.describe() == {"pairs": ["en>ne"]}


def test_coverage_tags_and_warm() -> None:
    coverage = LanguageCoverage(languages=("en", "ne"), pairs=(parse_pair("en>pt-BR"),))
    assert coverage.tags() == {"en", "ne", "pt-BR"}
    lang.cache_clear()
    warm(coverage.tags())  # what a server does before its first request
    assert lang.cache_info().currsize == 3
    assert lang("pt-BR").name == "Portuguese (Brazil)"
    assert lang.cache_info().hits == 1
