"""JSON and YAML locale files: the message catalogues of i18next, react-intl (FormatJS),
vue-i18n, Rails and Symfony, their values translated and everything else kept.

What is translated: every string value, in mappings and in lists, at any depth (each its own
document, so an i18next plural key `item_one` / `item_other` is translated as its own message).
What is left as it was: the keys, the nesting and its order, numbers, booleans, nulls, dates,
strings without words (`"{{count}}"`, `"%s"`), strings that are a URL alone, and the
`description` next to a `defaultMessage` or `message` (FormatJS' extracted messages, Chrome's
messages.json: a note for translators, not a message).

Placeholders go to the model as placeholders (tolk.translation.document's atoms), so each
comes back exactly once and as written, or the message is translated around them run by run:
`{name}`, `{{name}}` (i18next, vue-i18n), printf's `%s`, `%1$s`, `%(name)s` (gettext.PLACEHOLDER),
`%{name}` (Rails), `%name%` (Symfony), `$t(key)` (i18next nesting), `@:key` (vue-i18n linked
messages), ICU simple arguments (`{n, number}`), Symfony's intervals (`]1,Inf[`), vue-i18n's
` | ` between plural forms; HTML and react-i18next's `<1>...</1>` tags are pairs the model may
move (emphasis such as `<b>` may be dropped where the model cannot keep it, as in HTML documents).

ICU MessageFormat (react-intl, FormatJS): in a file where some value has a `plural`, `select`
or `selectordinal` argument, every value that parses as an ICU message is read as one. Only the
messages' texts are translated: the outer message with each such argument a placeholder, and
each sub-message (`one {# item}`) as a document of its own, `#` a placeholder; argument names,
keywords, selectors and offsets stay as written. The model's text is quoted as ICU needs
(`{`, `}`, `#` in a plural, `<` before a tag name, an apostrophe before them doubled), so the
result parses again; a value that is not valid ICU is plain text with placeholders.

JSON is written back by splicing each translated value (json.dumps, ensure_ascii=False) into
the original text where the value was: indentation, spacing, key order, numbers as written,
escapes of untranslated values, the trailing newline and a byte order mark all stay exactly as
they were. YAML goes through ruamel.yaml's round trip (comments, key order, quoting and block
styles, anchors and merge keys kept; indentation read from its first lines); a Rails
file whose single top-level key is the source language (`en:`) gets the target's (`de:`). A
translation tolk's checks flag gets a YAML end-of-line comment `# tolk: check this translation
(codes)` where its key has none and it is not a block scalar (JSON has no comments: the
response's warnings are all there is).

Bounds: nesting depth (MAX_DEPTH), strings (MAX_STRINGS), YAML nodes with every alias expanded
(MAX_YAML_NODES: a "billion laughs" file is refused before anything walks it); only YAML's
standard tags are accepted (`!!python/object` and custom tags are refused, nothing is ever
constructed from them); characters through Opened.characters (server.max_file_chars).

Limits: target languages with more plural categories than the source (Polish `_few`, `_many`,
or an ICU `few {...}` branch) are not generated: each existing key or branch is translated, a
translator adds the rest. Attribute values inside HTML tags are not translated. Duplicate JSON
keys are translated where they are (JSON readers keep the last); YAML refuses them. A quoted
`'<'` is FormatJS's escape; Java's ICU shows those apostrophes. ruamel.yaml's round trip is
pure Python: about 100 KB of YAML a second.

Written by hand, and why: the JSON splice needs each value's position, which no JSON library
in the standard library gives (json validates the file first; the scan here is iterative and
bounded). The ICU parser: the maintained Python ICU parsers do not fit (pyicumessageformat had
one release, in 2021, and drops the source positions of text; its fork
generaltranslation-icu-messageformat-parser is under the Functional Source License; PyICU is
a C++ extension built against the system's ICU, heavy for one parser), and translating a message
while keeping the rest byte for byte needs every piece's source span: it is a bounded
recursive descent over ICU's grammar (MAX_ICU_DEPTH), tested against pyicumessageformat.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from tolk import detect
from tolk.errors import InvalidRequest, PayloadTooLarge
from tolk.translation import gettext
from tolk.translation.document import Document, Piece, Tag, TagKind, Text, Unit, has_words
from tolk.translation.files import Opened, decoded
from tolk.translation.results import Translation

MAX_DEPTH = 64  # nesting of mappings and lists (a locale file nests a handful)
MAX_STRINGS = 100_000  # string values a file may hold (a large application's: ~20,000)
MAX_YAML_NODES = 1_000_000  # YAML nodes with every alias expanded
MAX_ICU_DEPTH = 16  # nested plural/select arguments in one ICU message

# --- placeholders in plain (not ICU) values --------------------------------------------------

_VOID = frozenset(  # HTML's elements that never close: atoms
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param"}
    | {"source", "track", "wbr"}
)
_TAG = re.compile(
    r"<(/?)([A-Za-z][\w:.-]{0,63}|\d{1,3})(?:\s+[^<>]{0,1000}?)?\s*(/?)>",
)
_PLAIN = re.compile(
    r"\{\{[^{}]{0,200}\}\}"  # {{name}}, {{- html}}, {{value, number}}: i18next, vue-i18n
    r"|\$t\([^()]{0,200}\)"  # $t(key), $t(key, {"count": 2}): i18next nesting
    r"|@(?:\.[A-Za-z]{1,32})?:(?:\([^()\s]{1,200}\)|[\w-]{1,200}(?:[./][\w-]{1,200}){0,32})"
    r"|%\{[^{}\s]{1,64}\}"  # %{name}: Rails
    r"|%<[A-Za-z_]\w{0,63}>[-+ #0]{0,5}\d{0,4}(?:\.\d{1,4})?[A-Za-z]"  # %<name>s: Ruby
    r"|%[A-Za-z_][\w.-]{0,62}\w%"  # %name%: Symfony (two characters at least: not %s%)
    r"|\{\s{0,8}\w{1,64}\s{0,8},\s{0,8}\w{1,32}\s{0,8}(?:,[^{}]{0,128})?\}"  # {n, number}: ICU
    r"|[\[\]]\s{0,8}-?(?:\d{1,18}|Inf)\s{0,8},\s{0,8}\+?-?(?:\d{1,18}|Inf)\s{0,8}[\[\]]"
    r"|(?<=\s)\|(?=\s)"  # vue-i18n's plural forms: `car | cars`
    r"|\|(?=\s{0,8}(?:\{\d{1,18}\}|[\[\]]\s{0,8}-?(?:\d|Inf)))"  # Symfony's: `|{1} one`
    rf"|{gettext.PLACEHOLDER.pattern}"
    rf"|{_TAG.pattern}"
)
_URL = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]{0,31}://|mailto:|www\.)\S*")
_SENTINEL = re.compile("\ufdd0(\\d+)\ufdd1")  # a choice argument's place in its message
_NONCHARACTERS = re.compile("[\ufdd0-\ufdef]")  # never in a source we parse as ICU


def _sentinel(n: int) -> str:
    return f"\ufdd0{n}\ufdd1"


# --- what a message is, between parsing and documents -----------------------------------------


@dataclass(frozen=True)
class _Mark:
    """Something kept verbatim inside a message: a placeholder, `#`, or a tag (`name` set for
    a tag that may pair: `open`/`close`)."""

    source: str
    kind: TagKind = "atom"
    name: str = ""


@dataclass
class _Message:
    """A message as parsed: text runs and marks; `choices` its plural/select arguments, each
    verbatim source alternating with sub-messages, marked by a sentinel in `parts`."""

    parts: list[Text | _Mark] = field(default_factory=list)
    choices: list[list[str | _Message]] = field(default_factory=list)
    plural: bool = False  # `#` is the number here (a plural or selectordinal sub-message)


@dataclass
class _Node:
    """A message made into documents: its own (None if it has no words) and its choices'."""

    doc: int | None
    source: str  # the message's source with a sentinel for each choice
    choices: list[list[str | _Node]]

    @property
    def translated(self) -> bool:
        """Whether anything in it is translated (else it is kept as written)."""
        return self.doc is not None or any(
            isinstance(p, _Node) and p.translated for c in self.choices for p in c
        )

    def render(self, texts: list[str]) -> str:
        text = self.source if self.doc is None else texts[self.doc]

        def choice(match: re.Match[str]) -> str:
            parts = self.choices[int(match.group(1))]
            return "".join(p if isinstance(p, str) else p.render(texts) for p in parts)

        return _SENTINEL.sub(choice, text)


