"""Guided decoding for a markup unit's retry: a regular expression that the model's output
must match, so that every placeholder it was shown comes back exactly once, in its place.

A unit whose placeholders did not come back is retried with its output constrained by vLLM's
structured outputs (`StructuredOutputsParams(regex=...)`, the llguidance backend): the model
still chooses every word, but at each step only tokens that keep the output a possible match
are allowed. The expression is built from the segment as the model is shown it
(`document.for_model`): links and code spans (`[words](1)`, `` `2` ``) or XML tags
(`<g1>words</g1>`, `<x2/>`), in the source's order (so nesting holds), with text between
them that has no placeholder syntax and is at most `run_limit` characters long for each run
of the source (twice its length, and half the segment's). The bound is per run on purpose:
with one loose bound a model that "wants" to drop a placeholder writes its translation, then
rambles on (new sentences, notes) until it may write the placeholder, or runs to its budget
(both seen with the 0.5B Qwen). Even so that model often rambles within the bounds, which is
why `checks.markup_guided` is off by default (docs/benchmarks.md, Quality).

Written by hand: the expression follows tolk's own placeholder protocol, which no library
knows; the matching itself is the engine's (llguidance), not tolk's.
"""

from __future__ import annotations

import re

from tolk.config import PlaceholderSyntax
from tolk.translation.document import PLACEHOLDER, for_model, shows_links

# The placeholders as the model is shown them: a link's opening bracket, its closing
# `](N)`, a code span; or tolk's own tags.
_SHOWN_LINKS = re.compile(r"\[|\]\(\d+\)|`\d+`")
_OPENING = re.compile(r"\[|<g\d+>")


def placeholder_regex(masked: str, syntax: PlaceholderSyntax = "links") -> str | None:
    """The expression a translation of `masked` (a segment with placeholders, tolk's form)
    must match, as the model is shown it; None if the segment has no placeholders or its
    own text uses the placeholder syntax's characters."""
    shown = for_model(masked.strip(), syntax)
    links = shows_links(masked.strip(), syntax)
    marker = _SHOWN_LINKS if links else PLACEHOLDER
    if not links and "<" in PLACEHOLDER.sub("", shown):
        return None
    markers = [m[0] for m in marker.finditer(shown)]
    if not markers:
        return None
    runs = marker.split(shown) if links else _text_runs(shown)
    text = "[^" + ("\\[\\]`" if links else "<") + ("" if "\n" in shown else "\\n") + "]"
    slack = sum(len(r) for r in runs) // 2 + 8
    parts = []
    for index, run in enumerate(runs):
        # A pair's content is never empty: the run right after an opening and before the
        # next placeholder holds words.
        opened = index > 0 and _OPENING.fullmatch(markers[index - 1]) is not None
        closing = index < len(markers) and not _OPENING.fullmatch(markers[index])
        least = 1 if opened and closing else 0
        parts.append(f"{text}{{{least},{run_limit(run, slack)}}}")
        if index < len(markers):
            parts.append(re.escape(markers[index]))
    return "".join(parts)


def _text_runs(shown: str) -> list[str]:
    return PLACEHOLDER.sub("\x00", shown).split("\x00")


def run_limit(run: str, slack: int) -> int:
    """The most characters of text the translation of one run of the source may have:
    twice its length, and `slack` (half the segment's text: words move across placeholders
    between languages)."""
    return 2 * len(run) + slack


__all__ = ["placeholder_regex", "run_limit"]
