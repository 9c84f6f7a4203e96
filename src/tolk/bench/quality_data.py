"""What `tolk bench quality` translates: aligned sentences, a markup set made from them, and
the case-study articles cut to size, each with what its output is judged against.

Sentences come from a directory of aligned files, one sentence a line, line N the same
sentence in every file: FLORES-101's layout (../shared/quality/flores101 in the development
checkout; `--data`, else TOLK_QUALITY_DATA, names the directory). A file's language
is its name, an ISO 639-3 code as FLORES writes it (`eng.txt`, `npi.txt`, `cmn_Hans.txt`) or
a plain tag (`en.txt`); tolk.languages reads either, and files whose name is no language
(a licence) are left out.

The markup set is made from the English sentences, deterministically: three words of each
wrapped in markdown's `**bold**`, `[link](https://example.com/N)` and `` `code` ``, or in
HTML's `<b>`, `<a href>` and `<em>`. A translation of such a unit keeps its markup when it
parses to the same elements (HTML: the same tag names in the same order, the same hrefs;
markdown: as many strong, emphasis and code spans, the same link targets), and has glued
words when a letter follows a closing element directly where the source had a space (a
miss that only shows in scripts that space their words, so not counted for zh and ja).

Documents are the case-study articles and their human Nepali translation. They are not
aligned line by line, so a prefix of an article (`--document-chars`) is scored against the
prefix of the Nepali holding at least the same share of its characters: both are
approximate at their ends, and only the comparison between split modes, which all get the
same source and reference, is exact.
"""

from __future__ import annotations

import html
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Literal

import pyromark

from tolk.languages import InvalidLanguageCode, lang
from tolk.translation.segment import SPLIT_MODES, SplitMode

Kind = Literal["sentence", "markdown", "html", "document"]
KINDS: tuple[Kind, ...] = ("sentence", "markdown", "html", "document")
# The sentences' directory when `--data` is not given. The data is not shipped: in the
# development checkout it is ../shared/quality/flores101 (beside the repository).
DATA_ENV = "TOLK_QUALITY_DATA"
DATA_HINT = (
    "FLORES-101's aligned files are not shipped with tolk (in the development checkout they "
    f"are in ../shared/quality/flores101): give --data DIR, or set {DATA_ENV}=DIR"
)
DEFAULT_PAIRS = "en-de,en-fr,en-es,en-zh,en-ne,de-en"
ARTICLES = ("part1", "part2")
# Scripts written without spaces between words: glued words are not a fault there.
UNSPACED = frozenset({"zh", "ja", "th", "lo", "km", "my"})
_MARKUP_CHARS = re.compile(r"[*_`\[\]<>#\\|~]")
_WORD = re.compile(r"(?<![\w'-])[^\W\d_]{3,}(?![\w'-])")
_LETTER = r"[^\W\d_]"


@dataclass(frozen=True)
class Unit:
    """One text to translate, and what its output is judged against."""

    kind: Kind
    source_lang: str
    target_lang: str
    index: int  # the line in the data files (0-based); a document's article number
    source: str
    reference: str = ""  # none for the markup set
    split: SplitMode | None = None  # documents: the split mode asked for

    @property
    def pair(self) -> str:
        return f"{self.source_lang}-{self.target_lang}"

    @property
    def format(self) -> Literal["text", "markdown", "html"]:
        return "markdown" if self.kind == "markdown" else "html" if self.kind == "html" else "text"


def default_data() -> Path | None:
    """The data directory that TOLK_QUALITY_DATA names, or None when it is unset (or empty)."""
    value = os.environ.get(DATA_ENV, "").strip()
    return Path(value).expanduser() if value else None


def tag_of(path: Path) -> str | None:
    """The tolk tag a data file's name stands for (None if it names no language)."""
    try:
        return lang(path.stem).code
    except InvalidLanguageCode:
        return None


def language_files(folder: Path) -> dict[str, Path]:
    """tag -> file for every `*.txt` in `folder` named for a language."""
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("*.txt")):
        tag = tag_of(path)
        if tag is None:
            continue
        if tag in found:
            raise ValueError(f"{found[tag].name} and {path.name} are both '{tag}'")
        found[tag] = path
    if not found:
        raise ValueError(f"no language files (eng.txt, en.txt, ...) in {folder}")
    return found


def parse_pairs(text: str) -> list[tuple[str, str]]:
    """'en-de,de>en' -> [('en', 'de'), ('de', 'en')], each tag normalised."""
    pairs = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        parts = item.split(">") if ">" in item else item.split("-")
        if len(parts) != 2:
            raise ValueError(f"'{item}' is not a pair: write en-de or en>de")
        pairs.append((lang(parts[0]).code, lang(parts[1]).code))
    if not pairs:
        raise ValueError("no pairs given")
    return list(dict.fromkeys(pairs))


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def sentences(
    folder: Path, pairs: Sequence[tuple[str, str]], count: int, offset: int = 0
) -> list[Unit]:
    """Lines offset..offset+count of each pair's source and reference files, the pairs taking
    turns (a line of each, then the next line of each) as a server's mixed traffic would:
    in one closed loop the pair with the longest outputs then shares the engine with the
    others instead of holding every client at once."""
    files = language_files(folder)
    missing = sorted({t for pair in pairs for t in pair} - files.keys())
    if missing:
        raise ValueError(f"no file for {', '.join(missing)} in {folder} (has {sorted(files)})")
    lines = {tag: read_lines(path) for tag, path in files.items()}
    if len({len(v) for v in lines.values()}) != 1:
        raise ValueError(f"the files in {folder} have different numbers of lines")
    chosen = range(offset, min(offset + count, len(next(iter(lines.values())))))
    return [
        Unit("sentence", source, target, i, lines[source][i], lines[target][i])
        for i in chosen
        for source, target in pairs
        if lines[source][i].strip()
    ]