# --- ICU MessageFormat -------------------------------------------------------------------------


class _NotIcu(Exception):
    """The value is not a valid ICU message (it is translated as plain text)."""


_ICU_CHOICES = frozenset({"plural", "select", "selectordinal"})
_ICU_HAS_CHOICE = re.compile(r"\{\s*[^\s{},]{1,64}\s*,\s*(?:plural|select|selectordinal)\s*,")
_ICU_NAME = re.compile(r"[^\s{}'#<>,=]{1,128}")
_ICU_TYPE = re.compile(r"\s*([A-Za-z]{1,32})\s*")
_ICU_SPACE = re.compile(r"\s*")
_ICU_OFFSET = re.compile(r"offset\s*:\s*\d{1,9}\s*")
_ICU_SELECTOR = re.compile(r"(?:=\s*-?\d{1,18}(?:\.\d{1,9})?|[^\s{}'#<>,=]{1,64})\s*")
_ICU_TAG = re.compile(r"<(/?)([A-Za-z][\w.:-]{0,63})\s*(/?)>")
_ICU_PLAIN = re.compile(r"[^'{}#<]+")


class _IcuParser:
    """ICU MessageFormat, as FormatJS and ICU read it (apostrophe quoting as ICU's
    DOUBLE_OPTIONAL mode: `''` is an apostrophe, `'{` begins a quoted literal), with each
    piece's source kept."""

    def __init__(self, source: str) -> None:
        self.s = source
        self.i = 0

    def parse(self) -> _Message:
        message = self.message(0, plural=False, nested=False)
        if self.i != len(self.s):
            raise _NotIcu
        return message

    def message(self, depth: int, plural: bool, nested: bool) -> _Message:
        s = self.s
        out = _Message(plural=plural)
        text: list[str] = []
        start = self.i

        def flush() -> None:
            nonlocal start
            if self.i > start:
                out.parts.append(Text("".join(text), s[start : self.i]))
            text.clear()

        while self.i < len(s):
            c = s[self.i]
            if plain := _ICU_PLAIN.match(s, self.i):
                text.append(plain.group())
                self.i = plain.end()
            elif c == "'":
                text.append(self.quoted(plural))
            elif c == "}":
                if not nested:
                    raise _NotIcu
                flush()
                return out
            elif c == "#" and plural:
                flush()
                out.parts.append(_Mark("#"))
                self.i += 1
                start = self.i
            elif c == "<" and (tag := _ICU_TAG.match(s, self.i)):
                flush()
                kind: TagKind = "atom" if tag.group(3) else "close" if tag.group(1) else "open"
                out.parts.append(_Mark(tag.group(), kind, tag.group(2)))
                self.i = tag.end()
                start = self.i
            elif c == "{":
                flush()
                self.argument(out, depth)
                start = self.i
            else:  # `#` outside a plural, `<` that begins no tag
                text.append(c)
                self.i += 1
        if nested:
            raise _NotIcu  # a sub-message never closed
        flush()
        return out

    def quoted(self, plural: bool) -> str:
        """The literal text at an apostrophe (self.i), consumed."""
        s, i = self.s, self.i
        following = s[i + 1 : i + 2]
        if following == "'":
            self.i = i + 2
            return "'"
        if following and (following in "{}<>" or (following == "#" and plural)):
            out: list[str] = []
            i += 1
            while i < len(s):  # to the closing apostrophe, or the end (as ICU reads it)
                if s[i] == "'":
                    if s[i + 1 : i + 2] == "'":
                        out.append("'")
                        i += 2
                        continue
                    i += 1
                    break
                out.append(s[i])
                i += 1
            self.i = i
            return "".join(out)
        self.i = i + 1
        return "'"

    def argument(self, out: _Message, depth: int) -> None:
        """An argument at `{` (self.i): a mark, or a choice whose sub-messages are parsed."""
        s, begin = self.s, self.i
        self.i = _ICU_SPACE.match(s, self.i + 1).end()  # type: ignore[union-attr]
        if not (name := _ICU_NAME.match(s, self.i)):
            raise _NotIcu
        self.i = _ICU_SPACE.match(s, name.end()).end()  # type: ignore[union-attr]
        if s[self.i : self.i + 1] == "}":
            self.i += 1
            out.parts.append(_Mark(s[begin : self.i]))
            return
        if s[self.i : self.i + 1] != ",":
            raise _NotIcu
        if not (kind := _ICU_TYPE.match(s, self.i + 1)):
            raise _NotIcu
        self.i = kind.end()
        if s[self.i : self.i + 1] == "}":
            self.i += 1
            out.parts.append(_Mark(s[begin : self.i]))
            return
        if s[self.i : self.i + 1] != ",":
            raise _NotIcu
        self.i += 1
        if kind.group(1) not in _ICU_CHOICES:
            self.style()
            out.parts.append(_Mark(s[begin : self.i]))
            return
        if depth >= MAX_ICU_DEPTH:
            raise _NotIcu
        plural = kind.group(1) != "select"
        self.i = _ICU_SPACE.match(s, self.i).end()  # type: ignore[union-attr]
        if plural and (offset := _ICU_OFFSET.match(s, self.i)):
            self.i = offset.end()
        parts: list[str | _Message] = []
        at, selectors = begin, set()
        while self.i < len(s) and s[self.i] != "}":
            if not (selector := _ICU_SELECTOR.match(s, self.i)):
                raise _NotIcu
            selectors.add(selector.group().strip())
            self.i = selector.end()
            if s[self.i : self.i + 1] != "{":
                raise _NotIcu
            self.i += 1
            parts.append(s[at : self.i])
            parts.append(self.message(depth + 1, plural, nested=True))
            at = self.i  # at the sub-message's `}`
            self.i = _ICU_SPACE.match(s, self.i + 1).end()  # type: ignore[union-attr]
        if self.i >= len(s) or "other" not in selectors:
            raise _NotIcu  # unclosed, or no `other` (which ICU requires)
        self.i += 1
        parts.append(s[at : self.i])
        out.parts.append(_Mark(_sentinel(len(out.choices))))
        out.choices.append(parts)

    def style(self) -> None:
        """An argument's style (`short`, `::currency/EUR`, `#,##0.00`) to its `}`, consumed."""
        s, depth = self.s, 0
        while self.i < len(s):
            c = s[self.i]
            if c == "'":
                self.quoted(plural=False)
                continue
            if c == "{":
                depth += 1
            elif c == "}":
                if depth == 0:
                    self.i += 1
                    return
                depth -= 1
            self.i += 1
        raise _NotIcu


