"""Language codes: normalising what clients send, names for prompts, and pair matching.

Clients send codes in many spellings (`EN`, `en_US`, `eng`, `ZH-HANS`); langcodes turns them
into canonical BCP-47 tags (`en`, `en-US`, `en`, `zh-Hans`). A model serves a set of tags; a
served tag matches a requested tag when every subtag the served tag names (language, and
script or region if given) agrees with the requested tag's likely full form, so a model that
serves `en` serves `en-US`, and one that serves `zh-Hant` serves `zh-TW` but not `zh`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import langcodes
from langcodes.tag_parser import LanguageTagError


class InvalidLanguageCode(ValueError):
    """A code that is not a known BCP-47 / ISO 639 language."""

    def __init__(self, code: str) -> None:
        super().__init__(
            f"'{code}' is not a known language code; use a BCP-47 or ISO 639 code "
            "such as 'en', 'en-US', 'de', 'zh-Hans' or 'eng'"
        )
        self.code = code


@lru_cache(maxsize=4096)
def normalize(code: str) -> str:
    """The canonical BCP-47 tag for `code`, or InvalidLanguageCode."""
    raw = code.strip().replace("_", "-")
    if not raw:
        raise InvalidLanguageCode(code)
    try:
        tag = langcodes.standardize_tag(raw, macro=True)
    except (LanguageTagError, ValueError) as exc:
        raise InvalidLanguageCode(code) from exc
    if not langcodes.Language.get(tag).is_valid():
        raise InvalidLanguageCode(code)
    return tag


@dataclass(frozen=True)
class Lang:
    """A normalised language tag with the names prompts need."""

    tag: str  # canonical BCP-47, e.g. "pt-BR"
    code: str  # the bare language subtag, e.g. "pt"
    name: str  # English name with script/region, e.g. "Portuguese (Brazil)"
    base_name: str  # English name of the language alone, e.g. "Portuguese"

    def name_in(self, language: str) -> str:
        """This language's name written in another language (e.g. Chinese for Hunyuan-MT)."""
        return _display_name(self.tag, language)


@lru_cache(maxsize=4096)
def _display_name(tag: str, in_language: str) -> str:
    return str(langcodes.Language.get(tag).display_name(in_language))


@lru_cache(maxsize=4096)
def lang(code: str) -> Lang:
    """Normalise `code` and describe it."""
    tag = normalize(code)
    language = langcodes.Language.get(tag)
    base = str(language.language)
    return Lang(
        tag=tag,
        code=base,
        name=_display_name(tag, "en"),
        base_name=_display_name(base, "en"),
    )


def request_lang(code: str, field: str) -> Lang:
    """`lang(code)` for a request's field: an invalid code is the request's error (400)."""
    from tolk.errors import InvalidLanguage

    try:
        return lang(code)
    except InvalidLanguageCode as exc:
        raise InvalidLanguage(str(exc), field=field) from exc


@lru_cache(maxsize=16384)
def serves(served: str, requested: str) -> bool:
    """Whether a model serving tag `served` can take requests for tag `requested`."""
    have = langcodes.Language.get(served)
    want = langcodes.Language.get(requested).maximize()
    if have.language != want.language:
        return False
    if have.script and have.script != want.script:
        return False
    return not (have.territory and have.territory != want.territory)


@dataclass(frozen=True)
class Pair:
    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}>{self.target}"


def parse_pair(text: str) -> Pair:
    """Parse "en>de" into a normalised Pair."""
    parts = text.split(">")
    if len(parts) != 2:
        raise ValueError(f"'{text}' is not a language pair; write it as 'source>target' ('en>de')")
    return Pair(normalize(parts[0]), normalize(parts[1]))


@dataclass(frozen=True)
class LanguageCoverage:
    """What a model serves: explicit pairs, and/or any pair among a set of languages."""

    languages: tuple[str, ...] = ()
    pairs: tuple[Pair, ...] = ()

    def covers(self, source: str, target: str) -> bool:
        if any(serves(p.source, source) and serves(p.target, target) for p in self.pairs):
            return True
        src_ok = any(serves(t, source) for t in self.languages)
        return src_ok and any(serves(t, target) for t in self.languages)

    def tags(self) -> set[str]:
        """Every language tag this coverage names."""
        return {*self.languages, *(t for p in self.pairs for t in (p.source, p.target))}

    def describe(self) -> dict[str, list[str]]:
        """JSON-friendly description, as listed by /languages and in 400 errors."""
        out: dict[str, list[str]] = {}
        if self.languages:
            out["languages"] = list(self.languages)
        if self.pairs:
            out["pairs"] = [str(p) for p in self.pairs]
        return out


def warm(tags: Iterable[str]) -> None:
    """Describe `tags` once, ahead of traffic.

    langcodes loads its tables of language names on first use: about a second that
    py-spy on the H100 found inside the first request of a server (docs/benchmarks.md).
    """
    for tag in tags:
        lang(tag)
