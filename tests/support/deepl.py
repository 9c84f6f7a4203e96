"""The official DeepL client's answers, narrowed to one result."""

from __future__ import annotations

import deepl


def one(result: deepl.TextResult | list[deepl.TextResult]) -> deepl.TextResult:
    assert isinstance(result, deepl.TextResult)
    return result