def parse_icu(source: str) -> _Message | None:
    """`source` as an ICU message, or None if it is not one."""
    if _NONCHARACTERS.search(source):
        return None
    try:
        return _IcuParser(source).parse()
    except _NotIcu:
        return None


def icu_escape(plural: bool) -> Callable[[str], str]:
    """The model's text as literal ICU message text. Each run of characters ICU reads as
    syntax (`{`, `}`, `#` in a plural, `<` before what would be a tag) is quoted as one
    (`'{#}'`), apostrophes inside it doubled; an apostrophe elsewhere is doubled where it would
    begin quoting (before those characters, another apostrophe, a `>`, or the end of the text,
    where a placeholder may follow), else left single as people write it (`it's`)."""

    def special(text: str, i: int) -> bool:
        c = text[i]
        if c in "{}" or (c == "#" and plural):
            return True
        following = text[i + 1 : i + 2]
        return c == "<" and (following == "/" or following.isalpha())

    def escape(text: str) -> str:
        text = _NONCHARACTERS.sub("", text)
        out: list[str] = []
        i = 0
        while i < len(text):
            if special(text, i):
                run = []
                while i < len(text) and (text[i] == "'" or special(text, i)):
                    run.append("''" if text[i] == "'" else text[i])
                    i += 1
                out.append("'" + "".join(run) + "'")
                continue
            c = text[i]
            following = text[i + 1 : i + 2]
            if c == "'" and (not following or following in "'{}<>#" or special(text, i + 1)):
                out.append("''")
            else:
                out.append(c)
            i += 1
        return "".join(out)

    return escape


