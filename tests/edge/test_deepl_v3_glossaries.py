"""DeepL's v3 glossaries through the official client (deepl 1.32: `*_multilingual_glossary*`),
on the in-process server over stand-in engines: what is asserted is shapes, statuses and
stored state, as deepl-python's own tests do against a real server, not the model's words."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deepl
import httpx
import pytest
from deepl.api_data import MultilingualGlossaryDictionaryEntries as Dictionary
from deepl.api_data import MultilingualGlossaryInfo, WriteResult
from transformers import AutoTokenizer

from tests.support.main_server import MainKeys
from tests.support.servers import InProcessServer
from tolk.local.processes import start_proxy

NONEXISTENT = "96ab91fd-e715-41a1-adeb-5d701f84a483"  # deepl-python's NONEXISTENT_GLOSSARY_ID


@pytest.fixture
def deepl_client(edge_server: InProcessServer, main_keys: MainKeys) -> Iterator[deepl.DeepLClient]:
    deepl.http_client.max_network_retries = 0
    made = deepl.DeepLClient(main_keys.full, server_url=edge_server.url)
    yield made
    # As the client's own test harness cleans up: listed and deleted through v3.
    for glossary in made.list_multilingual_glossaries():
        made.delete_multilingual_glossary(glossary)


def pairs(glossary: MultilingualGlossaryInfo) -> list[tuple[str, str, int]]:
    return [(d.source_lang, d.target_lang, d.entry_count) for d in glossary.dictionaries]


def tsv(entries: Dictionary) -> str:
    """A dictionary's entries as the client hands them back: the server's TSV, unparsed
    (its type hints say a dict)."""
    value: object = entries.entries
    assert isinstance(value, str)
    return value


def test_create_get_list_and_the_same_creation_time(deepl_client: deepl.DeepLClient) -> None:
    made = deepl_client.create_multilingual_glossary(
        "both ways",
        [Dictionary("EN", "DE", {"Hello": "Hallo"}), Dictionary("DE", "EN", {"Hallo": "Hello"})],
    )
    assert made.name == "both ways"
    got = deepl_client.get_multilingual_glossary(made.glossary_id)
    assert (got.name, got.creation_time) == (made.name, made.creation_time)
    assert pairs(got) == pairs(made) == [("EN", "DE", 1), ("DE", "EN", 1)]
    assert made.glossary_id in {g.glossary_id for g in deepl_client.list_multilingual_glossaries()}


def test_merge_rename_replace_and_entries(deepl_client: deepl.DeepLClient) -> None:
    made = deepl_client.create_multilingual_glossary(
        "terms",
        [Dictionary("DE", "EN", {"Hallo": "Hello"}), Dictionary("EN", "DE", {"Hello": "Hallo"})],
    )
    merged = deepl_client.update_multilingual_glossary_dictionary(
        made, Dictionary("EN", "DE", {"Hello": "Guten Tag", "Apple": "Apfel"})
    )
    counts = {(d.source_lang, d.target_lang): d.entry_count for d in merged.dictionaries}
    assert counts == {("DE", "EN"): 1, ("EN", "DE"): 2}
    renamed = deepl_client.update_multilingual_glossary_name(made, "New Glossary Name")
    assert deepl_client.get_multilingual_glossary(made.glossary_id).name == renamed.name
    replaced = deepl_client.replace_multilingual_glossary_dictionary(
        made, Dictionary("EN", "DE", {"Apple": "Apfel"})
    )
    assert (replaced.source_lang, replaced.target_lang, replaced.entry_count) == ("EN", "DE", 1)
    (entries,) = deepl_client.get_multilingual_glossary_entries(made, "EN", "DE").dictionaries
    assert tsv(entries) == "Apple\tApfel"
    deepl_client.delete_multilingual_glossary_dictionary(made, source_lang="EN", target_lang="DE")
    left = deepl_client.get_multilingual_glossary(made.glossary_id).dictionaries
    assert [(d.source_lang, d.target_lang) for d in left] == [("DE", "EN")]


def test_entries_round_trip_exactly_even_ten_thousand(deepl_client: deepl.DeepLClient) -> None:
    odd = {"Apple": "Apfel", "A%=&": "B&=%", "Δぁ": "深", "🪨": "🪵"}
    made = deepl_client.create_multilingual_glossary("odd", [Dictionary("EN", "DE", odd)])
    (got,) = deepl_client.get_multilingual_glossary_entries(
        made.glossary_id, "EN", "DE"
    ).dictionaries
    assert tsv(got) == "\n".join(f"{s}\t{t}" for s, t in odd.items())
    # About 290 KB of JSON: past the 128 KiB body limit of texts, within a glossary's.
    large = {f"Source-{i}": f"Target-{i}" for i in range(10_000)}
    big = deepl_client.create_multilingual_glossary("large", [Dictionary("EN", "DE", large)])
    assert big.dictionaries[0].entry_count == 10_000
    (back,) = deepl_client.get_multilingual_glossary_entries(big, "EN", "DE").dictionaries
    assert dict(line.split("\t") for line in tsv(back).split("\n")) == large


def test_missing_invalid_and_unsupported(deepl_client: deepl.DeepLClient) -> None:
    with pytest.raises(deepl.GlossaryNotFoundException):
        deepl_client.get_multilingual_glossary(NONEXISTENT)
    with pytest.raises(deepl.GlossaryNotFoundException):
        deepl_client.delete_multilingual_glossary(NONEXISTENT)
    with pytest.raises(deepl.DeepLException, match="glossary_id"):
        deepl_client.get_multilingual_glossary("invalid_glossary_id")
    with pytest.raises(deepl.DeepLException, match=r"target_lang.*not supported"):
        deepl_client.create_multilingual_glossary("bad", [Dictionary("EN", "XX", {"a": "b"})])
    made = deepl_client.create_multilingual_glossary("gone", [Dictionary("EN", "DE", {"a": "b"})])
    deepl_client.delete_multilingual_glossary(made)
    with pytest.raises(deepl.GlossaryNotFoundException):
        deepl_client.get_multilingual_glossary(made.glossary_id)
    with pytest.raises(deepl.DeepLException, match=r"target_lang.*not supported"):
        deepl_client.translate_text("Hello", target_lang="XX")


def test_v2_and_v3_see_the_same_glossaries_and_translate_uses_the_pairs_dictionary(
    deepl_client: deepl.DeepLClient, edge_server: InProcessServer, main_keys: MainKeys
) -> None:
    v2 = deepl_client.create_glossary("v2 made", "EN", "DE", {"batch": "Stapel"})
    seen = {g.glossary_id: g for g in deepl_client.list_multilingual_glossaries()}
    assert [(d.source_lang, d.target_lang) for d in seen[v2.glossary_id].dictionaries] == [
        ("EN", "DE")
    ]
    both = deepl_client.create_multilingual_glossary(
        "both",
        [Dictionary("EN", "DE", {"Apple": "Apfel"}), Dictionary("DE", "EN", {"Apfel": "Apple"})],
    )
    # v2 shows glossaries of one pair only.
    assert both.glossary_id not in {g.glossary_id for g in deepl_client.list_glossaries()}
    for source, target in (("DE", "EN-US"), ("EN", "DE")):
        result = deepl_client.translate_text(
            "Apfel", source_lang=source, target_lang=target, glossary=both
        )
        assert isinstance(result, deepl.TextResult)
    # An id for a pair the glossary has no dictionary for: DeepL's 400, saying which it has.
    answer = httpx.post(
        f"{edge_server.url}/v2/translate",
        json={
            "text": ["x"],
            "source_lang": "EN",
            "target_lang": "FR",
            "glossary_id": both.glossary_id,
        },
        headers={"Authorization": f"DeepL-Auth-Key {main_keys.full}"},
        timeout=30,
    )
    assert answer.status_code == 400, answer.text
    assert "no dictionary for en>fr" in answer.json()["message"]


def test_every_call_goes_through_the_proxy(
    edge_server: InProcessServer, main_keys: MainKeys, tmp_path: Path
) -> None:
    """PUT and PATCH too, and a glossary body past the proxy's 128 KiB limit of texts."""
    proxy = start_proxy(tmp_path, "proxy", [edge_server.url])
    try:
        deepl.http_client.max_network_retries = 0
        client = deepl.DeepLClient(main_keys.full, server_url=proxy.url)
        large = {f"Source-{i}": f"Target-{i}" for i in range(6_000)}
        made = client.create_multilingual_glossary("via proxy", [Dictionary("EN", "DE", large)])
        client.update_multilingual_glossary_name(made, "renamed")
        client.replace_multilingual_glossary_dictionary(made, Dictionary("EN", "DE", {"a": "b"}))
        got = client.get_multilingual_glossary(made.glossary_id)
        assert (got.name, pairs(got)) == ("renamed", [("EN", "DE", 1)])
        client.delete_multilingual_glossary(made)
        with pytest.raises(deepl.GlossaryNotFoundException):
            client.get_multilingual_glossary(made.glossary_id)
    finally:
        proxy.stop()


