"""The proxy's reading of the language pair from the field names of DeepLX, Immersive
Translate and KISS Translator (tolk.proxy.routing.route_of_fields). The APIs themselves:
tests/edge/test_deeplx_extensions.py."""

from __future__ import annotations

from typing import Any

from tolk.proxy.routing import Route, route_of_fields


def test_route_of_fields_reads_each_apps_names() -> None:
    assert route_of_fields({"text": "x", "source_lang": "auto", "target_lang": "ZH-HANS"}) == (
        Route(None, "zh-Hans", None)
    )
    assert route_of_fields({"texts": ["x"], "from": "en", "to": "zh-CN"}) == Route(
        "en", "zh-CN", None
    )
    assert route_of_fields({"text_list": ["x"], "source_lang": "auto", "target_lang": "de"}) == (
        Route(None, "de", None)
    )
    assert route_of_fields({"text": "x", "from": "auto", "to": "not a language"}) is None
    chat: dict[str, Any] = {"messages": [{"role": "user", "content": "Hello"}]}
    assert route_of_fields({**chat, "model": "tolk-en-de"}) == Route("en", "de", None)
    assert route_of_fields({**chat, "model": "tolk-fr"}) == Route(None, "fr", None)
    assert route_of_fields({**chat, "model": "tolk-x-y-z"}) is None
    options = {"source_lang": "auto", "target_lang": "German", "domains": ""}
    assert route_of_fields({**chat, "model": "tolk", "translation_options": options}) == (
        Route(None, "de", None)
    )
    named = {"source_lang": "English", "target_lang": "Simplified Chinese"}
    assert route_of_fields({**chat, "model": "demo", "translation_options": named}) == (
        Route("en", "zh-Hans", "demo")
    )
    elvish = {"source_lang": "auto", "target_lang": "High Elvish of Valinor"}
    assert route_of_fields({**chat, "model": "tolk", "translation_options": elvish}) is None
    assert route_of_fields({**chat, "model": "tolk"}) is None  # the pair is in the prompt
