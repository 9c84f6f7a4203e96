"""The engine work of a request's documents, pass by pass (tolk.translation.service runs it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tolk.translation.document import Document, Rendered
from tolk.translation.formats import Splitter
from tolk.translation.segment import Segmented


@dataclass(frozen=True)
class Done:
    """One segment's translation (cleaned, outer whitespace kept) and its token counts
    (of every try); `problems`: what the output checks still found in it, `found`: what
    they found in the first try, `retried`: whether it was tried twice; `alternatives`:
    other outputs of it that passed the checks, when the request asked for some."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    source_tokens: int
    problems: tuple[str, ...] = ()
    found: tuple[str, ...] = ()
    retried: bool = False
    alternatives: tuple[str, ...] = ()
    from_memory: bool = (
        False  # came from the segment cache (tolk.store.segment_cache), not the engine
    )
    looked_up: bool = False  # was looked up in the segment cache (and missed)
    from_tm: bool = (
        False  # an exact match in the request's translation memory (tolk.store.memories)
    )


Via = Literal["whole", "plain", "runs", "original"]


class DocumentPlan:
    """The engine work of a request's documents, in passes. First every unit that goes to
    the model whole, with placeholders for its markup. A unit whose placeholders did not
    come back (the service has retried it once by then) is translated again as one piece
    without its emphasis (`Unit.plain`): the sentence stays whole and its words right, its
    bold and italics are dropped (links, images and code kept), and the text is flagged
    `markup_dropped`. Only what
    even that cannot keep, and units over the budget, go run by run: their text runs cut like
    text, the markup where it was. Identical segments are translated once.

    Not `whole` (the pair's units rarely keep their paired markup: tolk.translation.watch),
    units with emphasis start without it, their `plain` text (flagged `markup_dropped` as if
    they had fallen back there). `split` (the model does not write the target language:
    its whole-sentence tries are the pass's longest generations and rarely usable), every
    unit with inline markup goes run by run from the start (flagged `markup_split` as if it
    had fallen back there). `judged()` tells, after each `restore`, whether each unit with
    emphasis sent whole kept it."""

    def __init__(
        self,
        docs: Sequence[Document],
        cut: Splitter,
        fits: Callable[[str], bool],
        whole: bool = True,
        split: bool = False,
    ) -> None:
        self.docs = docs
        self._cut = cut
        self._cuts: dict[str, Segmented] = {}
        first: dict[str, None] = {}
        runs: dict[str, None] = {}
        # Where each unit stands: how it is (to be) translated.
        self.via: dict[tuple[int, int], Via] = {}
        self.fell_back: set[tuple[int, int]] = set()  # went run by run for their markup
        # Units with emphasis: what `whole` decides for (the pair's watch takes a turn).
        self.emphasised = 0
        for d, doc in enumerate(docs):
            for u, unit in enumerate(doc.units):
                # (A unit without emphasis has no plain text: it goes whole.)
                via: Via = "plain" if not whole and unit.plain is not None else "whole"
                text = unit.masked if via == "whole" else unit.plain
                if split and unit.tagged and unit.runs:
                    self.fell_back.add((d, u))
                    text = None
                elif unit.tagged and unit.plain is not None:
                    self.emphasised += 1
                if text is not None and (doc.cut_to_fit or fits(text)):
                    first[text] = None
                    self.via[(d, u)] = via
                else:
                    self.via[(d, u)] = "runs"
                    runs |= dict.fromkeys(s for run in unit.runs for s in self.cut(run).segments)
        # The first pass: units whole (or without emphasis: `whole`) and the runs of those
        # over the budget.
        self.first = list(first | runs)
        # A whole unit's segment -> its plain text, the next pass's segment if its
        # placeholders do not come back (started early beside the markup retry: run.Flow).
        self.fallbacks = {
            unit.masked: unit.plain
            for d, doc in enumerate(docs)
            for u, unit in enumerate(doc.units)
            if self.via[(d, u)] == "whole" and unit.masked is not None and unit.plain is not None
        }
        self.outputs: list[dict[int, Rendered]] = [{} for _ in docs]
        self._judged: list[bool] = []  # units with emphasis sent whole: kept it (judged())

    def cut(self, run: str) -> Segmented:
        """A text run cut into segments (once: cutting measures tokens)."""
        if run not in self._cuts:
            self._cuts[run] = self._cut(run)
        return self._cuts[run]

    def _segments(self, key: tuple[int, int]) -> list[str]:
        unit = self.docs[key[0]].units[key[1]]
        via = self.via[key]
        if via == "whole":
            return [unit.masked or ""]
        if via == "plain":
            return [unit.plain or ""]
        if via == "runs":
            return [s for run in unit.runs for s in self.cut(run).segments]
        return []

    def restore(self, done: Mapping[str, Done]) -> list[str]:
        """Put the translations in `done` in place where they keep their markup; a unit
        that does not moves on (whole -> plain -> runs). Returns the segments still to
        translate: call again with them translated until it returns none, then `render`."""
        judged: set[str] = set()  # (an output shared by identical units is judged once)
        for (d, u), via in self.via.items():
            unit = self.docs[d].units[u]
            if via not in ("whole", "plain") or (u in self.outputs[d]):
                continue
            text = unit.masked if via == "whole" else unit.plain
            if text not in done:
                continue
            paired, made = via == "whole", done[text or ""]
            restored = unit.restore(made.text, paired=paired)
            kept = restored is not None and unit.valid(restored, paired=paired)
            if paired and unit.plain is not None and text not in judged:
                # What the watch decides (units with emphasis), from the engine's outputs
                # (not the segment cache's or a translation memory's).
                judged.add(text or "")
                if not (made.from_memory or made.from_tm):
                    self._judged.append(kept)
            if kept:
                assert restored is not None
                self.outputs[d][u] = restored
            else:
                self.via[(d, u)] = "plain" if paired and unit.plain is not None else "runs"
                self.fell_back.add((d, u))
        needed = {
            s: None
            for key in sorted(self.via)
            if key[1] not in self.outputs[key[0]]
            for s in self._segments(key)
        }
        return [s for s in needed if s not in done]

    def judged(self) -> list[bool]:
        """Whether each unit with emphasis sent whole (a distinct text, translated by the
        engine) and judged since the last call kept its markup (its placeholders back, first
        try or markup retry)."""
        judged, self._judged = self._judged, []
        return judged

    def _runs_translated(self, done: Mapping[str, Done]) -> Callable[[str], str]:
        """A text run's translation: its segments' in `done`, joined as the run was cut."""

        def translated(run: str) -> str:
            cut = self.cut(run)
            return cut.join([done[s].text for s in cut.segments])

        return translated

    def render(self, done: Mapping[str, Done]) -> list[str]:
        for (d, u), via in self.via.items():
            if u in self.outputs[d]:
                continue
            unit = self.docs[d].units[u]
            segments = self._segments((d, u))
            if via != "runs" or any(s not in done for s in segments):
                self.via[(d, u)] = "original"
                self.outputs[d][u] = unit.original()
                continue
            rendered = unit.with_runs(self._runs_translated(done))
            # Kept as it was rather than returned with broken markup.
            if unit.valid(rendered):
                self.outputs[d][u] = rendered
            else:
                self.via[(d, u)] = "original"
                self.outputs[d][u] = unit.original()
        return [doc.render(self.outputs[d]) for d, doc in enumerate(self.docs)]

    def alternatives(self, done: Mapping[str, Done], wanted: int) -> list[list[str]]:
        """Per document (after `render`), up to `wanted` other translations: the k-th puts
        each segment's k-th alternative where the segment has one, its translation where
        not, each unit the way `render` put it; a unit whose markup an alternative cannot
        keep keeps its translation. Distinct, and none the same as the translation."""
        out: list[list[str]] = [[] for _ in self.docs]
        if not wanted:
            return out
        chosen = [doc.render(self.outputs[d]) for d, doc in enumerate(self.docs)]
        for k in range(wanted):
            variant = {
                s: dataclasses.replace(g, text=g.alternatives[k])
                for s, g in done.items()
                if len(g.alternatives) > k
            }
            if not variant:
                break
            for d, text in enumerate(self._render_variant({**done, **variant})):
                if text.strip() and text != chosen[d] and text not in out[d]:
                    out[d].append(text)
        return out

    def _render_variant(self, done: Mapping[str, Done]) -> list[str]:
        """The documents with `done`'s texts, each unit by the way `render` chose, without
        changing what `render` put in place."""
        rendered: list[str] = []
        for d, doc in enumerate(self.docs):
            outputs = dict(self.outputs[d])
            for u, unit in enumerate(doc.units):
                via = self.via[(d, u)]
                if via in ("whole", "plain"):
                    text = unit.masked if via == "whole" else unit.plain
                    paired = via == "whole"
                    found = done.get(text or "")
                    again = found and unit.restore(found.text, paired=paired)
                    if again and unit.valid(again, paired=paired):
                        outputs[u] = again
                elif via == "runs":
                    again = unit.with_runs(self._runs_translated(done))
                    if unit.valid(again):
                        outputs[u] = again
            rendered.append(doc.render(outputs))
        return rendered

    def warnings(self, done: Mapping[str, Done]) -> list[dict[str, int]]:
        """Per document: each warning code and how many of its units have it (after
        `render`): the problems of the segments its text came from, and how markup fared."""
        out: list[dict[str, int]] = [{} for _ in self.docs]
        for (d, u), via in self.via.items():
            unit = self.docs[d].units[u]
            codes: set[str] = set()
            for s in self._segments((d, u)):
                if s in done:
                    codes |= set(done[s].problems)
            if via == "plain":
                codes.add("markup_dropped")
            elif via == "runs" and (d, u) in self.fell_back:
                codes.add("markup_split")
            elif via == "original" and unit.runs:
                codes.add("untranslated")
            for code in codes:
                out[d][code] = out[d].get(code, 0) + 1
        return out