def test_rephrase_through_the_client(
    deepl_client: deepl.DeepLClient, edge_server: InProcessServer
) -> None:
    """DeepL Write: one text in its own language (detected), a list rewritten into another
    in a style; style and tone together are refused as DeepL refuses them."""
    requests = edge_server.engines.started["demo"].requests
    one = deepl_client.rephrase_text(
        "The museum opens at nine in the morning.", target_lang="en-GB"
    )
    assert isinstance(one, WriteResult)
    assert (one.detected_source_language, one.target_language) == ("en", "en-GB")
    assert one.text
    listed = deepl_client.rephrase_text(
        ["Guten Morgen zusammen, wie geht es euch heute?", "The museum opens at nine."],
        target_lang="DE",
        style="business",
    )
    assert isinstance(listed, list)
    assert [r.detected_source_language for r in listed] == ["de", "en"]
    assert {r.target_language for r in listed} == {"de"}
    assert edge_server.engines.started["demo"].requests > requests  # the engine was asked
    with pytest.raises(deepl.DeepLException, match="Both writing_style and tone"):
        deepl_client.rephrase_text("Hello there, friends.", style="business", tone="friendly")
    with pytest.raises(deepl.DeepLException, match="writing_style"):
        deepl_client.rephrase_text("Hello there, friends.", style="poetic")
    corrected = deepl_client.correct_text(["Teh museum open at nine.", "Guten Morgn zusammen!"])
    assert isinstance(corrected, list)
    assert [r.detected_source_language for r in corrected] == ["en", "de"]


