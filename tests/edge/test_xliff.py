"""XLIFF 1.2 and 2.0 files (tolk.translation.xliff): files as Angular (`ng extract-i18n`,
both formats; the 2.0 one with the OASIS specification's inline examples), Okapi and Xcode
write them, translated through the in-process server over
stand-in engines (edge) and read back with lxml: every unit to translate has a target, its
inline codes the source's (ids, attributes, code content), units under translate="no" and
human translations untouched, the rest of the file the same elements as before; entity bombs,
malformed XML, other namespaces and too many units refused with a 4xx."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.support.errors import assert_error
from tests.support.files import post_file
from tests.support.samples.xliff import (
    ANGULAR_12,
    ANGULAR_20,
    OKAPI_12,
    X12,
    X20,
    check12,
    check20,
    xliff_tree,
)
from tolk.translation import xliff


async def test_an_angular_xliff_12_file_comes_back_translated(
    edge_client: httpx.AsyncClient,
) -> None:
    source = ANGULAR_12.encode()
    response = await post_file(edge_client, "messages.xlf", source)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/xliff+xml")
    units = check12(source, response.content)
    assert set(units) == {"introductionHeader", "5206857922697139278", "linkText", "countOnly"}
    count = units["countOnly"].find(f"{X12}target")
    assert [c.get("equiv-text") for c in count] == ["{{ count }}"]
    assert response.content.startswith(b'<?xml version="1.0" encoding="UTF-8" ?>\n<xliff ')


async def test_an_okapi_and_xcode_xliff_12_file_comes_back_translated(
    edge_client: httpx.AsyncClient,
) -> None:
    source = OKAPI_12.encode()
    response = await post_file(edge_client, "page.xliff", source)
    assert response.status_code == 200, response.text
    units = check12(source, response.content)
    assert set(units) == {"tu1", "tu3", "Open the document browser"}
    root = xliff_tree(response.content)
    alt = root.find(f".//{X12}alt-trans/{X12}target")
    assert alt.text == "Lisez cette page."  # an alternative's target is not the unit's


async def test_an_xliff_20_file_comes_back_translated(edge_client: httpx.AsyncClient) -> None:
    source = ANGULAR_20.encode()
    response = await post_file(edge_client, "messages.xlf", source)
    assert response.status_code == 200, response.text
    segments = check20(source, response.content)
    assert set(segments) == {
        ("introductionHeader", 0),
        ("2793614983468390085", 0),
        ("spec-pc", 0),
        ("spec-pc", 1),
        ("spec-sm", 0),
        ("preserved", 0),
    }
    preserved = segments[("preserved", 0)].find(f"{X20}target")
    assert preserved.text.startswith("  ")  # the source's outer spaces, kept
    assert preserved.text.endswith("  ")


def _bomb(levels: int) -> bytes:
    entities = "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">\n' for i in range(1, levels + 1))
    return (
        '<?xml version="1.0"?>\n<!DOCTYPE xliff [\n<!ENTITY lol0 "lol">\n'
        f"{entities}]>\n"
        f'<xliff version="1.2" xmlns="{xliff.NS12}"><file source-language="en" '
        'datatype="plaintext" original="x"><body><trans-unit id="1">'
        f"<source>Boom &lol{levels};</source></trans-unit></body></file></xliff>"
    ).encode()


async def test_hostile_and_broken_files_are_refused(
    edge_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    for levels in (9, 2):  # a billion laughs, and an expansion small enough to parse
        begun = time.perf_counter()
        bomb = await post_file(edge_client, "bomb.xlf", _bomb(levels))
        assert_error(bomb, 422, "invalid_request")
        assert "entities" in bomb.json()["error"]["message"]
        assert time.perf_counter() - begun < 5
    broken = await post_file(edge_client, "broken.xlf", ANGULAR_12.replace("</body>", "").encode())
    error = assert_error(broken, 422, "invalid_request")
    assert "not well-formed XML" in error["message"]
    assert error["field"] == "file"
    other = ANGULAR_12.replace(xliff.NS12, "urn:oasis:names:tc:xliff:document:1.1")
    unknown = await post_file(edge_client, "old.xlf", other.encode())
    error = assert_error(unknown, 422, "invalid_request")
    assert "urn:oasis:names:tc:xliff:document:1.1" in error["message"]
    plain = await post_file(edge_client, "plain.xlf", b"<html><body>Hi</body></html>")
    assert "<html> in no namespace" in assert_error(plain, 422, "invalid_request")["message"]
    latin = ANGULAR_12.replace('encoding="UTF-8"', 'encoding="ISO-8859-1"').encode()
    assert (
        "UTF-8"
        in assert_error(await post_file(edge_client, "l.xlf", latin), 422, "invalid_request")[
            "message"
        ]
    )
    utf16 = await post_file(
        edge_client, "w.xlf", ANGULAR_12.replace("UTF-8", "UTF-16").encode("utf-16")
    )
    assert_error(utf16, 422, "invalid_request")
    # Too many units (the limit lowered: a file over the real one is over the body limit).
    monkeypatch.setattr(xliff, "MAX_UNITS", 3)
    many = await post_file(edge_client, "many.xlf", ANGULAR_12.encode())
    assert_error(many, 413, "payload_too_large")
    assert "at most 3" in many.json()["error"]["message"]