def icu_structure(plural: bool) -> Callable[[str], Hashable]:
    """A message's marks and choices as ICU reads them: a translation must read the same."""

    def check(text: str) -> Hashable:
        try:
            parser = _IcuParser(text)
            message = parser.message(0, plural, nested=False)
        except _NotIcu:
            return "not ICU"
        if parser.i != len(text):
            return "not ICU"
        return tuple(sorted(p.source for p in message.parts if isinstance(p, _Mark)))

    return check


def _plain_escape(text: str) -> str:
    return _NONCHARACTERS.sub("", text)


def plain_message(source: str) -> _Message:
    """A value that is not ICU: text runs around its placeholders and tags."""
    out = _Message()
    at = 0
    for match in _PLAIN.finditer(source):
        if match.start() > at:
            run = source[at : match.start()]
            out.parts.append(Text(run, run))
        tag = _TAG.fullmatch(match.group())
        if tag is None or tag.group(3):
            out.parts.append(_Mark(match.group()))
        elif tag.group(1):
            out.parts.append(_Mark(match.group(), "close", tag.group(2).lower()))
        elif tag.group(2).lower() in _VOID:
            out.parts.append(_Mark(match.group()))
        else:
            out.parts.append(_Mark(match.group(), "open", tag.group(2).lower()))
        at = match.end()
    if at < len(source):
        out.parts.append(Text(source[at:], source[at:]))
    return out


# --- messages into documents -------------------------------------------------------------------


