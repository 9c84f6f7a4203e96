"""Text as hostile clients send it, as hypothesis strategies (the loop-bounds tests)."""

from __future__ import annotations

from hypothesis import strategies as st

# Text as hostile clients send it: any Unicode (controls, RTL overrides, combining marks, BOMs,
# line separators), markup characters, and long runs without a break.
ALPHABET = st.characters(codec="utf-8") | st.sampled_from(
    [*"<>&*_`[]()#\n\r\t !.-|~\\\"'=/;:", "\u202e", "\u0301", "\ufeff", "\u2028", "\x00", "\x1b"]
)


HOSTILE_TEXT = st.text(ALPHABET, max_size=300) | st.builds(
    lambda run, n: run * n,
    st.sampled_from(["x", "漢", "a. ", "<a ", "*", "[", "&amp;", "\u0301", "-->", "[X1X]"]),
    st.integers(1, 3000),
)
