#!/usr/bin/env python3
"""The data for measuring what a translation memory does to quality (docs/benchmarks.md,
"Translation memories"): FLORES sentences as the memory, and near-duplicates of them (one word
left out) as the sentences to translate, scored against the memory's human references.

    python scripts/tm-quality.py --flores ../shared/quality/flores101 --pair en-de \\
        --sentences 24 --offset 0 --out .runtime/tm-quality

writes OUT/memory.tmx (the original sentences and their human translations) and OUT/data/
(en.txt: the near-duplicates, de.txt: the originals' references; aligned, as `tolk bench
quality --data` reads them). Near-duplicates are what a memory is for (an edited sentence of
a document translated before); FLORES has none of its own, so one word of each sentence is
left out: the word a third of the way in, in sentences of six words or more. The reference
then lacks that word's translation at most, for both systems alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from xml.sax.saxutils import escape

from tolk.bench.quality_data import language_files, read_lines


def near_duplicate(sentence: str) -> str | None:
    words = sentence.split()
    if len(words) < 6:
        return None
    del words[len(words) // 3]
    return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flores", type=Path, required=True)
    parser.add_argument("--pair", default="en-de")
    parser.add_argument("--sentences", type=int, default=24)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    source, target = args.pair.split("-")
    files = language_files(args.flores)
    originals = read_lines(files[source])[args.offset :]
    references = read_lines(files[target])[args.offset :]
    chosen = []
    for original, reference in zip(originals, references, strict=False):
        edited = near_duplicate(original)
        if edited is not None:
            chosen.append((original, reference, edited))
        if len(chosen) == args.sentences:
            break
    data = args.out / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / f"{source}.txt").write_text("".join(e + "\n" for _, _, e in chosen))
    (data / f"{target}.txt").write_text("".join(r + "\n" for _, r, _ in chosen))
    units = "".join(
        f'    <tu><tuv xml:lang="{source}"><seg>{escape(o)}</seg></tuv>'
        f'<tuv xml:lang="{target}"><seg>{escape(r)}</seg></tuv></tu>\n'
        for o, r, _ in chosen
    )
    (args.out / "memory.tmx").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n'
        f'  <header srclang="{source}" datatype="plaintext" segtype="sentence" '
        'creationtool="tolk scripts/tm-quality.py" creationtoolversion="1" o-tmf="none" '
        f'adminlang="en"/>\n  <body>\n{units}  </body>\n</tmx>\n'
    )
    sys.stdout.write(f"{len(chosen)} sentences: {args.out / 'memory.tmx'}, {data}\n")


if __name__ == "__main__":
    main()
