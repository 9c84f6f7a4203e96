"""JSON and YAML locale files (tolk.translation.locales): real-looking i18next, react-intl,
vue-i18n, Rails and Symfony catalogues through the in-process server over stand-in engines
(edge), read back with json, ruamel.yaml and an independent ICU parser (pyicumessageformat):
the same keys in the same order, every message translated, its placeholders as written, ICU
that parses to the same arguments and plural categories, comments, anchors and indentation
kept; hostile and broken files refused with a 4xx, fast."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from tests.support.errors import assert_error
from tests.support.files import post_file
from tests.support.samples.locales import RAILS, icu_ast
from tolk.translation import locales

# The placeholders the files below use, written out here (not the module's patterns).
PLACEHOLDERS = re.compile(
    r"\{\{\w+\}\}|\$t\([\w.]+\)|</?\d+>|<br/>|</?(?:b|strong|link)>|%\{\w+\}|%\w+%|@:[\w.]+"
    r"|\{\w+\}|%\(\w+\)s|%\d\$s|%[sd]|(?<=\s)\|(?=\s)"
)


WORDS = re.compile(r"[^\W\d_]")


I18NEXT = """{
  "common": {
    "welcome": "Welcome back, {{name}}!",
    "item_one": "{{count}} item",
    "item_other": "{{count}} items",
    "more": "See $t(common.details) for more",
    "details": "details",
    "trans": "Click <1>here</1> to <3>open</3> the settings.<br/>",
    "printf": "Saved %s of %d files (%1$s)",
    "count": 3,
    "enabled": true,
    "nothing": null,
    "placeholder_only": "{{count}}",
    "url": "https://example.com/help"
  },
  "steps": ["Open the file", "Save your work", 42]
}
"""


FORMATJS = """{
\t"inbox.title": {
\t\t"defaultMessage": "You have {count, plural, =0 {no messages} one {# new message} other {# new messages}} from {sender}.",
\t\t"description": "Inbox heading, keep it short"
\t},
\t"party": "{host, select, female {{guests, plural, offset:1 =0 {She has no guests} one {She invited {guest}} other {She invited {guest} and # others}}} male {He is alone} other {They host a party}}",
\t"rank": "You finished {place, selectordinal, one {#st} two {#nd} few {#rd} other {#th}}!",
\t"rich": "Read the <link>terms of service</link> before {date, date, short}, it's important.",
\t"broken": "Hello {name, plural, one {x}"
}
"""  # noqa: E501


VUE = """{
    "message": {
        "hello": "Hello {name}, welcome to the shop",
        "apple": "no apples | one apple | {count} apples",
        "linked": "@:message.hello Please sign in.",
        "list": "Choose {0} or {1} today"
    }
}"""


SYMFONY = """app:
    title: Our shop
    cart:
        items: '{0} Your cart is empty|{1} One item in your cart|]1,Inf[ %count% items in your cart'
        summary: "Total for %name%: %total%"
    footer: Made with care
"""


def _shape(ast: Any) -> Any:
    """An ICU message's arguments, types, selectors and nesting, its text left out."""
    out: list[Any] = []
    for node in ast:
        if isinstance(node, str):
            continue
        entry: dict[str, Any] = {k: v for k, v in node.items() if k not in ("options", "contents")}
        if "options" in node:
            entry["options"] = {k: _shape(v) for k, v in node["options"].items()}
        if "contents" in node:
            entry["contents"] = _shape(node["contents"])
        out.append(entry)
    return out


def _texts(ast: Any) -> list[str]:
    out: list[str] = []
    for node in ast:
        if isinstance(node, str):
            out.append(node)
            continue
        for sub in node.get("options", {}).values():
            out += _texts(sub)
        out += _texts(node.get("contents", []))
    return out


def _pairs(text: str) -> Any:
    return json.loads(text, object_pairs_hook=list)


def _compare(before: Any, after: Any, changed: list[str], kept: list[str]) -> None:
    """`after` has `before`'s structure, keys and order and non-strings; each string with
    words changed (its path in `changed`), the rest equal (in `kept`)."""
    stack: list[tuple[Any, Any, str]] = [(before, after, "")]
    while stack:
        old, new, path = stack.pop()
        if isinstance(old, list) and old and isinstance(old[0], tuple):
            assert [k for k, _ in new] == [k for k, _ in old], path
            stack += [(o, n, f"{path}.{k}") for (k, o), (_, n) in zip(old, new, strict=True)]
        elif isinstance(old, list):
            assert isinstance(new, list)
            assert len(new) == len(old), path
            stack += [(o, n, f"{path}[{i}]") for i, (o, n) in enumerate(zip(old, new, strict=True))]
        elif isinstance(old, str):
            assert isinstance(new, str), path
            (changed if new != old else kept).append(path)
        else:
            assert new == old, path
            assert type(new) is type(old), path