def test_style_rules_through_the_client(
    deepl_client: deepl.DeepLClient, edge_server: InProcessServer, main_keys: MainKeys
) -> None:
    """deepl-python's test_style_rule_crud flow, then a translation naming the rule: its
    rules and instructions reach the model's prompt."""
    rule = deepl_client.create_style_rule("Test Style Rule", "en")
    assert (rule.name, rule.language, rule.version) == ("Test Style Rule", "en", 1)
    got = deepl_client.get_style_rule(rule.style_id)
    assert (got.style_id, got.name, got.creation_time) == (
        rule.style_id,
        rule.name,
        rule.creation_time,
    )
    renamed = deepl_client.update_style_rule_name(rule, "Updated Name")
    assert (renamed.name, renamed.version) == ("Updated Name", 2)
    configured = deepl_client.update_style_rule_configured_rules(
        rule.style_id, {"dates_and_times": {"calendar_era": "use_bc_and_ad"}}
    )
    assert configured.style_id == rule.style_id
    made = deepl_client.create_style_rule_custom_instruction(
        rule, "Test Instruction", "Always use formal language"
    )
    assert (made.label, made.prompt) == ("Test Instruction", "Always use formal language")
    assert made.id
    assert deepl_client.get_style_rule_custom_instruction(rule, made.id).label == "Test Instruction"
    updated = deepl_client.update_style_rule_custom_instruction(
        rule, made.id, "Updated Instruction", "Always use formal language"
    )
    assert updated.label == "Updated Instruction"
    listed = deepl_client.get_all_style_rules(detailed=True)
    (mine,) = [r for r in listed if r.style_id == rule.style_id]
    assert [c.label for c in mine.custom_instructions] == ["Updated Instruction"]
    # Used: the translation's prompt carries the rule (the stand-in engine keeps no prompts,
    # so the request is checked by its answer; a rule for another language is refused).
    assert isinstance(
        deepl_client.translate_text("Hallo", target_lang="EN-US", style_rule=rule), deepl.TextResult
    )
    wrong = httpx.post(
        f"{edge_server.url}/v2/translate",
        json={"text": ["Hello"], "target_lang": "DE", "style_id": rule.style_id},
        headers={"Authorization": f"DeepL-Auth-Key {main_keys.full}"},
        timeout=30,
    )
    assert wrong.status_code == 400
    assert "does not match" in wrong.json()["message"]
    deepl_client.delete_style_rule_custom_instruction(rule, made.id)
    assert deepl_client.get_style_rule(rule).custom_instructions == []
    deepl_client.delete_style_rule(rule)
    with pytest.raises(deepl.DeepLException, match="Not found"):
        deepl_client.get_style_rule(rule.style_id)


