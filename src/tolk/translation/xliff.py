"""XLIFF 1.2 and 2.0 files (.xlf, .xliff): every source to translate given its target, the
inline codes kept with their ids, attributes and content, the rest of the file as it was.

What is translated:

- XLIFF 1.2 (urn:oasis:names:tc:xliff:document:1.2): each `trans-unit` whose `source` has
  text, unless it (or its nearest `group` with the attribute) says `translate="no"`. When
  the unit has a `seg-source` with `mrk mtype="seg"` children, each such segment is
  translated on its own and the target is the `seg-source` with each segment's content
  translated (the same `mid`s, the text between segments as it was); otherwise the source
  is one unit. The `target` is written after the `source` (after `seg-source`) or replaced
  in place, its attributes kept (an `xml:lang` on it becomes the target's tag), with
  `state="translated"`; a translation tolk flagged (`Translation.warnings`: wrong language,
  echo, loop, inline codes it could not keep) gets `state="needs-review-translation"` and a
  `<note from="tolk">` after the target saying why. Every `file` element's
  `target-language` becomes the target's tag.
- XLIFF 2.0 (urn:oasis:names:tc:xliff:document:2.0; 2.1 and 2.2 use the same core
  namespace): each `segment` of each `unit` not under `translate="no"` (file, group or unit,
  the nearest one that says) gets its `target` after its `source`, the segment
  `state="translated"`, or `state="initial"` and a `<note category="tolk">` in the unit's
  `notes` (made before `originalData` and the segments if the unit has none) for a flagged
  one. The root's `trgLang` becomes the target's tag.

What is left as it was: units under `translate="no"`, a target a person already wrote (it
has text other than the source's, and its state is none, `translated`, `signed-off`, `final`
or `reviewed`, or the 1.2 unit is `approved="yes"`: as gettext keeps a translated msgstr),
`ignorable`s, `alt-trans`, notes, contexts, skeletons, `bin-unit`s, metadata and elements
of other namespaces. A source with inline codes but no letters (`<x id="INTERPOLATION"/>`,
a number) is copied into the target as is. Earlier notes by tolk on a unit it translates
again are replaced.

Inline codes become tolk's placeholders (tolk.translation.document), so that the model can
move them where the target language's word order needs and every one comes back exactly
once:

- paired, around translated content: 1.2 `g` and `mrk`, 2.0 `pc` and `mrk` (the model sees
  `[words](1)`; their content is translated, nested codes included);
- standalone, kept whole with their content, which is native code and never translated:
  1.2 `x`, `bx`, `ex`, `ph`, `bpt`, `ept`, `it` (and the `sub` inside them), 2.0 `ph`, `sc`,
  `ec`, `sm`, `em`, `cp`; a protected `mrk` (1.2 `mtype="protected"`, 2.0 `translate="no"`);
  a paired code with no letters inside; comments, processing instructions and any element
  of another namespace.

The target gets copies of the source's codes, the same ids and attributes, in the order
the translation put them. If the model loses or garbles placeholders, the service falls back
itself (the unit again, then its text runs one by one with the codes where they were, then
the source: all flagged), so the codes always come back; should the rendered translation
still not hold every code exactly once and well nested, the target is the source copied and
the unit flagged. The file is valid XLIFF either way.

Whitespace: a source under `xml:space="preserve"` is given to the model exactly; otherwise
runs of XML whitespace are shown as one space (the layout of a pretty-printed source means
nothing), and what is not translated keeps its own.

The file is parsed by lxml with entities never resolved, no DTD loaded and no network;
a DOCTYPE that declares entities is refused (an entity expansion bomb is refused by libxml2
at its first reference, as malformed), as is anything but UTF-8. Serialized with lxml: the
prolog (declaration, comments, DOCTYPE) is the file's own text, the rest as lxml writes it
(attribute order and namespace prefixes kept, but an element's namespace declarations
written before its other attributes; character references, `&apos;`-style entities and
empty elements `<a></a>` may be written differently, with the same meaning). At most
MAX_UNITS units (and as many segments), inline codes nested at most MAX_DEPTH deep; every
walk is linear in the file.

Written by hand over lxml: no maintained Python library round-trips XLIFF's inline codes
as placeholders a model can move. translate-toolkit, the one maintained XLIFF library, is
GPL-2.0-or-later with a large dependency tree, its XLIFF store is 1.x, and it reads inline
codes into its own rich strings, not tolk's placeholders (tolk.translation.document); the
other XLIFF packages on PyPI (django-xliff, devxliff, py-xliff-converter...) are
unmaintained or only write XLIFF. What is hand-written is small: which elements are codes,
where the target goes, and the placeholders' round trip.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lxml import etree  # type: ignore[import-untyped]

from tolk import detect
from tolk.errors import InvalidRequest, PayloadTooLarge
from tolk.translation.document import Document, Piece, Tag, Text, Unit, has_words
from tolk.translation.files import Opened, decoded
from tolk.translation.results import Translation

NS12 = "urn:oasis:names:tc:xliff:document:1.2"
NS20 = "urn:oasis:names:tc:xliff:document:2.0"
XML_NS = "http://www.w3.org/XML/1998/namespace"
XML_SPACE = f"{{{XML_NS}}}space"
XML_LANG = f"{{{XML_NS}}}lang"
MAX_UNITS = 100_000  # units (and segments) a file may have
MAX_DEPTH = 32  # inline codes nested in one another (real files: 2 or 3)

# Placeholders' sources in a rendered translation: Unicode noncharacters, meant for a
# program's internal use (not in real text: a source holding one is left untranslated).
_OPEN, _CLOSE, _ATOM, _END = "\ufdd0", "\ufdd1", "\ufdd2", "\ufdd3"
_MARK = re.compile(f"([{_OPEN}{_CLOSE}{_ATOM}])(\\d+){_END}")
_MARKERS = re.compile(f"[{_OPEN}{_CLOSE}{_ATOM}{_END}]")
# What XML 1.0 cannot hold, and the placeholders' own characters: never from the model.
_UNSAFE = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff{_OPEN}{_CLOSE}{_ATOM}{_END}]")
_SPACE = re.compile(r"[ \t\r\n]+")
_KEPT_STATES = frozenset({"translated", "signed-off", "final", "reviewed"})
_LOST_CODES = "tolk could not put the inline codes back in place; the source was copied"


def escape(text: str) -> str:
    """Model output as XML text: no control characters, no placeholder characters."""
    return _UNSAFE.sub("", text)


@dataclass(frozen=True)
class Dialect:
    version: str
    ns: str
    unit: str  # the element that holds one translatable item
    paired: frozenset[str]  # inline elements around translatable content

    def tag(self, local: str) -> str:
        return f"{{{self.ns}}}{local}"

    def is_paired(self, element: Any) -> bool:
        """Whether `element` is a paired code whose content is text to translate."""
        name = etree.QName(element)
        if name.namespace != self.ns or name.localname not in self.paired:
            return False
        if name.localname == "mrk":
            if self.version == "1.2":
                return bool(element.get("mtype") != "protected")
            return bool(element.get("translate") != "no")
        return True


V12 = Dialect("1.2", NS12, "trans-unit", frozenset({"g", "mrk"}))
V20 = Dialect("2.0", NS20, "unit", frozenset({"pc", "mrk"}))
DIALECTS = {NS12: V12, NS20: V20}


@dataclass
class Segment:
    """One source (a 1.2 source or seg-source segment, a 2.0 segment's source) as one
    document: `index` its place among the documents (None when it has no words), `codes`
    the inline node each placeholder id stands for."""

    source: Any
    document: Document
    codes: dict[int, Any]
    text: str  # its text as the model sees it
    index: int | None = None


@dataclass
class Job:
    """A target to write: in `owner` (a 1.2 trans-unit, a 2.0 segment), after `after`.
    `base`: an element whose content the target starts as (a 1.2 seg-source), its segments
    at `slots`' child positions; without one, the target is the one segment's translation."""

    owner: Any
    after: Any
    target: Any  # the existing target element, or None
    segments: list[Segment]
    base: Any = None
    slots: list[int] = field(default_factory=list)
    unit: Any = None  # the 2.0 unit (its notes)
    label: str = ""  # how a note names the segment


class _Pieces:
    """A source element's content as a unit's pieces, its inline codes as placeholders."""

    def __init__(self, filename: str, dialect: Dialect, preserve: bool) -> None:
        self.filename = filename
        self.dialect = dialect
        self.preserve = preserve
        self.codes: dict[int, Any] = {}
        self.next = 1

    def text(self, source: str) -> Text:
        return Text(source if self.preserve else _SPACE.sub(" ", source), source)

    def content(self, element: Any, depth: int = 0) -> tuple[list[Piece], bool]:
        """The pieces of `element`'s content, and whether its text has words."""
        if depth > MAX_DEPTH:
            raise InvalidRequest(
                f"'{self.filename}' nests inline codes more than {MAX_DEPTH} deep (line "
                f"{element.sourceline}); flatten them and retry",
                field="file",
            )
        pieces: list[Piece] = []
        wordy = False
        if element.text:
            pieces.append(self.text(element.text))
            wordy = has_words(element.text)
        for child in element:
            n = self.next
            self.next += 1
            self.codes[n] = child
            inner: list[Piece] = []
            inner_wordy = False
            if isinstance(child.tag, str) and self.dialect.is_paired(child):
                inner, inner_wordy = self.content(child, depth + 1)
            if inner_wordy:
                pieces += [Tag(f"{_OPEN}{n}{_END}", "open", n), *inner]
                pieces.append(Tag(f"{_CLOSE}{n}{_END}", "close", n))
                wordy = True
            else:  # standalone, or paired around no words: kept whole
                for piece in inner:
                    if isinstance(piece, Tag):
                        self.codes.pop(piece.id, None)
                pieces.append(Tag(f"{_ATOM}{n}{_END}", "atom", n))
            if child.tail:
                pieces.append(self.text(child.tail))
                wordy = wordy or has_words(child.tail)
        return pieces, wordy


def segment(filename: str, dialect: Dialect, source: Any) -> Segment | None:
    """`source`'s content as a segment, or None when there is nothing in it (or it holds
    tolk's own placeholder characters, which could not be told from tolk's)."""
    if not source.text and len(source) == 0:
        return None
    builder = _Pieces(filename, dialect, _preserved(source))
    pieces, wordy = builder.content(source)
    texts = [p.text for p in pieces if isinstance(p, Text)]
    if any(_MARKERS.search(t) for t in texts):
        return None
    if not wordy and not "".join(texts).strip() and len(source) == 0:
        return None
    document = Document((0,), (Unit(tuple(pieces), escape),)) if wordy else Document((), ())
    return Segment(source, document, builder.codes, "".join(texts) if wordy else "")


def _preserved(element: Any) -> bool:
    """Whether `element`'s whitespace is preserved (its nearest xml:space says so)."""
    for node in _self_and_ancestors(element):
        space = node.get(XML_SPACE)
        if space is not None:
            return bool(space == "preserve")
    return False


def _translated(element: Any) -> bool:
    """Whether `element` is to be translated (its nearest `translate` attribute)."""
    for node in _self_and_ancestors(element):
        value = node.get("translate")
        if value is not None:
            return bool(value != "no")
    return True


def _self_and_ancestors(element: Any) -> Iterator[Any]:
    yield element
    yield from element.iterancestors()


def _has_content(element: Any) -> bool:
    return bool((element.text or "").strip()) or len(element) > 0


def _written(target: Any, source: Any, state: str | None) -> bool:
    """Whether `target` holds a translation a person wrote (kept): text other than the
    source's, in a state that is not waiting for a translation."""
    if target is None or not _has_content(target):
        return False
    if " ".join("".join(target.itertext()).split()) == " ".join("".join(source.itertext()).split()):
        return False  # a copy of the source (a tool's pre-fill)
    return state is None or state in _KEPT_STATES


def _parse(filename: str, data: bytes) -> Any:
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        strip_cdata=False,
        huge_tree=False,
    )
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        if "amplification" in str(exc) or "entity" in str(exc).lower():
            raise InvalidRequest(
                f"'{filename}' uses XML entities tolk does not expand ({exc}); XLIFF needs "
                "none: remove the DOCTYPE's entity declarations",
                field="file",
            ) from exc
        raise InvalidRequest(
            f"'{filename}' is not well-formed XML ({exc}); fix it or export the XLIFF again",
            field="file",
        ) from exc
    tree = root.getroottree()
    dtd = tree.docinfo.internalDTD
    if (dtd is not None and next(iter(dtd.iterentities()), None) is not None) or next(
        root.iter(etree.Entity), None
    ) is not None:
        raise InvalidRequest(
            f"'{filename}' declares or uses XML entities; XLIFF needs none and tolk does not "
            "expand them: remove the DOCTYPE's entity declarations",
            field="file",
        )
    encoding = (tree.docinfo.encoding or "UTF-8").upper()
    if encoding not in ("UTF-8", "UTF8", "US-ASCII", "ASCII"):
        raise InvalidRequest(
            f"'{filename}' declares the encoding {tree.docinfo.encoding}; save it as UTF-8 "
            "and retry",
            field="file",
        )
    return tree