def _pieces(parts: list[Text | _Mark]) -> list[Piece]:
    """Marks as tags: tags that open and close each other a pair (one id), the rest atoms."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for i, part in enumerate(parts):
        if not isinstance(part, _Mark) or part.kind == "atom":
            continue
        if part.kind == "open":
            stack.append(i)
            continue
        for depth in range(len(stack) - 1, -1, -1):
            opened = parts[stack[depth]]
            assert isinstance(opened, _Mark)
            if opened.name == part.name:
                pairs[stack[depth]] = i
                pairs[i] = stack[depth]
                del stack[depth:]  # tags opened inside and never closed stay atoms
                break
    out: list[Piece] = []
    for i, part in enumerate(parts):  # a pair's id is its opening tag's place: ids unique
        if isinstance(part, Text):
            out.append(part)
        elif i in pairs:
            out.append(Tag(part.source, part.kind, min(i, pairs[i]) + 1))
        else:
            out.append(Tag(part.source, "atom", i + 1))
    return out


def _document(
    parts: list[Text | _Mark], escape: Callable[[str], str], check: Callable[[str], Hashable] | None
) -> Document | None:
    """One message as a document of one unit (its outer whitespace verbatim), or None if it
    has no words to translate."""
    words = "".join(p.text for p in parts if isinstance(p, Text))
    if not has_words(words) or _URL.fullmatch(words.strip()):
        return None
    pieces = _pieces(parts)
    lead = trail = ""
    first = pieces[0]
    if isinstance(first, Text):
        space = first.text[: len(first.text) - len(first.text.lstrip())]
        if space and first.source.startswith(space):
            lead = space
            pieces[0] = Text(first.text[len(space) :], first.source[len(space) :])
    last = pieces[-1]
    if isinstance(last, Text):
        space = last.text[len(last.text.rstrip()) :]
        if space and last.source.endswith(space):
            trail = space
            pieces[-1] = Text(last.text[: -len(space)], last.source[: -len(space)])
    pieces = [p for p in pieces if not isinstance(p, Text) or p.source]
    unit = Unit(tuple(pieces), escape, check)
    return Document(tuple(p for p in (lead, 0, trail) if p != ""), (unit,))


def _source(parts: list[Text | _Mark]) -> str:
    return "".join(p.source for p in parts)


def _node(message: _Message, icu: bool, docs: list[Document]) -> _Node:
    """A parsed message's documents appended to `docs`, and how to render them back."""
    escape = icu_escape(message.plural) if icu else _plain_escape
    check = icu_structure(message.plural) if icu else None
    document = _document(message.parts, escape, check)
    index = None
    if document is not None:
        index = len(docs)
        docs.append(document)
    choices = [
        [p if isinstance(p, str) else _node(p, icu, docs) for p in choice]
        for choice in message.choices
    ]
    return _Node(index, _source(message.parts), choices)


@dataclass
class _Catalogue:
    """The strings of a file, each a node (documents in `docs`), and the sample text."""

    docs: list[Document] = field(default_factory=list)
    nodes: list[_Node] = field(default_factory=list)
    characters: int = 0
    sample: list[str] = field(default_factory=list)

    def add(self, value: str, icu: bool) -> int:
        message = parse_icu(value) if icu else None
        before = len(self.docs)
        if message is not None:
            node = _node(message, True, self.docs)
        else:
            node = _node(plain_message(value), False, self.docs)
        if len(self.docs) > before:
            self.characters += len(value)
            if sum(len(s) for s in self.sample) < detect.MAX_CHARS:
                self.sample.append(value)
        self.nodes.append(node)
        return len(self.nodes) - 1

    def rendered(self, index: int, texts: list[str]) -> str:
        return self.nodes[index].render(texts)


def _strings_bound(filename: str, count: int) -> None:
    if count > MAX_STRINGS:
        raise PayloadTooLarge(
            f"'{filename}' has more than {MAX_STRINGS} strings; split the catalogue",
            field="file",
            limit=MAX_STRINGS,
        )


def _too_deep(filename: str, where: str) -> InvalidRequest:
    return InvalidRequest(
        f"'{filename}' nests more than {MAX_DEPTH} levels deep{where}; a locale file nests a "
        "few: check that it is one",
        field="file",
        limit=MAX_DEPTH,
    )


def _skipped_description(mapping: Any, key: Any) -> bool:
    """FormatJS' and Chrome's `description`: a note for translators beside the message."""
    return key == "description" and any(
        isinstance(mapping.get(k), str) for k in ("defaultMessage", "message")
    )


def _warned(translation: Translation) -> dict[int, list[str]]:
    flagged: dict[int, list[str]] = {}
    for warning in translation.warnings:
        flagged.setdefault(warning.text, []).append(warning.code)
    return flagged


