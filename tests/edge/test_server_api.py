"""The HTTP API on the in-process server over stand-in engines (edge): its shapes,
validation, errors, formats and limits. One translation and the engine's metrics on the real
main server: tests/engine/test_server_api_engine.py."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from tests.support.documents import (
    DOCUMENTS,
    PAGE,
    README,
    cue_heads,
    element_tree,
    kept_text,
    make_docx,
    without_emphasis,
    without_emphasis_elements,
)
from tests.support.errors import assert_error
from tests.support.main_server import MAIN_LANGUAGES
from tests.support.servers import InProcessServer
from tests.support.texts import TextMaker
from tolk.bench.loadgen import server_timing


async def test_language_codes_are_normalised(edge_client: httpx.AsyncClient) -> None:
    response = await edge_client.post(
        "/translate", json={"text": "Good day.", "source_lang": "eng", "target_lang": "FR"}
    )
    assert response.status_code == 200, response.text
    assert (response.json()["source_lang"], response.json()["target_lang"]) == ("en", "fr")


async def test_list_returns_translations_in_input_order(
    edge_client: httpx.AsyncClient, texts: TextMaker
) -> None:
    items = [texts.text(n) for n in (5, 150, 40, 100, 20)]
    listed = await edge_client.post(
        "/translate", json={"text": items, "source_lang": "en", "target_lang": "de"}
    )
    assert listed.status_code == 200, listed.text
    translations = listed.json()["translation"]
    assert isinstance(translations, list)
    assert len(translations) == len(items)
    # Each text alone gives the same translation as in the list (greedy decoding), so
    # position i of the list is text i's translation.
    singles = await asyncio.gather(
        *[
            edge_client.post(
                "/translate", json={"text": t, "source_lang": "en", "target_lang": "de"}
            )
            for t in items
        ]
    )
    assert [s.json()["translation"] for s in singles] == translations
    # The test model always writes its whole budget, so the list did each text's work.
    assert listed.json()["usage"]["completion_tokens"] == sum(
        s.json()["usage"]["completion_tokens"] for s in singles
    )


async def test_server_timing_says_where_the_time_to_the_first_output_went(
    edge_server: InProcessServer, edge_client: httpx.AsyncClient, texts: TextMaker
) -> None:
    llm = edge_server.engines.started["demo"]
    before = llm.requests
    items = [texts.text(n) for n in (30, 60, 90)]
    response = await edge_client.post(
        "/translate", json={"text": items, "source_lang": "en", "target_lang": "de"}
    )
    assert response.status_code == 200, response.text
    timing = response.headers["server-timing"]
    # Every engine request it made is counted (retries included: the stand-in's salad is
    # not German), and the marks up to its first output are there, in order; the stand-in
    # keeps no engine-core marks of its own (the real engine's: tests/engine).
    # (The header counts those handed to the engine, the stand-in those it answered.)
    made = re.search(r'engine-requests;desc="([0-9]+)"', timing)
    assert made is not None, timing
    assert int(made.group(1)) >= llm.requests - before >= len(items)
    marks = [
        server_timing(response.headers, name)
        for name in ("to-engine", "to-first-output", "to-translated", "to-rendered")
    ]
    assert all(m is not None for m in marks), timing
    assert marks == sorted(marks), timing  # type: ignore[type-var]
    assert marks[0] >= 0  # type: ignore[operator]
    assert marks[-1] < response.elapsed.total_seconds()  # type: ignore[operator]
    assert "to-first-token" not in timing
    # Nothing to translate: no engine request, no marks.
    empty = await edge_client.post(
        "/translate", json={"text": ["", " "], "source_lang": "en", "target_lang": "de"}
    )
    assert empty.status_code == 200, empty.text
    assert empty.headers["server-timing"].endswith('engine-requests;desc="0"')
    assert "to-engine" not in empty.headers["server-timing"]
    assert "to-rendered" in empty.headers["server-timing"]


async def test_empty_strings_translate_to_empty_strings(edge_client: httpx.AsyncClient) -> None:
    response = await edge_client.post(
        "/translate", json={"text": ["", "Hi.", " \n"], "source_lang": "en", "target_lang": "ne"}
    )
    assert response.status_code == 200, response.text
    translation = response.json()["translation"]
    assert translation[0] == ""
    assert translation[2] == " \n"
    assert translation[1]
    alone = await edge_client.post(
        "/translate", json={"text": "", "source_lang": "en", "target_lang": "de"}
    )
    assert alone.status_code == 200
    assert alone.json()["translation"] == ""
    assert alone.json()["usage"]["completion_tokens"] == 0


async def test_validation_errors_name_the_field(edge_client: httpx.AsyncClient) -> None:
    response = await edge_client.post("/translate", json={"text": "Hi", "source_lang": "en"})
    error = assert_error(response, 422, "invalid_request")
    assert {"field": "target_lang", "message": "Field required"} in error["problems"]
    assert "target_lang" in error["message"]

    response = await edge_client.post(
        "/translate", json={"text": 42, "source_lang": "en", "target_lang": "de"}
    )
    error = assert_error(response, 422, "invalid_request")
    assert {p["field"] for p in error["problems"]} >= {"text"}

    response = await edge_client.post(
        "/translate", json={"text": ["a", 3], "source_lang": "en", "target_lang": "de"}
    )
    error = assert_error(response, 422, "invalid_request")
    assert any(p["field"].startswith("text") for p in error["problems"])

    response = await edge_client.post(
        "/translate", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_error(response, 422, "invalid_request")


async def test_unsupported_pair_lists_what_is_supported(edge_client: httpx.AsyncClient) -> None:
    response = await edge_client.post(
        "/translate", json={"text": "Hi", "source_lang": "en", "target_lang": "ja"}
    )
    error = assert_error(response, 400, "unsupported_language_pair")
    assert error["supported"] == [{"model": "demo", "languages": MAIN_LANGUAGES}]
    assert (error["source_lang"], error["target_lang"]) == ("en", "ja")


async def test_invalid_language_code(edge_client: httpx.AsyncClient) -> None:
    response = await edge_client.post(
        "/translate", json={"text": "Hi", "source_lang": "english", "target_lang": "de"}
    )
    error = assert_error(response, 400, "invalid_language")
    assert error["field"] == "source_lang"


async def test_unknown_model(edge_client: httpx.AsyncClient) -> None:
    response = await edge_client.post(
        "/translate",
        json={"text": "Hi", "source_lang": "en", "target_lang": "de", "model": "nope"},
    )
    error = assert_error(response, 400, "unknown_model")
    assert error["models"] == ["demo"]


async def test_too_much_text_is_413(edge_client: httpx.AsyncClient) -> None:
    # 125,000 characters in two texts; the limit is 120,000 per request, whatever the split.
    texts = ["word " * 12_500, "word " * 12_500]
    response = await edge_client.post(
        "/translate", json={"text": texts, "source_lang": "en", "target_lang": "de"}
    )
    error = assert_error(response, 413, "payload_too_large")
    assert error["limit"] == 120_000

    response = await edge_client.post(
        "/translate", json={"text": ["a"] * 65, "source_lang": "en", "target_lang": "de"}
    )
    error = assert_error(response, 413, "payload_too_large")
    assert error["limit"] == 64


async def test_oversized_body_refused_before_it_is_read(edge_client: httpx.AsyncClient) -> None:
    body = b'{"text": "' + b"a" * 270_000 + b'", "source_lang": "en", "target_lang": "de"}'
    response = await edge_client.post(
        "/translate", content=body, headers={"content-type": "application/json"}
    )
    error = assert_error(response, 413, "payload_too_large")
    assert error["limit"] == 262_144

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted as it streams
        for _ in range(40):
            yield b"a" * 8192

    response = await edge_client.post(
        "/translate", content=chunked(), headers={"content-type": "application/json"}
    )
    assert_error(response, 413, "payload_too_large")


async def test_unknown_route_and_method_use_the_error_shape(edge_client: httpx.AsyncClient) -> None:
    assert_error(await edge_client.get("/nope"), 404, "not_found")
    assert_error(await edge_client.get("/translate"), 405, "method_not_allowed")


async def test_request_id_is_echoed(edge_client: httpx.AsyncClient) -> None:
    response = await edge_client.get("/health", headers={"x-request-id": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"


async def test_health_ready_languages_docs(edge_client: httpx.AsyncClient) -> None:
    assert (await edge_client.get("/health")).json() == {"status": "ok"}
    assert (await edge_client.get("/ready")).json() == {
        "status": "ready",
        "models": {"demo": "ready"},
    }
    languages = (await edge_client.get("/models")).json()
    assert languages == {
        "models": [
            {
                "model": "demo",
                "prompt_format": "chat",
                "languages": MAIN_LANGUAGES,
                "pairs": [],
                "ready": True,
                "capacity": 16 + 24,  # max_num_seqs + max_waiting: what the proxy counts against
            }
        ]
    }
    assert (await edge_client.get("/docs")).status_code == 200
    spec = (await edge_client.get("/openapi.json")).json()
    assert "/translate" in spec["paths"]


async def test_a_whole_article_comes_back_with_its_structure(
    edge_client: httpx.AsyncClient,
) -> None:
    # The case study's Part 1 (11,775 characters; headings, lists, code, blank lines) as one
    # text: cut into lines and sentences, translated side by side, put back together.
    from importlib import resources

    article = (resources.files("tolk") / "data" / "case_study" / "part1.en.txt").read_text(
        encoding="utf-8"
    )
    response = await edge_client.post(
        "/translate", json={"text": article, "source_lang": "en", "target_lang": "de"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    translation: str = body["translation"]
    assert body["usage"]["segments"] > 100
    source_lines, lines = article.split("\n"), translation.split("\n")
    assert len(lines) == len(source_lines)  # the random model's output never adds a line
    for source_line, line in zip(source_lines, lines, strict=True):
        assert (line.strip() == "") == (source_line.strip() == "")
        indent = len(source_line) - len(source_line.lstrip())
        assert line[:indent] == source_line[:indent]
        for marker in ("- ", "* ", "> ", "# ", "## ", "### "):
            if source_line.lstrip().startswith(marker):
                assert line.lstrip().startswith(marker), (source_line, line)


async def test_a_100_kb_text_comes_back_with_its_paragraph_structure(
    edge_client: httpx.AsyncClient,
) -> None:
    # The four case-study articles (English and Nepali), each copy under its own heading,
    # to 100 KB; repeated segments are translated once, the rest side by side.
    from importlib import resources

    folder = resources.files("tolk") / "data" / "case_study"
    articles = [
        (folder / f"{part}.{lang}.txt").read_text(encoding="utf-8")
        for part in ("part1", "part2")
        for lang in ("en", "ne")
    ]
    copies: list[str] = []
    while sum(len(c.encode()) for c in copies) < 100_000:
        copies.append(f"# Copy {len(copies) + 1}\n\n{articles[len(copies) % 4]}")
    text = "\n\n".join(copies)
    assert len(text.encode()) >= 100_000
    response = await edge_client.post(
        "/translate", json={"text": text, "source_lang": "en", "target_lang": "de"}
    )
    assert response.status_code == 200, response.text
    translation: str = response.json()["translation"]
    assert [bool(p.strip()) for p in translation.split("\n\n")] == [
        bool(p.strip()) for p in text.split("\n\n")
    ]
    assert translation.count("\n") == text.count("\n")
    assert all("# " in line for line in translation.splitlines() if line.startswith("#"))


async def test_identical_segments_are_translated_once(edge_client: httpx.AsyncClient) -> None:
    response = await edge_client.post(
        "/translate",
        json={
            "text": ["Hello world.\n\nHello world.", "Hello world."],
            "source_lang": "en",
            "target_lang": "de",
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["usage"]["segments"] == 1
    first, second = body["translation"]
    assert first == f"{second}\n\n{second}"


async def test_split_none_sends_each_text_whole(edge_client: httpx.AsyncClient) -> None:
    text = "One sentence here. Another one there.\nA second line."
    for split, segments in (("none", 1), ("paragraphs", 1), ("sentences", 2)):
        response = await edge_client.post(
            "/translate",
            json={"text": text, "source_lang": "en", "target_lang": "de", "split": split},
        )
        assert response.status_code == 200, response.text
        assert response.json()["usage"]["segments"] == segments, split
    response = await edge_client.post(
        "/translate",
        json={"text": text, "source_lang": "en", "target_lang": "de", "split": "words"},
    )
    error = assert_error(response, 422, "invalid_request")
    assert "split" in error["message"]


async def test_markdown_comes_back_with_its_markup(edge_client: httpx.AsyncClient) -> None:
    # The random model writes `*`, `[`, `<`, `&`...: escaped, the document's structure holds.
    from tolk.translation.markdown_format import structure

    response = await edge_client.post(
        "/translate",
        json={"text": README, "source_lang": "en", "target_lang": "de", "format": "markdown"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    translation: str = body["translation"]
    # The random model never keeps placeholders: units go whole without their emphasis (or
    # run by run), so everything but emphasis is as it was, and the fallbacks are flagged.
    assert without_emphasis(structure(translation)) == without_emphasis(structure(README))
    assert translation != README
    assert body["usage"]["segments"] >= 20  # first pass, then the units that lost markup
    codes = {w["code"] for w in body["warnings"]}
    assert codes & {"markup_dropped", "markup_split"}, body["warnings"]
    for verbatim in ("   ```bash\n   pip install tolk", "<!-- a comment that stays -->"):
        assert verbatim in translation


async def test_html_comes_back_with_its_element_tree(edge_client: httpx.AsyncClient) -> None:
    plain = without_emphasis_elements

    response = await edge_client.post(
        "/translate",
        json={
            "text": [PAGE, "<p>Hi <b>there</b></p>"],
            "source_lang": "en",
            "target_lang": "fr",
            "format": "html",
        },
    )
    assert response.status_code == 200, response.text
    page, snippet = response.json()["translation"]
    # Every element but emphasis (which a unit may lose, flagged) is as it was.
    assert plain(element_tree(page)) == plain(element_tree(PAGE))
    assert kept_text(page) == kept_text(PAGE)
    assert plain(element_tree(snippet)) == plain(element_tree("<p>Hi <b>there</b></p>"))
    assert "Welcome to" not in page


async def _post_file(
    edge: httpx.AsyncClient, name: str, content: bytes, **form: str
) -> httpx.Response:
    data = {"source_lang": "en", "target_lang": "de", **form}
    return await edge.post("/translate/file", files={"file": (name, content)}, data=data)


async def test_files_come_back_translated_with_their_structure(
    edge_client: httpx.AsyncClient,
) -> None:
    import io

    import docx

    from tolk.translation.markdown_format import structure

    article = "First paragraph. It has two sentences.\n\n- a list item\n- another one\n"
    text_files = {
        "notes.txt": article,
        "README.md": README,
        "page.html": PAGE,
        "talk.srt": (DOCUMENTS / "talk.srt").read_text(encoding="utf-8"),
        "talk.vtt": (DOCUMENTS / "talk.vtt").read_text(encoding="utf-8"),
    }
    for name, source in text_files.items():
        response = await _post_file(edge_client, name, ("\ufeff" + source).encode())
        assert response.status_code == 200, (name, response.text)
        assert name in response.headers["content-disposition"]
        assert int(response.headers["x-tolk-segments"]) >= 1
        out = response.content.decode("utf-8")
        assert out.startswith("\ufeff")  # the byte order mark stays
        out = out[1:]
        assert out != source
        if name.endswith(".txt"):
            shape = [(line[:2] == "- ", not line.strip()) for line in out.splitlines()]
            assert shape == [(line[:2] == "- ", not line.strip()) for line in source.splitlines()]
        elif name.endswith(".md"):
            assert response.headers["content-type"].startswith("text/markdown")
            assert without_emphasis(structure(out)) == without_emphasis(structure(source))
        elif name.endswith(".html"):
            assert without_emphasis_elements(element_tree(out)) == without_emphasis_elements(
                element_tree(source)
            )
        else:
            assert cue_heads(out) == cue_heads(source)

    response = await _post_file(edge_client, "report.docx", make_docx())
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    )
    translated = docx.Document(io.BytesIO(response.content))
    assert [getattr(p.style, "name", "") for p in translated.paragraphs] == [
        getattr(p.style, "name", "") for p in docx.Document(io.BytesIO(make_docx())).paragraphs
    ]
    assert translated.paragraphs[0].text != "A report on batching"
    assert [r.bold for r in translated.paragraphs[1].runs if r.text] == [
        None,
        True,
        None,
        None,
        None,
    ]


async def test_unsupported_and_unreadable_files_are_refused(edge_client: httpx.AsyncClient) -> None:
    error = assert_error(
        await _post_file(edge_client, "slides.key", b"PK"), 415, "unsupported_file_type"
    )
    assert ".docx" in error["message"]
    assert ".srt" in error["supported"]
    error = assert_error(
        await _post_file(edge_client, "notes.txt", b"caf\xe9"), 422, "invalid_request"
    )
    assert "UTF-8" in error["message"]
    error = assert_error(
        await _post_file(edge_client, "broken.docx", b"not a zip"), 422, "invalid_request"
    )
    assert "Word document" in error["message"]
    response = await edge_client.post("/translate/file", data={"source_lang": "en"})
    error = assert_error(response, 422, "invalid_request")


async def test_a_files_glossary_and_formality_reach_the_prompt(
    edge_client: httpx.AsyncClient, edge_server: InProcessServer, test_model: Path
) -> None:
    from transformers import AutoTokenizer

    llm = edge_server.engines.started["demo"]
    tokenizer = AutoTokenizer.from_pretrained(str(test_model))
    llm.prompts.clear()
    response = await _post_file(
        edge_client, "notes.txt", b"The batch is ready.\n", glossary_id="product", formality="more"
    )
    assert response.status_code == 200, response.text
    (prompt,) = [tokenizer.decode(p) for p in llm.prompts]
    assert "Stapel" in prompt
    assert "formal register" in prompt
    unknown = await _post_file(edge_client, "notes.txt", b"The batch.\n", glossary_id="nope")
    assert_error(unknown, 400, "unknown_glossary")


async def test_glossaries_and_protected_terms(edge_client: httpx.AsyncClient) -> None:
    text = "tolk batches requests on vLLM.\n\nThe batch size is tuned by tolk."
    response = await edge_client.post(
        "/translate",
        json={
            "text": text,
            "source_lang": "en",
            "target_lang": "de",
            "glossary": {"requests": "Anfragen"},
            "glossary_id": "product",
            "do_not_translate": ["tolk", "vLLM"],
        },
    )
    assert response.status_code == 200, response.text
    translation: str = response.json()["translation"]
    # The random model obeys no glossary, but protected terms are placeholders: they stay.
    assert translation.count("tolk") == 2
    assert translation.count("vLLM") == 1
    assert translation.count("\n\n") == 1

    unknown = {"text": "A batch.", "source_lang": "en", "target_lang": "de", "glossary_id": "x"}
    error = assert_error(
        await edge_client.post("/translate", json=unknown), 400, "unknown_glossary"
    )
    assert "product" in error["message"]
    wrong_pair = {**unknown, "glossary_id": "product", "target_lang": "fr"}
    error = assert_error(
        await edge_client.post("/translate", json=wrong_pair), 400, "unknown_glossary"
    )
    assert "en>de" in error["message"]


async def test_tag_handling_keeps_weblates_placeholders(edge_client: httpx.AsyncClient) -> None:
    text = 'Click <x id="1"></x> to save &amp; <b>close</b> the &lt;file&gt;.'
    body = {"text": text, "source_lang": "en", "target_lang": "de", "tag_handling": "xml"}
    response = await edge_client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    translation: str = response.json()["translation"]
    assert '<x id="1"></x>' in translation
    assert translation.count("<b>") == translation.count("</b>") == 1
    conflict = {**body, "format": "markdown"}
    error = assert_error(
        await edge_client.post("/translate", json=conflict), 422, "invalid_request"
    )
    assert "tag_handling" in error["message"]