def _three_words(sentence: str) -> list[re.Match[str]] | None:
    """Three words of the sentence, spread over it, none adjacent; None if it has too few
    or already holds characters that could be markup."""
    if _MARKUP_CHARS.search(sentence):
        return None
    words = list(_WORD.finditer(sentence))
    if len(words) < 6:
        return None
    n = len(words)
    return [words[n // 6], words[n // 2], words[(5 * n) // 6]]


def _wrap(
    sentence: str,
    words: list[re.Match[str]],
    wrappers: Sequence[tuple[str, str]],
    escape: Callable[[str], str] = str,
) -> str:
    out, last = [], 0
    for word, (before, after) in zip(words, wrappers, strict=True):
        out += [escape(sentence[last : word.start()]), before, escape(word.group()), after]
        last = word.end()
    return "".join([*out, escape(sentence[last:])])


def markdown_of(sentence: str, number: int) -> str | None:
    words = _three_words(sentence)
    link = ("[", f"](https://example.com/{number})")
    return None if words is None else _wrap(sentence, words, [("**", "**"), link, ("`", "`")])


def html_of(sentence: str, number: int) -> str | None:
    words = _three_words(sentence)
    if words is None:
        return None
    link = (f'<a href="https://example.com/{number}">', "</a>")

    def escape(text: str) -> str:
        return html.escape(text, quote=False)

    return _wrap(sentence, words, [("<b>", "</b>"), link, ("<em>", "</em>")], escape)


def markup_units(
    english: Sequence[str], targets: Sequence[str], count: int, offset: int = 0
) -> list[Unit]:
    """`count` markdown and `count` HTML units from the English lines from `offset` on (the
    first that have words enough and no markup characters), for each target."""
    units = []
    for kind, make in (("markdown", markdown_of), ("html", html_of)):
        made = 0
        for i in range(offset, len(english)):
            text = make(english[i], i + 1)
            if text is None:
                continue
            units += [Unit(kind, "en", t, i, text) for t in targets]  # type: ignore[arg-type]
            made += 1
            if made == count:
                break
    return units


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs).get("href")))

    def handle_endtag(self, tag: str) -> None:
        self.tags.append(("/" + tag, None))


def html_elements(text: str) -> list[tuple[str, str | None]]:
    """The tags of an HTML fragment in order, starts with their href, ends as '/name'."""
    parser = _Tags()
    parser.feed(text)
    parser.close()
    return parser.tags


def markdown_elements(text: str) -> Counter[str]:
    """How many strong, emphasis and code spans a markdown text has, and its link targets."""
    found: Counter[str] = Counter()
    for event in pyromark.events(text):
        if not isinstance(event, dict):
            continue
        if "Code" in event:
            found["code"] += 1
        start = event.get("Start")
        if start in ("Strong", "Emphasis"):
            found[str(start).lower()] += 1
        elif isinstance(start, dict) and "Link" in start:
            found["link " + str(start["Link"]["dest_url"])] += 1
    return found


def markup_intact(kind: Kind, source: str, output: str) -> bool:
    if kind == "html":
        return html_elements(source) == html_elements(output)
    return markdown_elements(source) == markdown_elements(output)


_GLUE = {
    "markdown": re.compile(rf"(?:\*\*[^*\n]+?\*\*|\[[^\]\n]*\]\([^)\s]*\)|`[^`\n]+`)(?={_LETTER})"),
    "html": re.compile(rf"</(?:b|a|em|strong|i|code)>(?={_LETTER})", re.IGNORECASE),
}


def glued(kind: Kind, source: str, output: str, target_lang: str) -> bool | None:
    """Whether a letter follows a closing element directly more often than in the source
    (None where the target script does not space its words)."""
    if target_lang in UNSPACED or kind not in _GLUE:
        return None
    pattern = _GLUE[kind]
    return len(pattern.findall(output)) > len(pattern.findall(source))


def _article(name: str, language: str) -> str:
    folder = resources.files("tolk") / "data" / "case_study"
    return (folder / f"{name}.{language}.txt").read_text(encoding="utf-8")


def _prefix_lines(text: str, chars: int) -> str:
    """Whole lines of `text` up to `chars` characters (at least the first non-empty one)."""
    kept: list[str] = []
    size = 0
    for line in text.splitlines():
        if size + len(line) > chars and any(k.strip() for k in kept):
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept).strip()


def _prefix_share(text: str, share: float) -> str:
    """The shortest prefix of whole lines holding at least `share` of the text's characters."""
    total = len(text)
    kept: list[str] = []
    size = 0
    for line in text.splitlines():
        if size >= share * total:
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept).strip()


def documents(chars: int | None, splits: Sequence[SplitMode] = SPLIT_MODES) -> list[Unit]:
    """Each article (en) with its human Nepali, once per split mode; `chars`: the first
    that many characters' worth of whole lines (and the matching share of the Nepali)."""
    units = []
    for number, name in enumerate(ARTICLES):
        english, nepali = _article(name, "en").strip(), _article(name, "ne").strip()
        if chars:
            source = _prefix_lines(english, chars)
            reference = _prefix_share(nepali, len(source) / len(english))
        else:
            source, reference = english, nepali
        units += [Unit("document", "en", "ne", number, source, reference, s) for s in splits]
    return units