def open_file(filename: str, data: bytes, max_unzipped: int) -> Opened:
    """A .json, .yaml or .yml locale file opened: each string value's messages documents."""
    text, bom = decoded(filename, data)
    if PurePath(filename).suffix.lower() == ".json":
        return _open_json(filename, text, bom)
    return _open_yaml(filename, text, bom)


# --- JSON --------------------------------------------------------------------------------------

_JSON_SCAN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)
_JSON_TOKEN = re.compile(r'\s*(?:([\[\]{}:,])|(")|(-?\d[\d.eE+-]*|true|false|null))')


class _Object(list[tuple[str, Any]]):
    """A JSON object as its pairs in the text's order, duplicate keys included."""


def _json_depth(filename: str, text: str) -> None:
    """Refuse nesting past MAX_DEPTH before json reads it (its decoder recurses)."""
    depth = 0
    for match in _JSON_SCAN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise _too_deep(filename, f" (line {line})")
        elif token in "]}":
            depth -= 1


def _json_spans(text: str) -> Iterator[tuple[int, int]]:
    """The span of each string value (not key) of a valid JSON text, in order; iterative."""
    containers: list[str] = []
    expect_key = False
    i = 0
    while match := _JSON_TOKEN.match(text, i):
        punct, quote, _ = match.groups()
        i = match.end()
        if punct in ("{", "["):
            containers.append(punct)
            expect_key = punct == "{"
        elif punct in ("}", "]"):
            containers.pop()
            if not containers:
                return
        elif punct == ",":
            expect_key = containers[-1] == "{"
        elif punct == ":":
            expect_key = False
        elif quote:
            end = json.decoder.scanstring(text, i)[1]  # type: ignore[attr-defined]
            if not expect_key:
                yield i - 1, end
            i = end


def _json_values(data: Any) -> Iterator[tuple[str, bool]]:
    """Each string value of `data` (objects as _Object) in the text's order, and whether it is
    translated (not a description); iterative."""
    stack: list[Iterator[tuple[Any, bool]]] = [iter([(data, True)])]
    while stack:
        try:
            value, keep = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if isinstance(value, _Object):
            pairs = dict(value)
            stack.append(iter([(v, not _skipped_description(pairs, k)) for k, v in value]))
        elif isinstance(value, list):
            stack.append(iter([(v, True) for v in value]))
        elif isinstance(value, str):
            yield value, keep


def _open_json(filename: str, text: str, bom: str) -> Opened:
    _json_depth(filename, text)
    try:
        data = json.loads(text, object_pairs_hook=_Object)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"'{filename}' is not valid JSON: {exc.msg} at line {exc.lineno}, column "
            f"{exc.colno}; fix it there and retry",
            field="file",
            line=exc.lineno,
            column=exc.colno,
        ) from exc
    except RecursionError as exc:  # not reached past _json_depth; kept a 4xx regardless
        raise _too_deep(filename, "") from exc
    if not isinstance(data, list):  # an _Object is a list too
        kind = "string" if isinstance(data, str) else "scalar"
        raise InvalidRequest(
            f"'{filename}' holds a JSON {kind}, not a catalogue: a locale file is an object "
            "of messages (or a list of them)",
            field="file",
        )
    icu = bool(_ICU_HAS_CHOICE.search(text))
    catalogue = _Catalogue()
    spans: list[tuple[int, int, int]] = []  # (start, end, node)
    values = _json_values(data)
    for n, (start, end) in enumerate(_json_spans(text)):
        _strings_bound(filename, n + 1)
        value, keep = next(values)
        if keep:
            spans.append((start, end, catalogue.add(value, icu)))

    def save(translation: Translation) -> bytes:
        out: list[str] = []
        at = 0
        for start, end, node in spans:
            if not catalogue.nodes[node].translated:
                continue
            rendered = catalogue.rendered(node, translation.texts)
            out += [text[at:start], json.dumps(rendered, ensure_ascii=False)]
            at = end
        out.append(text[at:])
        return (bom + "".join(out)).encode("utf-8")

    return Opened(
        lambda cut: catalogue.docs, catalogue.characters, save, " ".join(catalogue.sample)
    )


# --- YAML --------------------------------------------------------------------------------------

_YAML_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}"
    for t in ("str", "int", "float", "bool", "null", "map", "seq", "merge", "timestamp")
)
_LANGUAGE_KEY = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8}){0,3}")


