"""Translation requests -> engine requests (fan-out, prompts, budgets) -> one response."""

from tolk.translation.policy import Limits
from tolk.translation.results import Translation, Usage
from tolk.translation.service import Translator

__all__ = ["Limits", "Translation", "Translator", "Usage"]
