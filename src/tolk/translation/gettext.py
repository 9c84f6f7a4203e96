"""gettext PO and POT files (polib): every entry's msgid translated into its msgstr.

What a software team sends: the template (.pot) or a language's catalogue (.po) with entries
still to translate. polib reads and writes the format (quoting, escapes, comments, flags,
plural forms, obsolete entries); what is written by hand here is only which entries are
translated and how their format placeholders travel:

- The header entry (msgid "") is not translated; its `Language` becomes the target's.
- An entry is translated when its msgstr is empty or it is `fuzzy`; a translated one (a
  human's) is kept as it is; obsolete entries (`#~`) are left alone.
- A plural entry's msgstr[0] is the msgid's translation and every other form the
  msgid_plural's (tolk translates the two English forms; a language with more forms gets the
  plural one in each, for a translator to refine).
- Placeholders (`%s`, `%(count)d`, `%1$s`, `{name}`, `{0}`, `%%`) go to the model as
  placeholders (tolk.translation.document's atoms), so each comes back exactly once and as
  written, or the entry is translated around them run by run.
- An entry whose translation tolk's checks flag (wrong language, echo, loop, lost markup) is
  marked `fuzzy`: gettext's own "needs review", which msgfmt leaves out of a build.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polib  # type: ignore[import-untyped]

from tolk.errors import InvalidRequest, PayloadTooLarge
from tolk.translation.document import Document, Piece, Tag, Text, Unit, has_words, identity

MAX_ENTRIES = 50_000  # entries a file may have (a large application's catalogue: ~10,000)
MAX_FORMS = 8  # plural forms a Plural-Forms header may declare (Arabic has 6)

# printf-style (C, Python's %, positional %1$s) and brace-style ({name}, {0}, {0:.2f})
# placeholders; bounded, so matching is linear in the text.
PLACEHOLDER = re.compile(
    r"%%"
    r"|%(?:\d{1,3}\$|\([^()\s]{1,64}\))?[-+ #0']{0,5}(?:\d{1,4}|\*)?(?:\.(?:\d{1,4}|\*))?"
    r"(?:hh|ll|[hlLqjzt])?[diouxXeEfFgGcrsaAp@]"
    r"|\{[A-Za-z0-9_.\[\]]{0,64}(?:![rsa])?(?::[^{}\s]{0,32})?\}"
)
_NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")


@dataclass
class Catalogue:
    """A PO file opened: the entries to translate, each with the texts that are its
    documents (its msgid, and its msgid_plural if it has one)."""

    po: Any  # polib.POFile
    entries: list[Any]  # polib.POEntry, those translated
    sources: list[str]  # one per document, in order: each entry's msgid [, msgid_plural]
    header_comment: bool  # whether the source began with a comment (polib adds one)


def open_catalogue(filename: str, text: str) -> Catalogue:
    """`text` (a PO or POT file's content) parsed, or a 4xx naming what is wrong."""
    # polib.pofile takes a path or the content, and reads the path if one exists by that
    # name: an upload whose content is "/etc/passwd" would be read from this machine. With a
    # newline first the content names no file (checked, not assumed); polib skips blank lines.
    content = "\n" + text
    if os.path.isfile(content):
        raise InvalidRequest(f"'{filename}' is not a gettext PO file", field="file")
    try:
        po = polib.pofile(content, wrapwidth=0)
    except (OSError, ValueError, UnicodeError) as exc:
        raise InvalidRequest(
            f"'{filename}' is not a gettext PO file polib can read: {exc}", field="file"
        ) from exc
    if len(po) > MAX_ENTRIES:
        raise PayloadTooLarge(
            f"'{filename}' has {len(po)} entries; at most {MAX_ENTRIES} are accepted per file, "
            "split the catalogue",
            field="file",
            limit=MAX_ENTRIES,
        )
    entries, sources = [], []
    for entry in po:
        if entry.obsolete or not entry.msgid or not _to_translate(entry):
            continue
        entries.append(entry)
        sources.append(entry.msgid)
        if entry.msgid_plural:
            sources.append(entry.msgid_plural)
    return Catalogue(po, entries, sources, text.lstrip().startswith("#"))


def _to_translate(entry: Any) -> bool:
    if "fuzzy" in entry.flags:
        return True
    if entry.msgid_plural:
        return not any(entry.msgstr_plural.values())
    return not entry.msgstr


def document(source: str) -> Document:
    """One msgid as a document of one unit, its placeholders atoms (none without words)."""
    if not has_words(PLACEHOLDER.sub(" ", source)):
        return Document((), ())
    pieces: list[Piece] = []
    at = 0
    for n, match in enumerate(PLACEHOLDER.finditer(source), 1):
        if match.start() > at:
            pieces.append(Text(source[at : match.start()], source[at : match.start()]))
        pieces.append(Tag(match.group(), "atom", n))
        at = match.end()
    if at < len(source):
        pieces.append(Text(source[at:], source[at:]))
    return Document((0,), (Unit(tuple(pieces), identity),))


def save(catalogue: Catalogue, texts: Sequence[str], flagged: set[int], target: str) -> bytes:
    """The catalogue with its entries' translations (`texts`, one per source, an untranslated
    one as it was), those of `flagged` documents marked fuzzy, the header's Language the
    target's."""
    po = catalogue.po
    it = iter(enumerate(texts))
    for entry in catalogue.entries:
        index, singular = next(it)
        suspect = index in flagged
        if entry.msgid_plural:
            index, plural = next(it)
            suspect = suspect or index in flagged
            forms = _forms(po, entry)
            entry.msgstr_plural = {k: singular if k == 0 else plural for k in range(forms)}
        else:
            entry.msgstr = singular
        if suspect and "fuzzy" not in entry.flags:
            entry.flags.append("fuzzy")
        elif not suspect and "fuzzy" in entry.flags:
            entry.flags.remove("fuzzy")
            entry.previous_msgid = entry.previous_msgid_plural = entry.previous_msgctxt = None
    po.metadata["Language"] = target
    out = po.__unicode__()
    if not catalogue.header_comment and out.startswith("#\n"):
        out = out[2:]  # polib writes an empty header comment the source did not have
    return str(out).encode("utf-8")


def _forms(po: Any, entry: Any) -> int:
    """How many plural forms the catalogue's Plural-Forms declares (bounded), else the
    entry's own count (a template has two)."""
    found = _NPLURALS.search(po.metadata.get("Plural-Forms", ""))
    if found is not None:
        return max(1, min(int(found.group(1)), MAX_FORMS))
    return max(2, min(len(entry.msgstr_plural), MAX_FORMS))