def _indents(text: str) -> list[str]:
    return [line[: len(line) - len(line.lstrip())] for line in text.splitlines()]


async def test_an_i18next_catalogue_comes_back_translated(edge_client: httpx.AsyncClient) -> None:
    response = await post_file(edge_client, "translation.json", I18NEXT.encode())
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    out = response.text
    changed: list[str] = []
    kept: list[str] = []
    _compare(_pairs(I18NEXT), _pairs(out), changed, kept)
    assert sorted(kept) == [".common.placeholder_only", ".common.url"]
    assert len(changed) == 9
    assert _indents(out) == _indents(I18NEXT)  # two spaces, as it was
    assert out.endswith("}\n")
    before, after = json.loads(I18NEXT), json.loads(out)
    for key, value in before["common"].items():
        if isinstance(value, str):
            new = after["common"][key]
            assert Counter(PLACEHOLDERS.findall(new)) == Counter(PLACEHOLDERS.findall(value)), key
    # With a byte order mark and no final newline, compact: kept so.
    compact = json.dumps(json.loads(I18NEXT), separators=(",", ":"))
    response = await post_file(edge_client, "compact.json", "\ufeff".encode() + compact.encode())
    assert response.status_code == 200, response.text
    assert response.content.startswith("\ufeff".encode())
    body = response.content.decode("utf-8").removeprefix("\ufeff")
    assert "\n" not in body
    assert ": " not in body
    _compare(_pairs(compact), _pairs(body), [], [])


async def test_react_intl_icu_messages_still_parse_with_their_arguments(
    edge_client: httpx.AsyncClient,
) -> None:
    response = await post_file(edge_client, "de.json", FORMATJS.encode())
    assert response.status_code == 200, response.text
    out = response.text
    assert _indents(out) == _indents(FORMATJS)  # tabs
    before, after = json.loads(FORMATJS), json.loads(out)
    assert list(after) == list(before)
    old_inbox, new_inbox = before["inbox.title"], after["inbox.title"]
    assert new_inbox["description"] == old_inbox["description"]  # a note for translators
    pairs = [(old_inbox["defaultMessage"], new_inbox["defaultMessage"])]
    pairs += [(before[k], after[k]) for k in ("party", "rank", "rich")]
    for old, new in pairs:
        assert new != old
        old_ast, new_ast = icu_ast(old), icu_ast(new)
        assert _shape(new_ast) == _shape(old_ast), new  # arguments, selectors, nesting
        old_texts = [t for t in _texts(old_ast) if WORDS.search(t)]
        new_texts = [t for t in _texts(new_ast) if WORDS.search(t)]
        assert len(new_texts) >= len(old_texts) > 0
        assert not set(old_texts) & set(new_texts)  # every message text translated
    party = icu_ast(after["party"])[0]
    assert set(party["options"]) == {"female", "male", "other"}
    guests = next(n for n in party["options"]["female"] if isinstance(n, dict))
    assert guests["type"] == "plural"
    assert guests["offset"] == 1
    assert set(guests["options"]) == {"=0", "one", "other"}
    assert any(isinstance(n, dict) and n.get("hash") for n in guests["options"]["other"])
    # Not valid ICU but braces: plain text with its placeholder kept.
    assert after["broken"] != before["broken"]
    assert after["broken"].count("{name, plural, one {x}") <= 1


async def test_a_vue_i18n_catalogue_keeps_its_linked_messages_and_forms(
    edge_client: httpx.AsyncClient,
) -> None:
    response = await post_file(edge_client, "en.json", VUE.encode())
    assert response.status_code == 200, response.text
    out = response.text
    assert _indents(out) == _indents(VUE)  # four spaces
    assert not out.endswith("\n")  # as the source
    changed: list[str] = []
    _compare(_pairs(VUE), _pairs(out), changed, [])
    assert len(changed) == 4
    before, after = json.loads(VUE)["message"], json.loads(out)["message"]
    for key, value in before.items():
        assert Counter(PLACEHOLDERS.findall(after[key])) == Counter(PLACEHOLDERS.findall(value))
    assert after["apple"].count(" | ") == 2