def _dialect(filename: str, root: Any) -> Dialect:
    name = etree.QName(root)
    dialect = DIALECTS.get(name.namespace or "")
    if dialect is None or name.localname != "xliff":
        found = f"<{name.localname}> in " + (
            f"the namespace '{name.namespace}'" if name.namespace else "no namespace"
        )
        version = root.get("version")
        raise InvalidRequest(
            f"'{filename}' is not XLIFF 1.2 or 2.0: its root element is {found}"
            + (f" (version {version})" if version else "")
            + f"; tolk translates <xliff> in {NS12} or {NS20}",
            field="file",
            found=name.namespace or "",
        )
    return dialect


def _too_many(filename: str, count: int, what: str) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"'{filename}' has {count} {what}; at most {MAX_UNITS} are accepted per file, split it",
        field="file",
        limit=MAX_UNITS,
    )


def _jobs12(filename: str, root: Any) -> list[Job]:
    d = V12
    jobs = []
    for unit in root.iter(d.tag("trans-unit")):
        source = unit.find(d.tag("source"))
        if source is None or not _translated(unit):
            continue
        target = unit.find(d.tag("target"))
        state = None if target is None else target.get("state")
        if unit.get("approved") == "yes" and target is not None and _has_content(target):
            continue
        if _written(target, source, state):
            continue
        seg_source = unit.find(d.tag("seg-source"))
        slots = []
        if seg_source is not None:
            slots = [
                i
                for i, child in enumerate(seg_source)
                if child.tag == d.tag("mrk") and child.get("mtype") == "seg"
            ]
        if slots:
            found = [segment(filename, d, seg_source[i]) for i in slots]
            kept = [(i, s) for i, s in zip(slots, found, strict=True) if s is not None]
            if not kept:
                continue
            jobs.append(
                Job(
                    unit,
                    seg_source,
                    target,
                    [s for _, s in kept],
                    base=seg_source,
                    slots=[i for i, _ in kept],
                )
            )
            continue
        one = segment(filename, d, source)
        if one is not None:
            jobs.append(Job(unit, source, target, [one]))
    return jobs


