"""Real models for tolk: fetched as Qwen's official GGUF files, checked by sha256, and
converted into the Hugging Face layout that vLLM loads (`tolk fetch-model`).

`tolk.models.sources` lists the models and where their bytes come from, `tolk.models.fetch`
gets and checks them (`ensure_model`), `tolk.models.convert` turns a GGUF file into a model
directory. They report long steps through `Progress`, so that the command shows rich bars on a
terminal and plain lines elsewhere, and tests and `make serve` can stay quiet.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Where the long steps of fetching and converting report to."""

    def start(self, description: str, total: int | None = None, *, unit: str = "") -> None:
        """Begin a step (ending the one before); `total` of `unit` ("B" for bytes) if known."""

    def update(self, *, advance: int = 0, description: str | None = None) -> None:
        """Move the current step on by `advance`, or say what it is doing now."""

    def finish(self, *, failed: bool = False) -> None:
        """End the current step (as given up, with `failed`)."""

    def note(self, message: str) -> None:
        """A line for the person watching (a fallback taken, a cached file used)."""


class Quiet:
    """A `Progress` that reports nothing."""

    def start(self, description: str, total: int | None = None, *, unit: str = "") -> None:
        pass

    def update(self, *, advance: int = 0, description: str | None = None) -> None:
        pass

    def finish(self, *, failed: bool = False) -> None:
        pass

    def note(self, message: str) -> None:
        pass
