"""OpenAI's chat completions and model list (tolk.server.api.openai), tested with the
official `openai` client and with the exact requests translation apps send
(tests/data/chat_apps), on the in-process server over stand-in engines (named so): shapes,
recognition, errors, quotas and capacity."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.clients import http_client
from tests.support.main_server import MainKeys
from tests.support.paths import TEST_DATA
from tests.support.servers import InProcessServer, model_config, server_config

APPS = TEST_DATA / "chat_apps"


@pytest.fixture
async def openai_client(edge_server: InProcessServer, main_keys: MainKeys) -> AsyncIterator[Any]:
    """The official client, pointed at the stand-in server, with a key; no retries."""
    async with openai.AsyncOpenAI(
        base_url=f"{edge_server.url}/v1", api_key=main_keys.full, max_retries=0
    ) as c:
        yield c


def body_of(error: pytest.ExceptionInfo[openai.APIStatusError]) -> dict[str, Any]:
    """The `error` object of an OpenAI-shaped error answer, as the client parsed it."""
    body = error.value.body
    assert isinstance(body, dict)
    return body


def chat_recordings() -> list[dict[str, Any]]:
    out = []
    for path in sorted(APPS.glob("*.json")):
        data = json.loads(path.read_text())
        if str(data.get("path", "")).endswith("/chat/completions"):
            out.append(data | {"file": path.name})
    return out


async def test_standin_models_lists_served_models_and_pair_names(openai_client: Any) -> None:
    listed = await openai_client.models.list()
    ids = [m.id for m in listed.data]
    assert ids[:2] == ["demo", "tolk"]
    assert {"tolk-de", "tolk-en-de", "tolk-de-en", "tolk-en-ne"} <= set(ids)
    assert all(m.object == "model" and m.owned_by == "tolk" for m in listed.data)


async def test_standin_a_pair_in_the_model_name_is_translated(openai_client: Any) -> None:
    raw = await openai_client.chat.completions.with_raw_response.create(
        model="tolk-en-de", messages=[{"role": "user", "content": "The weather is lovely."}]
    )
    answer = raw.parse()
    assert raw.headers["x-tolk-chat"] == "translation; shape=model"
    assert answer.object == "chat.completion"
    assert answer.model == "tolk-en-de"
    (choice,) = answer.choices
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content.strip()
    assert choice.message.content != "The weather is lovely."
    assert answer.usage.completion_tokens > 0
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens


async def test_standin_translation_options_as_extra_body(openai_client: Any) -> None:
    """Qwen-MT's convention, sent as its users send it (`extra_body`)."""
    raw = await openai_client.chat.completions.with_raw_response.create(
        model="demo",
        messages=[{"role": "user", "content": "Hello world. How are you?"}],
        extra_body={
            "translation_options": {
                "source_lang": "English",
                "target_lang": "German",
                "terms": [{"source": "world", "target": "Welt"}],
            }
        },
    )
    assert raw.headers["x-tolk-chat"] == "translation; shape=translation_options"
    assert raw.parse().choices[0].message.content.strip()


async def test_standin_streaming_gives_the_same_text_then_done(openai_client: Any) -> None:
    messages = [{"role": "user", "content": "A short sentence to translate."}]
    whole = await openai_client.chat.completions.create(model="tolk-en-fr", messages=messages)
    stream = await openai_client.chat.completions.create(
        model="tolk-en-fr",
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
    )
    parts, reasons, usage = [], [], None
    async for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            parts.append(choice.delta.content or "")
            reasons.append(choice.finish_reason)
    assert "".join(parts) == whole.choices[0].message.content
    assert reasons[-1] == "stop"
    assert usage is not None
    assert usage.completion_tokens == whole.usage.completion_tokens


async def test_standin_a_conversation_that_is_not_a_translation_is_a_chat(
    openai_client: Any,
) -> None:
    raw = await openai_client.chat.completions.with_raw_response.create(
        model="demo",
        messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
        max_tokens=12,
        temperature=0.5,
    )
    answer = raw.parse()
    assert raw.headers["x-tolk-chat"] == "chat"
    assert answer.choices[0].message.content
    # The stand-in writes its whole budget: the answer stops at max_tokens, and says so.
    assert answer.usage.completion_tokens == 12
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage.prompt_tokens > 10  # the rendered conversation


