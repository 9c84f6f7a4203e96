"""Write docs/configuration.md from the fields of src/tolk/config.py (tolk.config_reference).

    .venv/bin/python scripts/config-reference.py           # rewrite docs/configuration.md
    .venv/bin/python scripts/config-reference.py --check   # exit 1 if it is out of date

tests/unit/test_config_reference.py runs the same comparison as --check.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tolk.config_reference import DOCUMENT, render

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    target = ROOT / DOCUMENT
    text = render()
    if "--check" in argv:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            sys.stderr.write(f"{DOCUMENT} is out of date: run scripts/config-reference.py\n")
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    sys.stderr.write(f"wrote {DOCUMENT}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
