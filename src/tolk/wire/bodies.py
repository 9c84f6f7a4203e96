"""What no API takes, whatever its fields: JSON nested deeper than MAX_DEPTH, and text with
a lone UTF-16 surrogate. Both are refused where bodies and parameters are decoded
(tolk.server.params for every API, tolk.proxy.routing for the proxy), with a 400 in the
API's shape, before any field is read or a key is hashed.

A surrogate reaches Python only through JSON: a `\\ud800` escape, or the bytes of one
(json.loads decodes with `surrogatepass`); forms and query strings are decoded with
replacement characters. Such a string cannot be encoded as UTF-8, so anything that writes
it (the tokenizer, the key's hash, the database) fails. json.loads itself recurses: a body
nested a few thousand deep raises RecursionError, which is caught here too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, NoReturn

from tolk.errors import InvalidRequest

# Deeper than any request of the three APIs (DeepL's v3 glossaries are 4 deep).
MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
# What a body holds when some string in it may decode to a lone surrogate: a high escape not
# followed by a low one, a low escape not after a high one, or the UTF-8-style bytes of one.
# An escaped pair (an emoji, as json.dumps writes it by default) is no alarm, so such bodies
# are not walked. Patterns with literal prefixes: a few ms for 10 MB.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])")
_LOW_ESCAPE = re.compile(rb"(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F]")
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf]")


class InvalidInput(InvalidRequest):
    """Input no field of any API takes (a lone surrogate, JSON nested too deep): 400 in
    every API, tolk's own included."""

    status = 400


def too_deep() -> InvalidInput:
    return InvalidInput(
        f"the JSON body is nested deeper than {MAX_DEPTH} levels; no request of this API "
        "needs more than a few",
        field="body",
        max_depth=MAX_DEPTH,
    )


def check_text(value: str, where: str) -> None:
    """Refuse a string with a lone surrogate; `where` names it for the client."""
    found = _SURROGATE.search(value)
    if found is not None:
        raise InvalidInput(
            f"invalid text: lone UTF-16 surrogate at {where}, character {found.start()} "
            f"(U+{ord(found.group()):04X}); send valid Unicode (a surrogate escape such as "
            "\\ud83d must be followed by its pair)",
            field=where,
        )


def check_texts(items: Iterable[tuple[str, Any]], kind: str) -> None:
    """Every string value (and name) of form fields or query parameters."""
    for name, value in items:
        check_text(name, f"the name of a {kind}")
        if isinstance(value, str):
            check_text(value, f"{kind} '{name}'")


def check_value(value: Any) -> None:
    """Refuse a decoded JSON value nested deeper than MAX_DEPTH or holding a lone surrogate
    in any string or member name (walked without recursion)."""
    if not _clean(value):
        _refuse(value)


def _clean(value: Any) -> bool:
    """Whether `value` is within MAX_DEPTH and free of surrogates: a level at a time, each
    level's strings searched at once (no path kept: _refuse finds the culprit)."""
    level: list[Any] = [[value]]  # the value as the one child of a list above it
    for _ in range(MAX_DEPTH + 1):
        texts: list[str] = []
        below: list[Any] = []
        for container in level:
            children = container
            if isinstance(container, dict):
                texts += container.keys()
                children = container.values()
            for child in children:
                if isinstance(child, str):
                    texts.append(child)
                elif isinstance(child, dict | list):
                    below.append(child)
        if _SURROGATE.search("".join(texts)):
            return False
        if not below:
            return True
        level = below
    return False


def _refuse(value: Any) -> NoReturn:
    """Raise the InvalidInput that names what _clean found, walking with paths."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            check_text(item, _where(path))
        elif isinstance(item, dict | list):
            if len(path) >= MAX_DEPTH:
                raise too_deep()
            if isinstance(item, dict):
                for key, child in item.items():
                    check_text(key, f"a member name in {_where(path)}")
                    stack.append((child, (*path, key)))
            else:
                stack.extend((child, (*path, i)) for i, child in enumerate(item))
    raise too_deep()  # not reached: _clean found one of the two


def loads(body: bytes | str) -> Any:
    """json.loads, refusing (InvalidInput) what check_value refuses. Text that is not JSON
    raises ValueError, as json.loads does: each caller says what it expected."""
    try:
        data = json.loads(body)
    except RecursionError:
        raise too_deep() from None
    raw = body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")
    # Only a body with enough brackets can be too deep, and only one with a surrogate's
    # escape or bytes can hold one: most bodies are not walked at all.
    if (
        raw.count(b"[") + raw.count(b"{") > MAX_DEPTH
        or _SURROGATE_ESCAPE.search(raw)
        or _LOW_ESCAPE.search(raw)
        or _SURROGATE_BYTES.search(raw)
    ):
        check_value(data)
    return data


def _where(path: tuple[str | int, ...]) -> str:
    """'text[1]', 'dictionaries[0].entries'; 'the body' for the top level."""
    out = ""
    for part in path:
        name = part if isinstance(part, int) else part[:40]  # a client's name, shortened
        out += f"[{name}]" if isinstance(name, int) else (f".{name}" if out else name)
    return out or "the body"
