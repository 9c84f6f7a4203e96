"""docs/configuration.md is generated from src/tolk/config.py (tolk.config_reference): the
committed file must be what the code generates, so the reference cannot drift. And the
manual's pages (README.md, docs/) link to files and headings that exist."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import REPO
from tolk.config_reference import DOCUMENT, UNDESCRIBED, render, undescribed_fields

ROOT = REPO
# Pages whose links are checked; docs/benchmarks.md and docs/security.md are link targets only.
PAGES = ["README.md", *(f"docs/{name}" for name in (
    "api.md", "compatibility.md", "configuration.md", "development.md", "models.md",
    "operations.md", "performance.md", "scale-out.md",
))]  # fmt: skip


def test_the_committed_reference_is_the_generated_one() -> None:
    committed = (ROOT / DOCUMENT).read_text(encoding="utf-8")
    assert committed == render(), (
        f"{DOCUMENT} differs from what src/tolk/config.py generates: run "
        "`.venv/bin/python scripts/config-reference.py` and commit the result"
    )


def test_every_field_is_in_the_reference() -> None:
    text = render()
    for path in undescribed_fields() | set(UNDESCRIBED):
        name = path.rsplit(".", 1)[-1]
        assert f"| `{name}` |" in text, path


def test_fallback_meanings_are_only_for_fields_without_a_description() -> None:
    # A field that gained a description in config.py (or no longer exists) needs no entry.
    stale = set(UNDESCRIBED) - undescribed_fields()
    assert not stale, f"remove from UNDESCRIBED in src/tolk/config_reference.py: {stale}"


def test_the_readme_opens_with_the_two_commands_and_stays_short() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = text.split("```")[1]
    assert "make serve" in first_block
    assert "make test" in first_block
    assert text.count("\n") <= 200


def test_links_between_the_pages_resolve() -> None:
    broken = []
    for page in PAGES:
        source = ROOT / page
        for target in _links(source.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = (source.parent / file_part).resolve() if file_part else source
            if not dest.exists():
                broken.append(f"{page}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def _without_code(text: str) -> str:
    text = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.sub(r"(`+)(?:.+?)\1", "", text)


def _links(text: str) -> list[str]:
    return re.findall(r"(?<!\\)\[[^\]]*\]\(([^)\s]+)\)", _without_code(text))


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings (numbered -1, -2... when repeated)."""
    text = re.sub(
        r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE
    )
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in found:
            n += 1
            anchor = f"{slug}-{n}"
        found.add(anchor)
    return found
