"""JSON and YAML locale files (tolk.translation.locales) without a server: the types are
registered, placeholders and tags are atoms and pairs, ICU messages parse and escape as ICU
reads them, flagged YAML translations get a comment and JSON strings are spliced."""

from __future__ import annotations

import io
import random
import time
from typing import Any, cast

from ruamel.yaml import YAML

from tests.support.samples.locales import RAILS, icu_ast
from tolk.translation import locales
from tolk.translation.document import Tag, Text
from tolk.translation.files import FILE_TYPES


def test_the_types_are_registered() -> None:
    assert FILE_TYPES[".json"].kind == "json"
    assert FILE_TYPES[".yaml"].kind == FILE_TYPES[".yml"].kind == "yaml"


def test_placeholders_and_tags_are_atoms_and_pairs() -> None:
    message = locales.plain_message(
        "Hi {{name}}, $t(a.b) @:c.d %{x} %count% %1$s %(n)d {0} <1>go</1> <b>now</b><br/> | x"
    )
    marks = [p.source for p in message.parts if not isinstance(p, Text)]
    assert marks == [
        "{{name}}", "$t(a.b)", "@:c.d", "%{x}", "%count%", "%1$s", "%(n)d", "{0}",
        "<1>", "</1>", "<b>", "</b>", "<br/>", "|",
    ]  # fmt: skip
    doc = locales._document(message.parts, locales._plain_escape, None)
    assert doc is not None
    (unit,) = doc.units
    tags = {p.source: p for p in unit.pieces if isinstance(p, Tag)}
    assert tags["<1>"].kind == "open"
    assert tags["</1>"].kind == "close"
    assert tags["<1>"].id == tags["</1>"].id != tags["<b>"].id == tags["</b>"].id
    assert tags["<br/>"].kind == "atom"
    assert len({t.id for t in tags.values()}) == len(tags) - 2  # pairs share one id
    # A close with no open (or misnested) is an atom, not a pair.
    stray = locales.plain_message("a </b> b <i>c")
    assert all(p.kind == "atom" for p in locales._pieces(stray.parts) if isinstance(p, Tag))
    # No words: nothing to translate.
    assert locales._document(locales.plain_message("{{count}} %s").parts, str, None) is None
    # Linear in the text: a run of characters that begin placeholders.
    begun = time.perf_counter()
    locales.plain_message("{{" * 20_000 + "%{" * 20_000 + "<a " * 20_000 + "$t(" * 20_000)
    assert time.perf_counter() - begun < 5


def test_icu_messages_parse_and_escape_as_icu_reads_them() -> None:
    parsed = locales.parse_icu("{n, plural, one {# item} other {# items in '{'braces'}'}} left")
    assert parsed is not None
    (choice,) = parsed.choices
    assert [p for p in choice if isinstance(p, str)] == ["{n, plural, one {", "} other {", "}}"]
    other = choice[3]
    assert isinstance(other, locales._Message)
    assert other.plural
    assert [p.text for p in other.parts if isinstance(p, Text)] == [" items in {braces}"]
    for broken in ("{n, plural, one {x}", "{n, plural, one {x}}", "a } b", "{", "{{x}}"):
        assert locales.parse_icu(broken) is None, broken
    assert locales.parse_icu("{a, select, x {" * 40 + "y" + "} other {z}}" * 40) is None
    # Whatever the model writes comes back as literal text, as ICU (pyicumessageformat, an
    # independent parser) and this module read it.
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice("ab '{}#</>") for _ in range(rng.randint(1, 10)))
        for plural in (False, True):
            escaped = locales.icu_escape(plural)(text)
            message = f"{{n, plural, other {{{escaped}}}}}" if plural else escaped
            ast = icu_ast(message)
            assert (ast[0]["options"]["other"] if plural else ast) == [text], (text, escaped)
    assert locales.icu_escape(False)("it's") == "it's"  # as people write it, where it can be


def _yaml_text(data: Any) -> str:
    out = io.StringIO()
    YAML().dump(data, out)
    return out.getvalue()


def test_flagged_yaml_translations_get_a_comment_and_json_strings_are_spliced() -> None:
    from types import SimpleNamespace

    from tolk.translation.fidelity import TextWarning

    opened = locales.open_file("en.yml", RAILS.encode(), 1 << 20)
    documents = opened.documents(cast(Any, None))  # a locale file is not cut
    texts = [f"Übersetzt {i}" for i in range(len(documents))]
    translation: Any = SimpleNamespace(
        texts=texts,
        warnings=(TextWarning(0, "wrong_language", 1),),
        source=SimpleNamespace(tag="en", code="en"),
        target=SimpleNamespace(tag="pt-BR", code="pt"),
    )
    out = opened.save(translation).decode()
    assert out.splitlines()[1] == "pt-BR:"
    assert "# keep it friendly" in out  # the value's own comment is not replaced...
    flagged = [line for line in out.splitlines() if "tolk: check" in line]
    assert flagged == []  # ...and the first document (the greeting) had one
    translation.warnings = (TextWarning(1, "wrong_language", 1),)
    out = locales.open_file("en.yml", RAILS.encode(), 1 << 20).save(translation).decode()
    (line,) = [line for line in out.splitlines() if "tolk: check" in line]
    assert line.startswith("    save: Übersetzt 1")
    assert "wrong_language" in line
    assert _yaml_text(YAML(typ="safe").load(out))  # still YAML