async def test_standin_errors_in_openais_shape(
    openai_client: Any, edge_server: InProcessServer, main_keys: MainKeys
) -> None:
    with pytest.raises(openai.NotFoundError) as unknown:
        await openai_client.chat.completions.create(
            model="gpt-5", messages=[{"role": "user", "content": "Hi"}]
        )
    error = body_of(unknown)
    assert error["code"] == "model_not_found"
    assert error["type"] == "not_found_error"
    assert "GET /v1/models" in error["message"]

    with pytest.raises(openai.BadRequestError) as no_user:
        await openai_client.chat.completions.create(
            model="tolk-en-de", messages=[{"role": "system", "content": "Translate."}]
        )
    assert body_of(no_user)["param"] == "messages"

    with pytest.raises(openai.BadRequestError) as unknown_language:
        await openai_client.chat.completions.create(
            model="demo",
            messages=[{"role": "user", "content": "Hello"}],
            extra_body={"translation_options": {"source_lang": "auto", "target_lang": "Klingon"}},
        )
    assert "Klingon" in body_of(unknown_language)["message"]

    with pytest.raises(openai.BadRequestError) as empty:
        await openai_client.chat.completions.create(model="demo", messages=[])
    assert body_of(empty)["type"] == "invalid_request_error"
    assert body_of(empty)["param"] == "messages"

    async with openai.AsyncOpenAI(
        base_url=f"{edge_server.url}/v1", api_key="not-a-key", max_retries=0
    ) as stranger:
        assert (await stranger.models.list()).data  # the list is open; a translation is not
        with pytest.raises(openai.AuthenticationError) as refused:
            await stranger.chat.completions.create(
                model="tolk-en-de", messages=[{"role": "user", "content": "Hi"}]
            )
        assert body_of(refused)["type"] == "authentication_error"

    async with http_client(edge_server.url) as http:
        big = await http.post(
            "/v1/chat/completions",
            json={"model": "demo", "messages": [{"role": "user", "content": "x" * 300_000}]},
            headers={"Authorization": f"Bearer {main_keys.full}"},
        )
    assert big.status_code == 413
    assert set(big.json()["error"]) == {"message", "type", "param", "code"}


async def test_standin_a_spent_quota_is_a_429_the_client_reads(
    edge_server: InProcessServer, main_keys: MainKeys
) -> None:
    async with openai.AsyncOpenAI(
        base_url=f"{edge_server.url}/v1", api_key=main_keys.tiny, max_retries=0
    ) as tiny:
        with pytest.raises(openai.RateLimitError) as spent:
            await tiny.chat.completions.create(
                model="tolk-en-de",
                messages=[{"role": "user", "content": "More than twenty characters, surely."}],
            )
    assert body_of(spent)["type"] == "insufficient_quota"


async def test_standin_at_capacity_a_503_with_retry_after_the_client_reads(
    test_model: Path,
) -> None:
    """One sequence at a time and none waiting; a chat completion holds it (the stand-in
    takes 20 ms a token); the next request is refused at once, 503 with Retry-After, which
    the official client raises (and, with retries on, waits out)."""
    import asyncio

    from tolk.local.processes import free_port

    model = model_config(
        "demo", test_model, languages=["en", "de"], engine={"max_num_seqs": 1, "max_waiting": 0}
    )
    server = InProcessServer(server_config([model], free_port()), seconds_per_token=0.02)
    try:
        async with openai.AsyncOpenAI(
            base_url=f"{server.url}/v1", api_key="k", max_retries=0
        ) as busy:
            first = asyncio.create_task(
                busy.chat.completions.create(
                    model="demo", messages=[{"role": "user", "content": "Hi"}], max_tokens=150
                )
            )
            app: Any = server.server.config.app
            pool = app.state.pool
            while pool.requests_inside < 1:  # the first is inside: the one place is taken
                assert not first.done(), first
                await asyncio.sleep(0.01)
            with pytest.raises(openai.InternalServerError) as refused:
                await busy.chat.completions.create(
                    model="tolk-en-de", messages=[{"role": "user", "content": "Hello."}]
                )
            assert refused.value.status_code == 503
            assert int(refused.value.response.headers["retry-after"]) >= 1
            assert body_of(refused)["code"] == "overloaded"
            assert body_of(refused)["type"] == "server_error"
            usage = (await first).usage
            assert usage is not None
            assert usage.completion_tokens == 150
    finally:
        server.stop()


def _read_stream(text: str) -> str:
    """The content an app reads from a stream: every `data:` chunk's delta, up to [DONE]."""
    out = []
    for line in text.splitlines():
        if not line.startswith("data: "):
            continue
        data = line[len("data: ") :]
        if data == "[DONE]":
            break
        for choice in json.loads(data)["choices"]:
            out.append(choice["delta"].get("content") or "")
    return "".join(out)


@pytest.mark.parametrize("recording", chat_recordings(), ids=lambda r: r["file"])
async def test_standin_each_apps_recorded_request_is_translated_as_it_reads_it(
    recording: dict[str, Any], edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    body = dict(recording["body"])
    body["model"] = "demo"  # what the user picks from /v1/models
    headers = {"Authorization": f"Bearer {main_keys.full}"}
    response = await edge_client.post("/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["x-tolk-chat"].startswith("translation; shape="), recording["file"]
    if body.get("stream"):
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.text.rstrip().endswith("data: [DONE]")
        content = _read_stream(response.text)
    else:
        content = response.json()["choices"][0]["message"]["content"]
    assert content.strip()
    shape = response.headers["x-tolk-chat"].split("shape=")[1]
    if shape == "weblate-parts":
        sent = body["messages"][-1]["content"].count("==WEBLATE_PART==") + 1
        assert len(re.split(r"\n *==WEBLATE_PART== *\n", content)) == sent
    elif shape == "weblate-json":
        assert isinstance(json.loads(content), list)
    elif shape == "kiss-batch":
        sent = json.loads(body["messages"][-1]["content"])["segments"]
        back = json.loads(content)["translations"]
        assert [t["id"] for t in back] == [s["id"] for s in sent]
