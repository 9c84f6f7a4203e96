"""The drop-in APIs end to end on the shared real-engine main server: DeepL's and
LibreTranslate's official clients (`deepl`, `libretranslatepy`) translating, and the abort of
a request the deepl client gave up on and sent again."""

from __future__ import annotations

import asyncio
import urllib.error

import deepl
import httpx
import pytest
from libretranslatepy import LibreTranslateAPI

from tests.support.deepl import one
from tests.support.main_server import MainKeys
from tests.support.metrics import metric_value
from tests.support.polling import wait_until
from tests.support.servers import ServerProcess
from tests.support.texts import TextMaker

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def deepl_real(main_server: ServerProcess, main_keys: MainKeys) -> deepl.DeepLClient:
    """The official client of the real main server (a real engine)."""
    deepl.http_client.max_network_retries = 0
    return deepl.DeepLClient(main_keys.full, server_url=main_server.url)


def many(result: deepl.TextResult | list[deepl.TextResult]) -> list[deepl.TextResult]:
    assert isinstance(result, list)
    return result


def test_deepl_translate_a_string_and_a_list(deepl_real: deepl.DeepLClient) -> None:
    deepl_client = deepl_real
    result = one(deepl_client.translate_text("Hello, world!", target_lang="DE"))
    assert isinstance(result.text, str)
    assert result.text
    assert result.detected_source_lang == "EN"
    assert result.billed_characters == 13
    assert result.model_type_used is None

    results = many(
        deepl_client.translate_text(["Hello", "Goodbye"], source_lang="EN", target_lang="ZH-HANS")
    )
    assert [r.detected_source_lang for r in results] == ["EN", "EN"]
    assert all(r.text for r in results)
    asked = one(
        deepl_client.translate_text(
            "Hi there", target_lang="EN-US", model_type="prefer_quality_optimized"
        )
    )
    assert asked.model_type_used == "quality_optimized"


def test_libretranslatepy_without_and_with_a_key(
    main_server: ServerProcess, main_keys: MainKeys
) -> None:
    for lt in (
        LibreTranslateAPI(main_server.url),
        LibreTranslateAPI(main_server.url, api_key=main_keys.full),
    ):
        assert isinstance(lt.translate("Hello world", "en", "es"), str)
        assert isinstance(lt.translate("Bonjour le monde, comment allez-vous ?", "auto", "en"), str)
        detected = lt.detect("Hello world, how are you today?")
        assert detected[0]["language"] == "en"
        assert 0 <= detected[0]["confidence"] <= 100
        languages = lt.languages()
        assert all({"code", "name", "targets"} <= set(entry) for entry in languages)
    with pytest.raises(urllib.error.HTTPError) as raised:
        LibreTranslateAPI(main_server.url, api_key="wrong").translate("Hello", "en", "de")
    assert raised.value.code == 403


async def test_a_retried_deepl_request_leaves_nothing_generating(
    main_server: ServerProcess,
    engine_client: httpx.AsyncClient,
    main_keys: MainKeys,
    texts: TextMaker,
) -> None:
    """The deepl client gives up on a slow reply and sends the request again: the first copy
    must stop generating when its connection closes."""

    async def idle() -> bool:
        return (
            await metric_value(engine_client, "vllm:num_requests_running", model_name="demo") == 0
        )

    await wait_until(idle, within=60)
    written_before = await metric_value(engine_client, "vllm:generation_tokens_total")
    auth = {"Authorization": f"DeepL-Auth-Key {main_keys.full}"}
    async with httpx.AsyncClient(base_url=main_server.url, timeout=60) as leaving:
        request = asyncio.create_task(
            leaving.post(
                "/v2/translate", json={"text": [texts.text(400)], "target_lang": "DE"}, headers=auth
            )
        )

        async def generating() -> bool:
            return (
                await metric_value(engine_client, "vllm:num_requests_running", model_name="demo")
                >= 1
            )

        await wait_until(generating, within=30)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
    await wait_until(idle, within=5)
    # In tokens, not seconds: most of the ~800 tokens the translation had to write never were.
    written = await metric_value(engine_client, "vllm:generation_tokens_total") - written_before
    assert 0 < written < 800 / 2