async def test_a_rails_catalogue_keeps_comments_anchors_and_gets_the_target_root(
    edge_client: httpx.AsyncClient,
) -> None:
    response = await post_file(edge_client, "en.yml", RAILS.encode())
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/yaml")
    out = response.text
    for comment in ("# Application strings", "# Shown on the dashboard", "# keep it friendly"):
        assert comment in out
    assert "&defaults" in out
    assert "<<: *defaults" in out
    assert out.splitlines()[1] == "de:"
    assert "\nen:" not in out
    before = YAML(typ="safe").load(RAILS)["en"]
    after = YAML(typ="safe").load(out)["de"]
    assert list(after) == list(before)
    assert after["limit"] == 5
    assert after["enabled"] is True
    assert after["admin"]["save"] == after["defaults"]["save"] != before["defaults"]["save"]
    assert after["admin"]["title"] != before["admin"]["title"]
    assert after["greeting"] != before["greeting"]
    assert PLACEHOLDERS.findall(after["greeting"]) == ["%{name}"]
    assert PLACEHOLDERS.findall(after["errors"]["messages"]["too_long"]) == ["%{count}"]
    assert after["errors"]["messages"]["blank"] != before["errors"]["messages"]["blank"]
    assert len(after["levels"]) == 2
    assert after["levels"] != before["levels"]
    assert after["notice"] != before["notice"]
    assert "notice: |" in out  # a literal block still
    # Indentation: two spaces, sequences not indented, as the source.
    assert "\n  admin:\n    <<: *defaults\n" in out
    assert "\n  levels:\n    - " in out


async def test_a_symfony_catalogue_keeps_its_parameters_and_intervals(
    edge_client: httpx.AsyncClient,
) -> None:
    response = await post_file(edge_client, "messages.en.yaml", SYMFONY.encode())
    assert response.status_code == 200, response.text
    out = response.text
    assert "\n    cart:\n        items: '" in out  # four spaces, single quotes kept
    before = YAML(typ="safe").load(SYMFONY)["app"]
    after = YAML(typ="safe").load(out)["app"]
    assert list(after) == ["title", "cart", "footer"]  # no language root: no renaming
    assert after["title"] != before["title"]
    assert after["footer"] != before["footer"]
    items = after["cart"]["items"]
    assert items != before["cart"]["items"]
    for kept in ("{0}", "{1}", "]1,Inf[", "%count%"):
        assert items.count(kept) == 1, items
    summary = after["cart"]["summary"]
    assert sorted(PLACEHOLDERS.findall(summary)) == ["%name%", "%total%"]


def _laughs(levels: int) -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for n in range(1, levels):
        name, previous = chr(ord("a") + n), chr(ord("a") + n - 1)
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("name", "content", "status", "said"),
    [
        ("laughs.yaml", _laughs(9), 413, "aliases"),
        ("python.yaml", "en:\n  run: !!python/object/apply:os.system [ls]\n", 422, "tag"),
        ("custom.yml", "en:\n  x: !secret value\n", 422, "tag"),
        ("loop.yaml", "a: &a [1, *a]\n", 422, "alias"),
        ("deep.yaml", "a: " + "[" * 50_000 + "]" * 50_000 + "\n", 422, "64 levels"),
        ("broken.yaml", "en:\n  a: b\n    c: d\n", 422, "line 3, column"),
        ("scalar.yml", "just a sentence\n", 422, "not a catalogue"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, 422, "64 levels"),
        ("broken.json", '{\n  "a": "b",\n  "c": \n}', 422, "line 4, column 1"),
        ("number.json", "42", 422, "not a catalogue"),
        ("latin1.json", '{"a": "caf\xe9"}', 422, "UTF-8"),
    ],
)
async def test_hostile_and_broken_files_are_refused_fast(
    edge_client: httpx.AsyncClient, name: str, content: str, status: int, said: str
) -> None:
    data = content.encode("latin-1" if "latin1" in name else "utf-8")
    begun = time.perf_counter()
    response = await post_file(edge_client, name, data)
    error = assert_error(
        response, status, "payload_too_large" if status == 413 else "invalid_request"
    )
    assert said in error["message"], error["message"]
    assert time.perf_counter() - begun < 10


async def test_too_many_strings_are_refused(edge_client: httpx.AsyncClient) -> None:
    many = json.dumps([""] * (locales.MAX_STRINGS + 1))
    error = assert_error(
        await post_file(edge_client, "many.json", many.encode()), 413, "payload_too_large"
    )
    assert f"{locales.MAX_STRINGS}" in error["message"]
    fits = json.dumps([""] * 10 + ["One sentence"])
    response = await post_file(edge_client, "fits.json", fits.encode())
    assert response.status_code == 200, response.text
    assert json.loads(response.text)[:10] == [""] * 10
