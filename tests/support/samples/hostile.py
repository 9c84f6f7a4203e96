"""Hostile request bodies: a lone surrogate, JSON nested thousands deep, broken multipart."""

from __future__ import annotations

# A lone surrogate as a JSON client writes it (Python's json.dumps writes one so, too).
LONE = '"caf\\ud800 bar"'


DEEP = "[" * 5000 + "]" * 5000


def body(template: str, **values: str) -> bytes:
    """A JSON body written by hand: `template` with raw JSON values put in."""
    return template.format(**values).encode()


PART = b'--x\r\nContent-Disposition: form-data; name="text"\r\n\r\nHello\r\n--x--\r\n'


# A file part whose file name holds a raw CRLF: the part's header lines break there.
CRLF_FILE = (
    b"--x\r\n"
    b'Content-Disposition: form-data; name="target_lang"\r\n\r\nde\r\n--x\r\n'
    b'Content-Disposition: form-data; name="file"; filename="a\r\nb.txt"\r\n'
    b"Content-Type: text/plain\r\n\r\nHello\r\n--x--\r\n"
)


MULTIPART = {"Content-Type": "multipart/form-data; boundary=x"}
