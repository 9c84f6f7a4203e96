"""Translation requests -> engine requests (fan-out, prompts, budgets) -> one response."""

from tolk.translation.service import Limits, Translation, Translator, Usage

__all__ = ["Limits", "Translation", "Translator", "Usage"]