def test_a_document_already_in_the_target_language_ends_in_error(
    deepl_client: deepl.DeepLClient, tmp_path: Path
) -> None:
    """deepl-python's test_document_failure_during_translation: German to German."""
    source = tmp_path / "de.txt"
    source.write_text("Das ist ein Beispieltext auf Deutsch, über das Wetter und die Arbeit.")
    with pytest.raises(deepl.DocumentTranslationException) as raised:
        deepl_client.translate_document_from_filepath(
            source, tmp_path / "out.txt", target_lang="DE"
        )
    message = str(raised.value)
    assert "Source and target language" in message
    assert raised.value.document_handle is not None
    assert re.search("ID: [0-9A-F]{32}, key: [0-9A-F]{64}", message), message


def test_a_documents_glossary_formality_and_style_rule_reach_the_prompt(
    deepl_client: deepl.DeepLClient, edge_server: InProcessServer, test_model: Path, tmp_path: Path
) -> None:
    """As on /v2/translate: what the upload names is in every segment's prompt (read from
    the stand-in engine, which keeps the latest prompts)."""
    llm = edge_server.engines.started["demo"]
    tokenizer = AutoTokenizer.from_pretrained(str(test_model))
    glossary = deepl_client.create_glossary("doc terms", "EN", "DE", {"batch": "Stapel"})
    rule = deepl_client.create_style_rule("doc rule", "de")
    deepl_client.create_style_rule_custom_instruction(rule, "units", "Write units in full words")
    source = tmp_path / "en.txt"
    source.write_text("Every batch is checked twice.\n\nThe second batch waits.\n")
    llm.prompts.clear()
    deepl_client.translate_document_from_filepath(
        source,
        tmp_path / "out.txt",
        source_lang="EN",
        target_lang="DE",
        formality="more",
        glossary=glossary,
        extra_body_parameters={"style_id": rule.style_id},
    )
    prompts = [tokenizer.decode(p) for p in llm.prompts]
    assert len(prompts) == 2
    for prompt in prompts:
        assert "Stapel" in prompt, prompt
        assert "formal register" in prompt, prompt
        assert "Write units in full words" in prompt, prompt
    deepl_client.delete_style_rule(rule)
    # Without them, none of it.
    llm.prompts.clear()
    deepl_client.translate_document_from_filepath(
        source, tmp_path / "plain.txt", source_lang="EN", target_lang="DE"
    )
    assert not [p for p in map(tokenizer.decode, llm.prompts) if "Stapel" in p or "formal" in p]


def test_tag_handling_v2_parses_xml_strictly(deepl_client: deepl.DeepLClient) -> None:
    ok = deepl_client.translate_text(
        'Press <b>Continue</b> &amp; <x id="1"/> go.',
        target_lang="DE",
        tag_handling="xml",
        tag_handling_version="v2",
    )
    assert isinstance(ok, deepl.TextResult)
    with pytest.raises(deepl.DeepLException, match="Tag handling parsing failed"):
        deepl_client.translate_text(
            "<p>This tag is not closed properly</a>",
            target_lang="DE",
            tag_handling="xml",
            tag_handling_version="v2",
        )
    # v1 (and no version) keeps DeepL's lenient handling.
    lenient = deepl_client.translate_text(
        "<p>This tag is not closed properly</a>", target_lang="DE", tag_handling="xml"
    )
    assert isinstance(lenient, deepl.TextResult)


