"""What the document-path tests check of a translated file: that it reads as its kind, and its
name (tests/edge and tests/engine test_document_paths*)."""

from __future__ import annotations

import io
import json
import zipfile

import docx
import yaml
from lxml import etree  # type: ignore[import-untyped]

from tolk.translation.files import file_type

ZIPPED = {"docx", "pptx", "xlsx", "odt", "odp", "ods", "epub"}


def readable(name: str, content: bytes) -> None:
    """`content` is a file of the kind `name` says, as its readers would open it."""
    kind = file_type(name).kind
    if kind in ZIPPED:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            assert archive.testzip() is None
        if kind == "docx":
            docx.Document(io.BytesIO(content))
    elif kind == "xliff":
        etree.fromstring(content)
    elif kind == "json":
        json.loads(content)
    elif kind == "yaml":
        yaml.safe_load(content)
    else:
        content.decode("utf-8")


def translated_name(name: str) -> str:
    return file_type(name).translated_name(name)
