"""Subtitles in context through the in-process server over stand-in engines (edge):
`server.subtitles_in_context` decides cue by cue or in context, and files in context keep
their numbers and timings byte for byte."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.main_server import MainKeys, main_config
from tests.support.samples.subtitles import cue_text, heads, sizes, srt
from tests.support.servers import InProcessServer
from tolk.translation.subtitles import (
    has_text,
    parse_srt,
    parse_vtt,
)


@pytest.fixture(scope="module")
def in_context_server(
    test_model: Path, main_keys: MainKeys, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    """The edge server's configuration with `server.subtitles_in_context` on (its default is
    off: measured worse with the shipped 0.5B model)."""
    config = main_config(test_model, main_keys, tmp_path_factory)
    config["server"]["subtitles_in_context"] = True
    server = InProcessServer(config)
    yield server
    server.stop()


@pytest.fixture
async def edge_in_context(in_context_server: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=in_context_server.url, timeout=60) as client:
        yield client


async def planned_segments(client: httpx.AsyncClient, source: str) -> int:
    """How many segments the server planned for `source` (its streamed `segment` events)."""
    body = {"text": source, "format": "srt", "source_lang": "en", "target_lang": "de"}
    async with client.stream("POST", "/translate", json={**body, "stream": True}) as response:
        assert response.status_code == 200
        planned = [
            json.loads(line.removeprefix("data:"))["planned"]
            async for line in response.aiter_lines()
            if line.startswith("data:") and '"planned"' in line
        ]
    assert planned
    return int(planned[-1])


async def test_the_setting_decides_cue_by_cue_or_in_context(
    edge_client: httpx.AsyncClient, edge_in_context: httpx.AsyncClient
) -> None:
    source = srt("So we went down", "to the river.", "Then home.")
    assert await planned_segments(edge_client, source) == 3  # the default: each cue alone
    assert await planned_segments(edge_in_context, source) == 2  # a sentence over two cues


async def test_files_in_context_keep_numbers_and_timings_byte_for_byte(
    edge_in_context: httpx.AsyncClient,
) -> None:
    edge = edge_in_context
    sentence = ["So we went down", "to the river, <i>all of us</i>,", "and then", "we swam home."]
    files = {
        "talk.srt": srt(*sentence, "- Did you?", "- We did."),
        "talk.vtt": (
            "WEBVTT\n\nNOTE kept\n\n"
            + "".join(
                f"c{n}\n00:{n:02d}.000 --> 00:{n:02d}.900 align:start\n<v Ann>{t}\n\n"
                for n, t in enumerate(sentence, 1)
            )
            + "00:09.000 --> 00:09.900\n<v Bob>Hello there\n"
        ),
    }
    for name, source in files.items():
        parse = parse_srt if name.endswith(".srt") else parse_vtt
        assert sizes(parse(source))[0] == 4
        response = await edge.post(
            "/translate/file",
            files={"file": (name, source.encode())},
            data={"source_lang": "en", "target_lang": "de"},
        )
        assert response.status_code == 200, response.text
        out = response.content.decode("utf-8")
        assert heads(out) == heads(source), out
        texts = cue_text(out)
        assert len(texts) == len(cue_text(source))
        assert all(has_text(t) for t in texts), out
        assert not any("-->" in t for t in texts)