def test_the_bodies_are_checked_as_before_and_documented(
    edge_server: InProcessServer, main_keys: MainKeys
) -> None:
    """The v3 glossary bodies are models (tolk.server.api.deepl_bodies): each fault named
    as DeepL's clients expect, first fault first, and every field in the OpenAPI document."""
    auth = {"Authorization": f"DeepL-Auth-Key {main_keys.full}"}
    url = f"{edge_server.url}/v3/glossaries"
    entry = {"source_lang": "EN", "target_lang": "DE", "entries": "a\tb"}
    for body, message in (
        ({}, "Parameter 'name' not specified."),
        ({"name": "x"}, "Parameter 'dictionaries' not specified."),
        ({"name": "x", "dictionaries": ["a"]}, "Invalid glossary dictionary"),
        ({"name": "x", "dictionaries": [{"source_lang": "EN"}]}, "Each dictionary needs"),
        ({"name": "x", "dictionaries": [entry | {"entries": " "}]}, "none given"),
        ({"name": "x", "dictionaries": [entry | {"target_lang": "XX"}]}, "not supported"),
        ({"name": "x", "dictionaries": [entry, entry]}, "two dictionaries for the same"),
    ):
        answer = httpx.post(url, json=body, headers=auth, timeout=30)
        assert answer.status_code == 400, (body, answer.text)
        assert message in answer.json()["message"], (body, answer.text)
    made = httpx.post(url, json={"name": "x", "dictionaries": [entry]}, headers=auth, timeout=30)
    assert made.status_code == 201, made.text
    glossary = f"{url}/{made.json()['glossary_id']}"
    try:
        nothing = httpx.patch(glossary, json={}, headers=auth, timeout=30)
        assert nothing.status_code == 400
        assert nothing.json()["message"].startswith("Nothing to update")
        renamed = httpx.patch(glossary, json={"name": "y"}, headers=auth, timeout=30)
        assert renamed.json()["name"] == "y"
        csv = entry | {"entries": "c,d", "entries_format": "csv"}
        put = httpx.put(f"{glossary}/dictionaries", json=csv, headers=auth, timeout=30)
        assert put.status_code == 200, put.text
        assert put.json()["entry_count"] == 1
    finally:
        httpx.delete(glossary, headers=auth, timeout=30)
    paths = httpx.get(f"{edge_server.url}/openapi.json", timeout=30).json()["paths"]

    def fields(path: str, method: str) -> set[str]:
        content = paths[path][method]["requestBody"]["content"]["application/json"]
        return set(content["schema"]["properties"])

    assert fields("/v3/glossaries", "post") == {"name", "dictionaries"}
    assert fields("/v3/glossaries/{glossary_id}", "patch") == {"name", "dictionaries"}
    assert fields("/v3/glossaries/{glossary_id}/dictionaries", "put") == {
        "source_lang", "target_lang", "entries", "entries_format",
    }  # fmt: skip


def test_the_style_rule_bodies_are_checked_as_before_and_documented(
    edge_server: InProcessServer, main_keys: MainKeys
) -> None:
    """The v3 style-rule bodies are models too: DeepL's order (name, language, a language no
    model writes, the instructions' list, the configured rules, each instruction) and every
    field in the OpenAPI document."""
    auth = {"Authorization": f"DeepL-Auth-Key {main_keys.full}"}
    url = f"{edge_server.url}/v3/style_rules"
    rule = {"name": "r", "language": "de"}
    for body, message in (
        ({"language": "xx"}, "Parameter 'name' not specified."),
        ({"name": "r"}, "Parameter 'language' not specified."),
        ({"name": "r", "language": "xx"}, "Value for 'language' not supported"),
        ({"name": "r", "language": "ko"}, "no model writes ko"),
        (rule | {"custom_instructions": "x", "configured_rules": 1}, "custom_instructions: a"),
        (rule | {"custom_instructions": [1], "configured_rules": 1}, "configured_rules: an"),
        (rule | {"configured_rules": {"colour": {}}}, "unknown categories colour"),
        (rule | {"custom_instructions": [{"label": "l"}]}, "prompt: required"),
    ):
        answer = httpx.post(url, json=body, headers=auth, timeout=30)
        assert answer.status_code == 400, (body, answer.text)
        assert message in answer.json()["message"], (body, answer.text)
    instruction = {"label": "Tone", "prompt": "Be brief."}
    made = httpx.post(
        url, json=rule | {"custom_instructions": [instruction]}, headers=auth, timeout=30
    )
    assert made.status_code == 201, made.text
    style = f"{url}/{made.json()['style_id']}"
    try:
        unnamed = httpx.patch(style, json={}, headers=auth, timeout=30)
        assert unnamed.json()["message"] == "Parameter 'name' not specified."
        added = httpx.post(
            f"{style}/custom_instructions", json={"label": "x"}, headers=auth, timeout=30
        )
        assert added.status_code == 400
        assert "prompt: required" in added.json()["message"]
        added = httpx.post(
            f"{style}/custom_instructions", json=instruction, headers=auth, timeout=30
        )
        assert added.status_code == 201, added.text
    finally:
        httpx.delete(style, headers=auth, timeout=30)
    paths = httpx.get(f"{edge_server.url}/openapi.json", timeout=30).json()["paths"]

    def schema(path: str, method: str) -> dict[str, Any]:
        body: dict[str, Any] = paths[path][method]["requestBody"]["content"]["application/json"]
        return dict(body["schema"])

    created = schema("/v3/style_rules", "post")
    assert set(created["properties"]) == {
        "name", "language", "custom_instructions", "configured_rules",
    }  # fmt: skip
    assert sorted(created["required"]) == ["language", "name"]
    told = schema("/v3/style_rules/{style_id}/custom_instructions", "post")
    assert set(told["properties"]) == {"label", "prompt", "source_language"}
    assert sorted(told["required"]) == ["label", "prompt"]
