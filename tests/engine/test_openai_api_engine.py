"""OpenAI's chat completions through the official `openai` client, end to end on the shared
real-engine main server."""

from __future__ import annotations

import openai

from tests.support.main_server import MainKeys
from tests.support.servers import ServerProcess


async def test_the_official_client_on_the_real_engine(
    main_server: ServerProcess, main_keys: MainKeys
) -> None:
    async with openai.AsyncOpenAI(
        base_url=f"{main_server.url}/v1", api_key=main_keys.full, max_retries=0
    ) as real:
        translated = await real.chat.completions.with_raw_response.create(
            model="tolk-en-de", messages=[{"role": "user", "content": "Good morning."}]
        )
        assert translated.headers["x-tolk-chat"] == "translation; shape=model"
        usage = translated.parse().usage
        assert usage is not None
        assert usage.completion_tokens > 0
        chat = await real.chat.completions.with_raw_response.create(
            model="demo",
            messages=[{"role": "user", "content": "Tell me a joke."}],
            max_tokens=8,
        )
        assert chat.headers["x-tolk-chat"] == "chat"
        chat_usage = chat.parse().usage
        assert chat_usage is not None
        assert chat_usage.completion_tokens == 8  # the random model never stops early