def _jobs20(filename: str, root: Any) -> list[Job]:
    d = V20
    jobs = []
    for unit in root.iter(d.tag("unit")):
        if not _translated(unit):
            continue
        for n, seg in enumerate(unit.iterchildren(d.tag("segment")), 1):
            source = seg.find(d.tag("source"))
            if source is None:
                continue
            target = seg.find(d.tag("target"))
            if _written(target, source, seg.get("state")):
                continue
            one = segment(filename, d, source)
            if one is not None:
                label = f"segment {seg.get('id') or n}"
                jobs.append(Job(seg, source, target, [one], unit=unit, label=label))
    return jobs


def open_file(filename: str, data: bytes, max_unzipped: int) -> Opened:
    """An XLIFF file opened: each source (segment) to translate one document. (XLIFF is no
    archive: `max_unzipped` does not apply.)"""
    text, bom = decoded(filename, data)
    tree = _parse(filename, data)
    root = tree.getroot()
    dialect = _dialect(filename, root)
    units = sum(1 for _ in root.iter(dialect.tag(dialect.unit)))
    if units > MAX_UNITS:
        raise _too_many(filename, units, f"{dialect.unit} elements")
    jobs = _jobs12(filename, root) if dialect is V12 else _jobs20(filename, root)
    segments = [s for job in jobs for s in job.segments]
    if len(segments) > MAX_UNITS:
        raise _too_many(filename, len(segments), "segments")
    docs: list[Document] = []
    for s in segments:
        if s.document.units:
            s.index = len(docs)
            docs.append(s.document)
    texts = [s.text for s in segments if s.index is not None]

    def save(translation: Translation) -> bytes:
        flagged: dict[int, list[str]] = {}
        for warning in translation.warnings:
            flagged.setdefault(warning.text, []).append(warning.message)
        tag = translation.target.tag
        if dialect is V20:
            _drop_notes20(jobs)
        for job in jobs:
            problems = _write(dialect, job, translation.texts, flagged, tag)
            if dialect is V12:
                _mark12(job, problems)
            else:
                _mark20(job, problems)
        if dialect is V12:
            for element in root.iter(V12.tag("file")):
                element.set("target-language", tag)
        else:
            root.set("trgLang", tag)
        return bom.encode("utf-8") + _serialized(tree, text).encode("utf-8")

    sample = " ".join(texts)[: detect.MAX_CHARS]
    return Opened(lambda cut: docs, sum(len(t) for t in texts), save, sample)


