"""Locale files as apps write them (a Rails catalogue), and ICU messages parsed to compare."""

from __future__ import annotations

from typing import Any

from pyicumessageformat import Parser  # type: ignore[import-untyped]

RAILS = """# Application strings
en:
  # Shown on the dashboard
  greeting: "Hello %{name}, good to see you"  # keep it friendly
  defaults: &defaults
    save: Save changes
    cancel: 'Cancel and go back'
  admin:
    <<: *defaults
    title: Administration panel
  errors:
    messages:
      blank: can't be blank
      too_long: is too long (maximum is %{count} characters)
  notice: |
    Your account was created.
    Check your inbox to confirm it.
  levels:
    - First level
    - Second level
  limit: 5
  enabled: true
"""


def icu_ast(message: str) -> Any:
    return Parser({"allow_tags": True}).parse(message)
