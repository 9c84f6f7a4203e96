"""Language codes as DeepL's and LibreTranslate's clients write them, and what is served.

DeepL: upper-case base codes for sources (`EN`, `ZH`), target variants (`EN-GB`, `PT-BR`,
`ZH-HANS`, `ES-419`), matched case-insensitively (clients send `ZH-HANS`, `zh-HANS`, `de`).
LibreTranslate 1.9: lower-case ISO 639-1 except `zh-Hans`, `zh-Hant`, `pt-BR`, with the
aliases `zh`, `zt`, `pb` and, for older clients (Discourse), `iw` and `no`.
"""

from __future__ import annotations

from tolk.languages import Lang, lang, request_lang

# Target variants DeepL offers for a base language a model serves as a whole.
DEEPL_VARIANTS = {
    "en": ("EN-GB", "EN-US"),
    "pt": ("PT-BR", "PT-PT"),
    "zh": ("ZH", "ZH-HANS", "ZH-HANT"),
    "es": ("ES", "ES-419"),
}
LIBRETRANSLATE_ALIASES = {"zh": "zh-Hans", "zt": "zh-Hant", "pb": "pt-BR", "iw": "he", "no": "nb"}
# LibreTranslate's own spelling of the codes it lists with a script or region.
LIBRETRANSLATE_VARIANTS = {"zh": ("zh-Hans", "zh-Hant", "zh"), "pt": ("pt", "pt-BR")}
_LT_CASED = {"zh-hans": "zh-Hans", "zh-hant": "zh-Hant", "pt-br": "pt-BR"}


# -- DeepL -------------------------------------------------------------------------------------


def deepl_source(tag: str) -> str:
    """`EN` for en-US: DeepL names sources by their base language."""
    return lang(tag).code.upper()


def deepl_targets(tag: str) -> tuple[str, ...]:
    """The DeepL target codes a served tag stands for (`en` -> EN-GB, EN-US)."""
    if "-" in tag:
        return (tag.upper(),)
    return DEEPL_VARIANTS.get(tag, (tag.upper(),))


# -- LibreTranslate ----------------------------------------------------------------------------


def from_libretranslate(code: str, field: str) -> Lang:
    raw = code.strip()
    return request_lang(LIBRETRANSLATE_ALIASES.get(raw.lower(), raw), field)


def libretranslate_code(tag: str) -> str:
    """LibreTranslate's spelling of a tag: `zh-Hans`, `pt-BR`, else the base code."""
    parsed = lang(tag)
    if parsed.code == "zh":
        return "zh-Hant" if "Hant" in tag or tag.endswith(("-TW", "-HK", "-MO")) else "zh-Hans"
    return _LT_CASED.get(tag.lower(), parsed.code)


def libretranslate_codes(tag: str) -> tuple[str, ...]:
    """The codes LibreTranslate clients may look for when `tag` is served."""
    if "-" in tag:
        return (libretranslate_code(tag),)
    return LIBRETRANSLATE_VARIANTS.get(tag, (tag,))