def _write(
    dialect: Dialect, job: Job, texts: list[str], flagged: dict[int, list[str]], tag: str
) -> list[str]:
    """The job's target written (made after `job.after` if it has none); what tolk flagged
    in its segments, or found wrong putting them back."""
    target = job.target
    if target is None:
        target = etree.Element(dialect.tag("target"))
        _insert_after(job.after, target)
        job.target = target
    else:
        _clear(target)
    if target.get(XML_LANG) is not None:
        target.set(XML_LANG, tag)
    problems: list[str] = []
    if job.base is not None:
        _copy_content(job.base, target)
    places = [target] if job.base is None else [target[i] for i in job.slots]
    for place, seg in zip(places, job.segments, strict=True):
        _clear(place)
        if seg.index is None or not _fill(place, texts[seg.index], seg.codes):
            _clear(place)
            _copy_content(seg.source, place)
            if seg.index is not None:
                problems.append(_LOST_CODES)
        if seg.index is not None:
            problems += flagged.get(seg.index, [])
    return problems


def _fill(place: Any, rendered: str, codes: dict[int, Any]) -> bool:
    """`rendered` (a unit's translation, tolk's placeholders in it) as `place`'s content,
    each placeholder a copy of its code; False if one is unknown, repeated, missing or
    badly nested."""
    stack: list[tuple[Any, int]] = [(place, 0)]
    seen: set[int] = set()
    at = 0
    for match in _MARK.finditer(rendered):
        _append_text(stack[-1][0], rendered[at : match.start()])
        at = match.end()
        kind, n = match[1], int(match[2])
        code = codes.get(n)
        if code is None:
            return False
        if kind == _CLOSE:
            if stack[-1][1] != n:
                return False
            stack.pop()
            continue
        if n in seen:
            return False
        seen.add(n)
        container = stack[-1][0]
        if kind == _OPEN:
            opened = etree.SubElement(container, code.tag, attrib=dict(code.attrib))
            stack.append((opened, n))
        else:
            whole = copy.deepcopy(code)
            whole.tail = None
            container.append(whole)
    _append_text(stack[-1][0], rendered[at:])
    return len(stack) == 1 and seen == set(codes)


