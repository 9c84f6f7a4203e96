"""Where the tests find the repository, and the runtime folder servers keep their caches in."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
RUNTIME = REPO / ".runtime"
TEST_DATA = REPO / "tests" / "data"
# FLORES-101 devtest, human translations (not shipped: the development checkout's shared data).
FLORES = REPO.parent / "shared" / "quality" / "flores101"
