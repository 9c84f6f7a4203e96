"""Alternative translations (`alternatives` in LibreTranslate's and tolk's APIs): sampled
outputs of each segment beside the greedy one, put together per text. In-process over the
stand-in engine (named so), whose sampled outputs differ from its greedy one; the real
engine's are tested in test_real_model."""

from __future__ import annotations

from collections.abc import Iterator

import html5lib
import httpx
import pytest

from tests.support.servers import InProcessServer
from tolk.testing.fake_engine import FakeLLM


@pytest.fixture
def sync_edge_client(edge_server: InProcessServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=edge_server.url, timeout=60) as c:
        yield c


def _llm(edge_server: InProcessServer) -> FakeLLM:
    return edge_server.engines.started["demo"]


def test_libretranslate_alternatives_are_sampled_outputs_of_each_text(
    sync_edge_client: httpx.Client, edge_server: InProcessServer
) -> None:
    llm = _llm(edge_server)
    requests, outputs = llm.requests, llm.outputs
    form = {"q": "The museum opens at nine.", "source": "en", "target": "de", "alternatives": "3"}
    one = sync_edge_client.post("/translate", data=form)
    assert one.status_code == 200, one.text
    body = one.json()
    alternatives = body["alternatives"]
    assert len(alternatives) == 3, body
    assert len(set(alternatives)) == 3
    assert body["translatedText"] not in alternatives
    # One segment: the greedy request and one sampled request of n 3 (the prompt read once).
    assert (llm.requests - requests, llm.outputs - outputs) == (2, 4)

    plain = sync_edge_client.post("/translate", data={**form, "alternatives": "0"}).json()
    assert "alternatives" not in plain
    # The greedy translation is the same with or without alternatives.
    assert plain["translatedText"] == body["translatedText"]


def test_a_list_gets_alternatives_per_text_put_together_from_its_segments(
    sync_edge_client: httpx.Client,
) -> None:
    texts = ["One sentence here. And a second one there.", "Short."]
    answer = sync_edge_client.post(
        "/translate", json={"q": texts, "source": "en", "target": "de", "alternatives": 2}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [len(a) for a in body["alternatives"]] == [2, 2], body
    for translation, alternatives in zip(body["translatedText"], body["alternatives"], strict=True):
        assert translation not in alternatives
        assert len(set(alternatives)) == len(alternatives)


def test_alternatives_as_libretranslate_reads_and_limits_them(
    sync_edge_client: httpx.Client,
) -> None:
    form = {"q": "Hello", "source": "en", "target": "de"}
    for value, error in (
        ("three", "Invalid request: alternatives parameter is not a number"),
        ("4", "Invalid request: alternatives parameter must be <= 3"),
    ):
        answer = sync_edge_client.post("/translate", data={**form, "alternatives": value})
        assert (answer.status_code, answer.json()) == (400, {"error": error})
    below = sync_edge_client.post("/translate", data={**form, "alternatives": "-2"})
    assert below.status_code == 200
    assert "alternatives" not in below.json()  # LibreTranslate: max(0, n)


def test_html_alternatives_keep_the_markup(sync_edge_client: httpx.Client) -> None:
    page = '<p>Click <b>Save</b> to keep <a href="/help">changes</a>.</p>'
    answer = sync_edge_client.post(
        "/translate",
        json={"q": page, "source": "en", "target": "de", "format": "html", "alternatives": 2},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["alternatives"], body

    def tags(html: str) -> list[tuple[str, dict[str, str]]]:
        tree = html5lib.parse(html, namespaceHTMLElements=False)
        return [(el.tag, dict(el.attrib)) for el in tree.iter() if isinstance(el.tag, str)]

    for alternative in body["alternatives"]:
        assert tags(alternative) == tags(body["translatedText"]), alternative


def test_tolk_api_alternatives_and_their_tokens(sync_edge_client: httpx.Client) -> None:
    request = {"text": "The museum opens at nine.", "source_lang": "en", "target_lang": "de"}
    plain = sync_edge_client.post("/translate", json=request).json()
    assert plain["alternatives"] is None
    answer = sync_edge_client.post("/translate", json={**request, "alternatives": 2})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert len(body["alternatives"]) == 2
    assert body["translation"] == plain["translation"]
    # Every sample's tokens are counted: the stand-in writes its whole budget each time.
    assert body["usage"]["completion_tokens"] == 3 * plain["usage"]["completion_tokens"]
    listed = sync_edge_client.post(
        "/translate", json={**request, "text": ["A.", "B."], "alternatives": 1}
    )
    assert [len(a) for a in listed.json()["alternatives"]] == [1, 1]
    over = sync_edge_client.post("/translate", json={**request, "alternatives": 4})
    assert over.status_code == 422
    error = over.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_request", "alternatives")
    assert "must be <= 3" in error["message"]