def _append_text(element: Any, text: str) -> None:
    if not text:
        return
    if len(element):
        last = element[-1]
        last.tail = (last.tail or "") + text
    else:
        element.text = (element.text or "") + text


def _clear(element: Any) -> None:
    element.text = None
    for child in list(element):
        element.remove(child)


def _copy_content(source: Any, place: Any) -> None:
    place.text = source.text
    for child in source:
        place.append(copy.deepcopy(child))  # (its tail with it)


def _mark12(job: Job, problems: list[str]) -> None:
    """A 1.2 target's state, and tolk's note on a flagged one (an earlier one replaced)."""
    unit, target = job.owner, job.target
    for old in unit.findall(V12.tag("note")):
        if old.get("from") == "tolk":
            unit.remove(old)
    if not problems:
        target.set("state", "translated")
        return
    target.set("state", "needs-review-translation")
    note = etree.Element(V12.tag("note"), attrib={"from": "tolk", "annotates": "target"})
    note.text = "tolk: " + "; ".join(dict.fromkeys(problems))
    _insert_after(target, note)


def _mark20(job: Job, problems: list[str]) -> None:
    """A 2.0 segment's state, and tolk's note in its unit's notes for a flagged one."""
    d, unit = V20, job.unit
    job.owner.set("state", "initial" if problems else "translated")
    if not problems:
        return
    note = etree.Element(d.tag("note"), attrib={"category": "tolk", "appliesTo": "target"})
    note.text = f"tolk, {job.label}: " + "; ".join(dict.fromkeys(problems))
    notes = unit.find(d.tag("notes"))
    if notes is not None:
        _append_child(notes, note)
        return
    # A unit's notes come before its originalData and segments (it has a segment: this one).
    places = (d.tag("originalData"), d.tag("segment"), d.tag("ignorable"))
    anchor = next(c for c in unit if c.tag in places)
    before = _space_before(anchor)
    notes = etree.Element(d.tag("notes"))
    anchor.addprevious(notes)
    notes.tail = before
    if before is not None:  # indented one step further than the unit's children
        own = _space_before(unit) or "\n"
        step = before[len(own) :] if before.startswith(own) and before != own else "  "
        notes.text = before + step
        note.tail = before
    notes.append(note)


