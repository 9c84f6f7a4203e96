"""tolk.wire.chat_prompts: every recorded chat-completions request of a translation app
(tests/data/chat_apps) read back as the texts, languages and shape the app put in, and
answered so that the app's own parser gets the translations back; plain chats left alone;
explicit requests with unknown languages refused; hostile bodies read in bounded time."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.paths import TEST_DATA
from tolk.wire.chat_prompts import (
    MAX_TEXTS,
    WEBLATE_SEPARATOR,
    ChatTranslation,
    ChatTranslationError,
    TooManyTexts,
    UnknownLanguage,
    language_tag,
    recognise,
)

APPS = TEST_DATA / "chat_apps"
RECORDINGS: dict[str, dict[str, Any]] = {
    path.name: json.loads(path.read_text()) for path in sorted(APPS.glob("*.json"))
}
# The chat-completions requests are this module's; DeepLX, Immersive Translate, KISS Custom,
# DeepL's JSON-RPC and Bob 4 (the Responses API) are other APIs.
CHAT = {n: r for n, r in RECORDINGS.items() if r["path"].endswith("/chat/completions")}

WEATHER = "The weather is nice today."
SAVE = "Click Save to continue."
# file: (shape, texts, source tag, target tag)
EXPECTED: dict[str, tuple[str, tuple[str, ...], str | None, str]] = {
    "bob-openai-3.json": ("prompt:bob", (WEATHER,), "en", "de"),
    "easydict.json": ("prompt:easydict", (WEATHER,), "en", "de"),
    "kiss-ai.json": ("prompt:kiss", (WEATHER,), None, "de"),
    "kiss-batch.json": ("kiss-batch", (WEATHER, SAVE), None, "de"),
    "openai-translator.json": ("prompt:openai-translator", (WEATHER,), None, "de"),
    "pot-openai.json": ("prompt:pot", (WEATHER,), None, "de"),
    "qwen-mt.json": ("translation_options", (WEATHER,), "en", "de"),
    "weblate-5.17.json": ("weblate-json", (WEATHER, SAVE), "en", "de"),
    "weblate-5.json": ("weblate-parts", (WEATHER, SAVE), "en", "de"),
    "weblate.json": ("weblate-json", (WEATHER, SAVE), "en", "de"),
    "zotero-openai.json": ("prompt:zotero", (WEATHER,), "en-US", "de-DE"),
    "zotero-qwenmt.json": ("translation_options", (WEATHER,), None, "de"),
}
# Translations that trip careless answers: quotes at both ends (Pot and Bob strip them),
# a line break, non-ASCII.
TRICKY = ['"Das Wetter" ist heute schön.', 'Klicken Sie auf „Speichern",\num fortzufahren."']

WEBLATE_SPLIT = re.compile(r"\n *==WEBLATE_PART== *\n")  # Weblate's SEPARATOR_RE


def parsed_by_app(shape: str, content: str, stream: bool) -> list[str]:
    """What the app's own parser reads out of the assistant content (the recordings'
    `reads`/`reply_format`/notes)."""
    if shape == "weblate-parts":
        return WEBLATE_SPLIT.split(content)
    if shape == "weblate-json":
        items = json.loads(content)
        assert isinstance(items, list)
        return [
            item if isinstance(item, str) else "".join(p["text"] for p in item["parts"])
            for item in items
        ]
    if shape == "kiss-batch":
        translations = json.loads(content)["translations"]
        return [t["text"] for t in sorted(translations, key=lambda t: t["id"])]
    if shape == "prompt:pot" and not stream:  # trim, one '"' off each end, trim
        text = content.strip()
        text = text[1:] if text.startswith('"') else text
        text = text[:-1] if text.endswith('"') else text
        return [text.strip()]
    if shape == "prompt:bob" and not stream:
        text = re.sub(r'^(『|「|"|")|(』|」|"|")$', "", content.strip())
        return [text[:-4] if text.endswith('" =>') else text]
    if shape == "prompt:zotero":
        return [content.removeprefix("\n\n")]
    return [content]


def recognised(name: str, body: dict[str, Any] | None = None) -> ChatTranslation:
    found = recognise(body if body is not None else CHAT[name]["body"])
    assert found is not None, name
    return found


def chat(
    *users: str | list[dict[str, Any]], system: str | None = None, **extra: Any
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    messages += [{"role": "user", "content": u} for u in users]
    return {"model": "tolk", "messages": messages, **extra}


# -- the recordings ---------------------------------------------------------------------------


def test_every_chat_recording_is_expected() -> None:
    assert set(CHAT) == set(EXPECTED)
    others = {n for n in RECORDINGS if n not in CHAT}
    assert "bob-openai.json" in others  # the Responses API
    assert all(
        n.startswith(("deeplx-", "immersive-", "kiss-custom", "deepl-jsonrpc", "bob-"))
        for n in others
    ), others


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recording_is_read_as_the_app_built_it(name: str) -> None:
    shape, texts, source, target = EXPECTED[name]
    found = recognised(name)
    assert (found.shape, found.texts, found.source, found.target) == (
        shape,
        texts,
        source,
        target,
    )
    assert language_tag(found.target) == found.target  # the endpoint may resolve it again


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("stream", [False, True])
def test_answer_is_split_back_by_the_apps_parser(name: str, stream: bool) -> None:
    body = copy.deepcopy(CHAT[name]["body"])
    body["stream"] = stream
    found = recognised(name, body)
    for translations in ([f"<{t}>" for t in found.texts], TRICKY[: len(found.texts)]):
        content = found.answer(translations, ["en"] * len(translations))
        assert parsed_by_app(found.shape, content, stream) == translations, (name, content)


def test_kiss_batch_answer_echoes_ids_and_sources() -> None:
    found = recognised("kiss-batch.json")
    assert found.ids == (0, 1)
    answer = json.loads(found.answer(["Das Wetter.", "Klicken."], ["en", "fr"]))
    assert answer == {
        "translations": [
            {"id": 0, "text": "Das Wetter.", "sourceLanguage": "en"},
            {"id": 1, "text": "Klicken.", "sourceLanguage": "fr"},
        ]
    }
    assert json.loads(found.answer(["a", "b"]))["translations"][0]["sourceLanguage"] == ""


def test_qwen_mt_terms_and_ignored_fields() -> None:
    found = recognised("qwen-mt.json")
    assert found.terms == (("weather", "Wetter"),)


def test_answer_needs_one_translation_per_text() -> None:
    with pytest.raises(ValueError, match="1 translations for 2 texts"):
        recognised("weblate.json").answer(["x"])


# -- not translations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        chat("What is the capital of France?"),
        chat("What is the capital of France?", system="You are a helpful assistant."),
        {"model": "tolk", "messages": [{"role": "system", "content": "Translate into German:"}]},
        {"model": "tolk", "messages": []},
        {"model": "tolk"},
        {"model": "tolk", "messages": "Translate into German: hi"},
        {
            "model": "tolk",
            "messages": [
                {"role": "user", "content": "Translate into German: hi"},
                {"role": "assistant", "content": "Hallo"},
            ],
        },
        chat("Translate into German:"),  # nothing to translate
        chat("Translate into Klingonish:\nHello"),  # no language
        chat("Translate into Java:\nprint(1)"),  # Javanese is "Javanese" or "Jawa"
        chat("Translate into Shakespearean English: hello"),  # no fuzzy names
        chat("Translate into German, formally: hello"),
        chat("translate this into German: hello"),
        chat("Translate into German\nHello: world"),  # the colon must end the first line
        chat("{not json"),
        chat('{"targetLanguage": "de", "segments": [{"id": 0}]}'),  # a segment without text
        chat('{"targetLanguage": "de", "segments": [{"id": true, "text": "x"}]}'),
        chat('{"target_language": "de", "strings": ["x"]}'),
        chat(
            [
                {"type": "text", "text": "Translate into German:"},
                {"type": "image_url", "image_url": {"url": "data:,"}},
            ]
        ),
    ],
)
def test_plain_chat_is_none(body: dict[str, Any]) -> None:
    assert recognise(body) is None


def test_weblate_rephrase_and_plurals_are_chats() -> None:
    body = copy.deepcopy(CHAT["weblate-5.json"]["body"])
    system = body["messages"][0]["content"]
    body["messages"][0]["content"] = system + (
        "\nYou receive an input as the source and existing translation strings separated\nby "
        f"{WEBLATE_SEPARATOR} and you answer three rephrased translation strings separated by\n"
        f"{WEBLATE_SEPARATOR}.\n"
    )
    assert recognise(body) is None
    body["messages"][0]["content"] = system + "\nIMPORTANT PLURAL CONTEXT for cs!\n"
    assert recognise(body) is None


# -- explicit requests ---------------------------------------------------------------------------


def qwen(options: Any, text: str = "Hello") -> dict[str, Any]:
    return {
        "model": "qwen-mt-plus",
        "messages": [{"role": "user", "content": text}],
        "translation_options": options,
    }


@pytest.mark.parametrize(
    ("options", "name", "field"),
    [
        ({"target_lang": "Klingonish"}, "Klingonish", "translation_options.target_lang"),
        (
            {"target_lang": "de", "source_lang": "Elvish"},
            "Elvish",
            "translation_options.source_lang",
        ),
        ({"target_lang": "x" * 1000}, "x" * 1000, "translation_options.target_lang"),
    ],
)
def test_translation_options_unknown_language(options: Any, name: str, field: str) -> None:
    with pytest.raises(UnknownLanguage) as raised:
        recognise(qwen(options))
    assert (raised.value.name, raised.value.field) == (name, field)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    "body",
    [
        qwen("German"),
        qwen({"source_lang": "auto"}),
        qwen({"target_lang": 7}),
        qwen({"target_lang": "de", "source_lang": ["en"]}),
        {
            "model": "m",
            "messages": [{"role": "system", "content": "x"}],
            "translation_options": {"target_lang": "de"},
        },
    ],
)
def test_translation_options_malformed(body: dict[str, Any]) -> None:
    with pytest.raises(ChatTranslationError):
        recognise(body)


def test_translation_options_reads_the_last_user_message() -> None:
    body = qwen(
        {
            "source_lang": "Auto",
            "target_lang": "Simplified Chinese",
            "terms": [{"source": "a", "target": "b"}, {"source": "x"}, "junk"],
            "tm_list": [{"source": "s", "target": "t"}],
            "domains": "IT",
        }
    )
    body["messages"] = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "erste"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
    ]
    found = recognise(body)
    assert found == ChatTranslation(
        "translation_options", ("second",), None, "zh-Hans", (("a", "b"),)
    )
    assert found.answer(["zweite"], ["en"]) == "zweite"


@pytest.mark.parametrize(
    ("model", "source", "target"),
    [
        ("tolk-de", None, "de"),
        ("tolk-en-de", "en", "de"),
        ("tolk-zh-Hans", None, "zh-Hans"),
        ("tolk-en-pt-BR", "en", "pt-BR"),
        ("tolk-en-US-de", "en-US", "de"),
        ("tolk-auto-de", None, "de"),
        ("tolk-English-German", "en", "de"),
        ("tolk-Simplified-Chinese", None, "zh-Hans"),
    ],
)
def test_model_name_carries_the_pair(model: str, source: str | None, target: str) -> None:
    found = recognise(
        {
            "model": model,
            "messages": [
                {"role": "system", "content": "You translate."},
                {"role": "user", "content": "What is the capital of France?"},
            ],
        }
    )
    assert found == ChatTranslation("model", ("What is the capital of France?",), source, target)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("tolk-xx", "xx"),
        ("tolk-en-xx", "xx"),
        ("tolk-xx-de", "xx"),
        ("tolk-", ""),
        ("tolk-en-de-fr", "en-de-fr"),
    ],
)
def test_model_name_unknown_language(model: str, name: str) -> None:
    with pytest.raises(UnknownLanguage) as raised:
        recognise({"model": model, "messages": [{"role": "user", "content": "Hi"}]})
    assert (raised.value.name, raised.value.field) == (name, "model")


def test_app_shape_wins_over_model_name() -> None:
    body = copy.deepcopy(CHAT["pot-openai.json"]["body"])
    body["model"] = "tolk-en-de"
    found = recognised("pot-openai.json", body)  # the source the name gives, the text Pot's
    assert (found.shape, found.texts, found.source, found.target) == (
        "prompt:pot",
        (WEATHER,),
        "en",
        "de",
    )
    body["messages"][1]["content"] = 'Translate into Klingonish:\n"""\nHello\n"""'
    found = recognised("pot-openai.json", body)  # a target only the name resolves
    assert (found.texts, found.source, found.target) == (("Hello",), "en", "de")
    body = copy.deepcopy(CHAT["weblate.json"]["body"])
    body["model"] = "tolk-fr"  # Weblate's own target_language wins
    assert recognised("weblate.json", body).target == "de"


# -- content, shapes in detail ---------------------------------------------------------------------


def test_content_as_a_list_of_parts() -> None:
    body = copy.deepcopy(CHAT["pot-openai.json"]["body"])
    for message in body["messages"]:
        message["content"] = [{"type": "text", "text": message["content"]}]
    assert recognised("pot-openai.json", body) == recognised("pot-openai.json")
    body = chat(
        [{"type": "text", "text": "Translate into German:"}, {"type": "text", "text": "Hello"}]
    )
    assert recognised("", body).texts == ("Hello",)


def test_weblate_5_reads_pictures_as_context() -> None:
    body = copy.deepcopy(CHAT["weblate-5.json"]["body"])
    body["messages"][1]["content"] = [
        {"type": "text", "text": body["messages"][1]["content"]},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    assert recognised("weblate-5.json", body).texts == (WEATHER, SAVE)


def test_weblate_5_single_string_glossary_and_json_list() -> None:
    system = (
        "\nYou are a highly skilled translation assistant, adept at translating text\n"
        "from language 'en'\nto language 'pt_BR'\nwith precision and nuance.\n\n\n"
        "You always reply with translated string only.\nYou do not include transliteration.\n"
        "\n\nYou treat strings like [X0X] or [X123X] as placeables for user input and keep "
        "them intact.\n\n\nUse the following glossary during the translation:\n"
        "Save\tSalvar\nweather\ttempo\n\n"
    )
    single = f"Hello [X0X]{WEBLATE_SEPARATOR}world"  # no separator paragraph: one string
    found = recognise(chat(single, system=system))
    assert found == ChatTranslation(
        "weblate-parts", (single,), "en", "pt-BR", (("Save", "Salvar"), ("weather", "tempo"))
    )
    old = system.replace(
        "\n\nYou treat",
        "You receive an input as JSON list of strings and "
        "reply as JSON list in the same order.\nYou treat",
    )
    found = recognise(chat(json.dumps(["a", "b"]), system=old))
    assert found is not None
    assert (found.shape, found.texts) == ("weblate-json", ("a", "b"))
    assert json.loads(found.answer(["x", "y"])) == ["x", "y"]


def test_weblate_json_parts_glossary_and_codes() -> None:
    body = copy.deepcopy(CHAT["weblate.json"]["body"])
    request = json.loads(body["messages"][-1]["content"])
    request["target_language"] = "zh_Hans"
    request["glossary"] = [{"source": "Save", "target": "保存", "flags": ["terminology"]}, {}]
    request["strings"] = [
        {
            "parts": [
                {"type": "text", "text": "Hello, "},
                {
                    "type": "placeholder",
                    "id": "@@PH1@@",
                    "kind": "syntax",
                    "text": "",
                    "translatable": False,
                },
                {"type": "text", "text": "!"},
            ]
        },
        {"source": "@@PH1@@ failed", "translation": "@@PH1@@ fehlgeschlagen"},
    ]
    body["messages"][-1]["content"] = json.dumps(request)
    found = recognised("weblate.json", body)
    assert found.texts == ("Hello, @@PH1@@!", "@@PH1@@ failed")
    assert (found.target, found.terms) == ("zh-Hans", (("Save", "保存"),))
    body = copy.deepcopy(CHAT["weblate-5.17.json"]["body"])
    request = json.loads(body["messages"][-1]["content"])
    request["glossary"] = {"Save": "Speichern", "": "x", "n": 1}
    body["messages"][-1]["content"] = json.dumps(request)
    assert recognised("weblate-5.17.json", body).terms == (("Save", "Speichern"),)


def test_kiss_glossaries() -> None:
    body = copy.deepcopy(CHAT["kiss-batch.json"]["body"])
    request = json.loads(body["messages"][-1]["content"])
    request["glossary"] = {"component": "Komponente", "React": ""}
    request["segments"] = [{"id": "a", "text": "A React component."}]
    request["targetLanguage"] = "zh-CN"
    body["messages"][-1]["content"] = json.dumps(request)
    found = recognised("kiss-batch.json", body)
    assert (found.ids, found.target) == (("a",), "zh-CN")
    assert found.terms == (("component", "Komponente"), ("React", "React"))
    body = copy.deepcopy(CHAT["kiss-ai.json"]["body"])
    body["messages"][-1]["content"] = (
        body["messages"][-1]["content"]
        .replace("# Glossary:\n\n", "# Glossary:\n- React: React\n- component: Komponente\n")
        .replace("to German.", "to Simplified Chinese.")
    )
    found = recognised("kiss-ai.json", body)
    assert found.terms == (("React", "React"), ("component", "Komponente"))
    assert (found.texts, found.target) == ((WEATHER,), "zh-Hans")


def test_zotero_paper_context() -> None:
    body = copy.deepcopy(CHAT["zotero-openai.json"]["body"])
    text = (
        "Context from the academic paper:\nPaper Title: On Weather\n\nPaper Abstract: "
        "We study weather.\n\nText to translate: " + WEATHER
    )
    body["messages"][0]["content"] = body["messages"][0]["content"].replace(WEATHER, text)
    assert recognised("zotero-openai.json", body).texts == (WEATHER,)


def test_quotes_are_guarded_only_where_the_app_strips_them() -> None:
    body = copy.deepcopy(CHAT["pot-openai.json"]["body"])
    pot = recognised("pot-openai.json", body)
    assert pot.answer(['"Hallo"']) == '""Hallo""'
    body["stream"] = True  # Pot's stream reader strips nothing
    assert recognised("pot-openai.json", body).answer(['"Hallo"']) == '"Hallo"'
    assert recognised("easydict.json").answer(['"Hallo"']) == '"Hallo"'


@pytest.mark.parametrize(
    ("prompt", "shape", "text", "source", "target"),
    [
        ("Translate into German: Hello there", "prompt", "Hello there", None, "de"),
        ("translate to german:\nHello there", "prompt", "Hello there", None, "de"),
        ('Translate into German:\n"""\nHello\n"""', "prompt:pot", "Hello", None, "de"),
        ("Please translate to Deutsch:\n\nHello", "prompt", "Hello", None, "de"),
        ('Translate the following text into German: "Hello"', "prompt", "Hello", None, "de"),
        (
            "Translate the following English text into German:\n```text\nHello\n```",
            "prompt",
            "Hello",
            "en",
            "de",
        ),
        (
            'Translate the following Japanese text into Simplified-Chinese text: """ちっちいな~"""',
            "prompt:easydict",
            "ちっちいな~",
            "ja",
            "zh-Hans",
        ),
        (
            "Translate from English to Brazilian Portuguese:\n\nHello",
            "prompt",
            "Hello",
            "en",
            "pt-BR",
        ),
        ("Translate from auto to German: Hello", "prompt", "Hello", None, "de"),
        ("Translate from Elvish into German: Hello", "prompt", "Hello", None, "de"),
        ("翻译成简体白话文:\n\nHello", "prompt", "Hello", None, "zh-Hans"),
        (
            "You are a professional translator.\n\nOnly reply the result and nothing else. "
            "Please translate to 日本語:\n\n  Hello",
            "prompt:openai-translator",
            "  Hello",
            None,
            "ja",
        ),
    ],
)
def test_generic_and_app_prompts(
    prompt: str, shape: str, text: str, source: str | None, target: str
) -> None:
    found = recognise(chat(prompt))
    assert found is not None
    assert (found.shape, found.texts, found.source, found.target) == (
        shape,
        (text,),
        source,
        target,
    )


def test_resolver_is_the_callers() -> None:
    served: Callable[[str], str | None] = lambda name: "de" if name == "German" else None  # noqa: E731
    assert recognise(chat("Translate into German: hi"), served) is not None
    assert recognise(chat("Translate into French: hi"), served) is None
    with pytest.raises(UnknownLanguage):
        recognise(qwen({"target_lang": "French"}), served)


# -- bounds ----------------------------------------------------------------------------------------

WEBLATE5 = CHAT["weblate-5.json"]["body"]["messages"][0]["content"]
MB = 1_000_000


@pytest.mark.parametrize(
    "content",
    [
        "Translate into " + "a" * MB,
        "Translate the following" + " text" * (MB // 5),
        "Translate from " + " to" * (MB // 3) + ":",
        "Translate the following" + " " * MB + "text into German: x",
        "Translate into German: " + '"' * MB,
        "Translate into German:\n" + "```" * (MB // 3),
        '"""' * (MB // 3),
        "a:" * (MB // 2),
        "{" * MB,
        "[" * MB + "]" * MB,
        '{"a":' * (MB // 5) + "1" + "}" * (MB // 5),
        "Only reply the result and nothing else. " * (MB // 40),
        "# Task\nTranslate the Source Text below to " * (MB // 40),
        "As an academic expert with specialized knowledge in various fields, "
        "please provide a proficient and precise translation from " + "x to " * (MB // 5),
        "\n\nTranslated Text:" * (MB // 17),
        "x" * MB,
    ],
)
@pytest.mark.parametrize("system", [None, WEBLATE5])
def test_a_megabyte_message_returns(content: str, system: str | None) -> None:
    found = recognise(chat(content, system=system))  # no timing assert: it must return
    assert found is None or len(found.texts) <= MAX_TEXTS


def test_too_many_texts() -> None:
    kiss = json.dumps(
        {"targetLanguage": "de", "segments": [{"id": i, "text": "x"} for i in range(MAX_TEXTS + 1)]}
    )
    with pytest.raises(TooManyTexts):
        recognise(chat(kiss))
    strings = json.dumps({"target_language": "de", "strings": [{"source": "x"}] * (MAX_TEXTS + 1)})
    with pytest.raises(TooManyTexts):
        recognise(chat(strings))
    with pytest.raises(TooManyTexts) as raised:
        recognise(chat(WEBLATE_SEPARATOR.join(["x"] * (MAX_TEXTS * 3)), system=WEBLATE5))
    assert raised.value.count == MAX_TEXTS * 3
    limit = WEBLATE_SEPARATOR.join(["x"] * MAX_TEXTS)
    assert len(recognised("", chat(limit, system=WEBLATE5)).texts) == MAX_TEXTS


# -- languages -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tag"),
    [
        # codes, in the spellings the apps send
        ("de", "de"),
        ("DE", "de"),
        ("de-DE", "de-DE"),
        ("de_DE", "de-DE"),
        ("pt_BR", "pt-BR"),
        ("PT-BR", "pt-BR"),
        ("zh-Hans", "zh-Hans"),
        ("ZH-HANS", "zh-Hans"),
        ("zh_Hans", "zh-Hans"),
        ("zh-CN", "zh-CN"),
        ("en-US", "en-US"),
        ("es-419", "es-419"),
        ("deu", "de"),
        ("eng", "en"),
        ("iw", "he"),
        ("sr@latin", "sr-Latn"),
        ("ca@valencia", "ca"),
        # English names (Pot, KISS, Qwen-MT, Easydict)
        ("German", "de"),
        ("german", "de"),
        ("GERMAN", "de"),
        ("Simplified Chinese", "zh-Hans"),
        ("Simplified-Chinese", "zh-Hans"),
        ("Traditional Chinese", "zh-Hant"),
        ("Chinese (Simplified)", "zh-Hans"),
        ("Brazilian Portuguese", "pt-BR"),
        ("Brazilian-Portuguese", "pt-BR"),
        ("Portuguese (Brazil)", "pt-BR"),
        ("Mongolian(Cyrillic)", "mn-Cyrl"),
        ("Norwegian Bokmål", "nb"),
        ("Cantonese", "yue"),
        ("Filipino", "fil"),
        ("Tagalog", "fil"),
        ("Burmese", "my"),
        ("Farsi", "fa"),
        ("Bengali", "bn"),
        ("Classical-Chinese", "lzh"),
        ("Tamil (India)", "ta"),
        ("Spanish (Latin America)", "es-419"),
        # native names (OpenAI Translator, KISS, Easydict, Bob)
        ("Deutsch", "de"),
        ("Français", "fr"),
        ("Español", "es"),
        ("Português", "pt"),
        ("中文", "zh"),
        ("简体中文", "zh-Hans"),
        ("繁體中文", "zh-Hant"),
        ("日本語", "ja"),
        ("한국어", "ko"),
        ("नेपाली", "ne"),
        ("Русский", "ru"),
        ("Tiếng Việt", "vi"),
        ("Indonesia", "id"),
        ("Melayu", "ms"),
        ("简体中文白话文", "zh-Hans"),
        ("繁体中文白话文", "zh-Hant"),
        ("简体白话文", "zh-Hans"),
        ("粤语", "yue"),
        ("古文", "lzh"),
        # not languages, or "detect it"
        ("auto", None),
        ("Auto", None),
        ("AutoDetect", None),
        ("und", None),
        ("", None),
        ("Java", None),
        ("pirate", None),
        ("Python", None),
        ("Klingonish", None),
        ("xx", None),
        ("x" * 100, None),
    ],
)
def test_language_tag(name: str, tag: str | None) -> None:
    assert language_tag(name) == tag
    if tag is not None:
        assert language_tag(tag) == tag  # a tag resolves to itself