def _yaml(filename: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.composer import Composer

    class BoundedComposer(Composer):
        """ruamel's composer, refusing nesting past MAX_DEPTH before it recurses further."""

        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    mark = self.parser.peek_event().start_mark
                    raise _too_deep(filename, f" (line {mark.line + 1})")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    yaml = YAML(typ="rt")
    yaml.Composer = BoundedComposer
    yaml.preserve_quotes = True
    yaml.width = 1_000_000  # never fold a long value anew
    return yaml


def _yaml_error(filename: str, exc: Exception) -> InvalidRequest:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return InvalidRequest(f"'{filename}' is not valid YAML: {problem}", field="file")
    line, column = mark.line + 1, mark.column + 1
    what = "is refused" if isinstance(exc, _Problem) else "is not valid YAML"
    return InvalidRequest(
        f"'{filename}' {what}: {problem} at line {line}, column {column}; fix it there and retry",
        field="file",
        line=line,
        column=column,
    )


def _check_nodes(filename: str, root: Any) -> None:
    """Refuse tags other than YAML's standard ones, and more than MAX_YAML_NODES nodes with
    every alias expanded (memoised per node, so a billion laughs costs its size to check),
    and aliases that contain themselves."""
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            active.discard(key)
            total = 1 + sum(sizes[id(c)] for c in _node_children(node))
            if total > MAX_YAML_NODES:
                raise PayloadTooLarge(
                    f"'{filename}' expands to more than {MAX_YAML_NODES:,} YAML nodes through "
                    "its aliases; refused (a locale file needs no alias bomb)",
                    field="file",
                    limit=MAX_YAML_NODES,
                )
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in active:
            raise _yaml_error(filename, _Problem("an alias refers to a node containing it", node))
        tag = str(getattr(node.tag, "value", node.tag))
        if tag not in _YAML_TAGS:
            raise _yaml_error(
                filename,
                _Problem(f"the tag {node.tag!s} is not accepted (only YAML's standard ones)", node),
            )
        active.add(key)
        stack.append((node, True))
        if isinstance(node, MappingNode | SequenceNode):
            stack += [(c, False) for c in _node_children(node) if id(c) not in sizes]


class _Problem(Exception):
    def __init__(self, problem: str, node: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = node.start_mark


def _node_children(node: Any) -> list[Any]:
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _load_yaml(filename: str, text: str) -> tuple[Any, Any]:
    """The file's data (ruamel's round-trip types) and its YAML object, or a 4xx."""
    from ruamel.yaml.error import YAMLError

    yaml = _yaml(filename)
    try:
        constructor, parser = yaml.get_constructor_parser(io.StringIO(text))
        try:
            node = constructor.composer.get_single_node()
            if node is None:
                raise InvalidRequest(f"'{filename}' holds no YAML document", field="file")
            _check_nodes(filename, node)
            data = constructor.construct_document(node)
        finally:
            parser.dispose()
            yaml.reader.reset_reader()
            yaml.scanner.reset_scanner()
    except YAMLError as exc:
        raise _yaml_error(filename, exc) from exc
    except RecursionError as exc:  # the composer is bounded; a scalar's resolver is not ours
        raise _too_deep(filename, "") from exc
    return data, yaml


def _items(container: Any) -> Iterator[tuple[Any, Any]]:
    """A YAML mapping's own items (not those merged in with `<<`), or a list's, by index."""
    from ruamel.yaml.comments import CommentedMap

    if isinstance(container, CommentedMap):
        return iter(list(container.non_merged_items()))
    return iter(list(enumerate(container)))


@dataclass
class _Place:
    """Where a YAML string is: its container and key (or index)."""

    container: Any
    key: Any


def _open_yaml(filename: str, text: str, bom: str) -> Opened:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    data, yaml = _load_yaml(filename, text)
    if not isinstance(data, CommentedMap | CommentedSeq):
        raise InvalidRequest(
            f"'{filename}' holds a YAML scalar, not a catalogue: a locale file "
            "is a mapping of messages",
            field="file",
        )
    icu = bool(_ICU_HAS_CHOICE.search(text))
    catalogue = _Catalogue()
    places: dict[int, tuple[int, list[_Place]]] = {}  # id(string) -> (node, places)
    seen: set[int] = {id(data)}
    # The strings in the file's order: a stack of the open containers' items.
    stack: list[tuple[Any, Iterator[tuple[Any, Any]]]] = [(data, _items(data))]
    count = 0
    while stack:
        container, items = stack[-1]
        item = next(items, None)
        if item is None:
            stack.pop()
            continue
        key, value = item
        if isinstance(value, str):
            if _skipped_description(container, key):
                continue
            count += 1
            _strings_bound(filename, count)
            if id(value) not in places:
                places[id(value)] = (catalogue.add(str(value), icu), [])
            places[id(value)][1].append(_Place(container, key))
        elif isinstance(value, CommentedMap | CommentedSeq) and id(value) not in seen:
            seen.add(id(value))  # an alias's strings are its anchor's
            if len(stack) >= MAX_DEPTH:
                raise _too_deep(filename, "")
            stack.append((value, _items(value)))
    mapping, sequence, offset = _indentation(text)
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    explicit_start = _explicit_start(text)
    rails_key = _rails_key(data)

    def save(translation: Translation) -> bytes:
        flagged = _warned(translation)
        for node_index, where in places.values():
            node = catalogue.nodes[node_index]
            if not node.translated:
                continue
            old = where[0].container[where[0].key]
            new = _like(old, node.render(translation.texts))
            for place in where:
                place.container[place.key] = new
                codes = flagged.get(node.doc) if node.doc is not None else None
                if codes:
                    _comment(place, "tolk: check this translation (" + ", ".join(codes) + ")")
        if rails_key is not None:
            _rename(data, rails_key, translation)
        out = io.StringIO()
        yaml.explicit_start = explicit_start
        yaml.dump(data, out)
        written = out.getvalue()
        if not text.endswith("\n"):
            written = written.rstrip("\n")
        return (bom + written).encode("utf-8")

    return Opened(
        lambda cut: catalogue.docs, catalogue.characters, save, " ".join(catalogue.sample)
    )


_KEY_ONLY = re.compile(r"[^#]*:\s*(?:#.*)?")


def _indentation(text: str) -> tuple[int, int, int]:
    """The file's block indentation as ruamel.yaml's indent() takes it: a mapping's, a
    sequence item's content and its dash's offset, each from the first line that shows it
    (ruamel.yaml.util.load_yaml_guess_indent reports the sequence's for both)."""
    mapping = sequence = offset = None
    key_indent = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        lead = len(line) - len(line.lstrip(" "))
        dash = stripped == "-" or stripped.startswith("- ")
        if key_indent is not None and lead >= key_indent:
            if dash and sequence is None:
                offset = lead - key_indent
                sequence = offset + 1 + len(stripped[1:]) - len(stripped[1:].lstrip(" "))
            elif not dash and mapping is None and lead > key_indent:
                mapping = lead - key_indent
        key_indent = lead if not dash and _KEY_ONLY.fullmatch(stripped) else None
        if mapping is not None and sequence is not None:
            break
    offset = offset or 0
    return mapping or 2, max(sequence or offset + 2, offset + 2), offset


def _explicit_start(text: str) -> bool:
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("%"):
            continue
        return stripped == "---" or stripped.startswith("--- ")
    return False


def _like(old: Any, text: str) -> Any:
    """The translation as a string of the old one's style (quotes, block), anchor kept."""
    from ruamel.yaml.scalarstring import ScalarString

    if not isinstance(old, ScalarString):
        return text
    new = type(old)(text)
    anchor = old.yaml_anchor()
    if anchor is not None and anchor.value:
        new.yaml_set_anchor(anchor.value, always_dump=anchor.always_dump)
    return new


def _comment(place: _Place, comment: str) -> None:
    """An end-of-line comment on a value that has none (and is not a block scalar, after
    which it would stand on a line of its own)."""
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString

    container = place.container
    if place.key in container.ca.items:
        return
    if isinstance(container[place.key], LiteralScalarString | FoldedScalarString):
        return
    if isinstance(container, CommentedMap) and not isinstance(place.key, str):
        return
    container.yaml_add_eol_comment(comment, place.key)


def _rails_key(data: Any) -> str | None:
    """The single top-level key if it names a language (Rails' `en:`), else None."""
    from ruamel.yaml.comments import CommentedMap

    if not isinstance(data, CommentedMap):
        return None
    keys = [k for k, _ in data.non_merged_items()]
    if len(keys) != 1 or not isinstance(keys[0], str) or not _LANGUAGE_KEY.fullmatch(keys[0]):
        return None
    return keys[0]


def _rename(data: Any, key: str, translation: Translation) -> None:
    """`en:` as `de:` when it is the source language (its primary subtag, or its tag)."""
    source = translation.source
    wanted = key.replace("_", "-").lower()
    if wanted not in (source.tag.lower(), source.code.lower()):
        return
    target = translation.target.tag
    if "_" in key:
        target = target.replace("-", "_")
    if target == key:
        return
    comments = data.ca.items.pop(key, None)
    data.insert(0, target, data.pop(key))
    if comments is not None:
        data.ca.items[target] = comments