def _drop_notes20(jobs: list[Job]) -> None:
    """tolk's earlier notes in the 2.0 units it translates again (an emptied `notes`
    removed: it must hold one)."""
    d = V20
    for unit in {id(j.unit): j.unit for j in jobs}.values():
        notes = unit.find(d.tag("notes"))
        if notes is None:
            continue
        for old in notes.findall(d.tag("note")):
            if old.get("category") == "tolk":
                notes.remove(old)
        if len(notes) == 0:
            unit.remove(notes)


def _insert_after(anchor: Any, element: Any) -> None:
    """`element` made `anchor`'s next sibling, indented as `anchor` is."""
    tail, indent = anchor.tail, _space_before(anchor)
    anchor.addnext(element)
    element.tail = tail
    if tail is not None and not tail.strip() and indent is not None:
        anchor.tail = indent


def _space_before(element: Any) -> str | None:
    """The whitespace just before `element` (its indentation), if that is all there is."""
    previous = element.getprevious()
    space = previous.tail if previous is not None else element.getparent().text
    return space if space is not None and not space.strip() else None


def _append_child(parent: Any, child: Any) -> None:
    """`child` appended to `parent`, indented as its last child is."""
    if len(parent):
        last = parent[-1]
        child.tail = last.tail
        last.tail = _space_before(last)
    else:
        parent.text = None
    parent.append(child)


def _serialized(tree: Any, text: str) -> str:
    """The document as text: its prolog (declaration, comments, DOCTYPE) as the file had
    it, the root element and what follows as lxml writes them."""
    root = tree.getroot()
    start = _root_start(text)
    if start is None:
        return str(etree.tostring(tree, encoding="unicode"))
    out = [text[:start], etree.tostring(root, encoding="unicode", with_tail=False)]
    for sibling in root.itersiblings():
        out += ["\n", etree.tostring(sibling, encoding="unicode", with_tail=False)]
    out.append(text[len(text.rstrip()) :])
    return "".join(out)


def _root_start(text: str) -> int | None:
    """Where the root element's start tag begins in a well-formed document's text: after
    its declaration, comments, processing instructions and DOCTYPE (None if not found)."""
    at = 0
    while True:
        at = text.find("<", at)
        if at < 0:
            return None
        if text.startswith("<?", at):
            end, size = text.find("?>", at), 2
        elif text.startswith("<!--", at):
            end, size = text.find("-->", at + 4), 3
        elif text.startswith("<!", at):  # the DOCTYPE, its internal subset in brackets
            close = text.find(">", at)
            bracket = text.find("[", at, close if close >= 0 else len(text))
            if bracket >= 0:
                subset = text.find("]", bracket)
                close = text.find(">", subset) if subset >= 0 else -1
            end, size = close, 1
        else:
            return at
        if end < 0:
            return None
        at = end + size
