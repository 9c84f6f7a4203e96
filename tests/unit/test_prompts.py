"""Prompt formats against the formats their model cards document."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.paths import FLORES
from tests.support.texts import TextMaker
from tolk.languages import lang
from tolk.translation.prompts import (
    FORMATS,
    ChatPrompt,
    CompletionPrompt,
    Instructions,
    chat,
    clean,
    keep_outer_whitespace,
)

EN, DE, ZH, PT, NE = lang("en"), lang("de"), lang("zh"), lang("pt-BR"), lang("ne")


def user_text(prompt: object) -> object:
    assert isinstance(prompt, ChatPrompt)
    assert len(prompt.messages) == 1
    assert prompt.messages[0]["role"] == "user"
    return prompt.messages[0]["content"]


def test_chat_generic_instruction() -> None:
    content = user_text(FORMATS["chat"]("Hello.", EN, PT))
    assert content == (
        "Translate the following English text into Portuguese (Brazil). Reply with the "
        "translation only, without explanations, notes or quotation marks.\n\nHello."
    )


def test_hunyuan_mt_english_instruction_between_non_chinese() -> None:
    # Model card: "Translate the following segment into <target_language>, without
    # additional explanation.\n\n<source_text>"
    content = user_text(FORMATS["hunyuan-mt"]("Hello.", EN, DE))
    assert content == (
        "Translate the following segment into German, without additional explanation.\n\nHello."
    )


def test_hunyuan_mt_chinese_instruction_when_chinese_involved() -> None:
    # Model card: "把下面的文本翻译成<target_language>，不要额外解释。\n\n<source_text>"
    assert user_text(FORMATS["hunyuan-mt"]("Hello.", EN, ZH)) == (
        "把下面的文本翻译成中文，不要额外解释。\n\nHello."
    )
    assert user_text(FORMATS["hunyuan-mt"]("你好。", ZH, EN)) == (
        "把下面的文本翻译成英语，不要额外解释。\n\n你好。"
    )


def test_seed_x_plain_completion_with_target_tag() -> None:
    # Model card: "Translate the following English sentence into Chinese:\nMay the force be
    # with you <zh>"
    prompt = FORMATS["seed-x"]("May the force be with you", EN, ZH)
    assert prompt == CompletionPrompt(
        "Translate the following English sentence into Chinese:\nMay the force be with you <zh>"
    )


def test_tower_user_turn() -> None:
    # Model card: "Translate the following text from Portuguese into English.\nPortuguese:
    # <text>\nEnglish:"
    content = user_text(FORMATS["tower"]("Um grupo.", PT, EN))
    assert content == (
        "Translate the following text from Portuguese into English.\nPortuguese: Um grupo."
        "\nEnglish:"
    )


def test_alma_plain_completion() -> None:
    # Model card: "Translate this from Chinese to English:\nChinese: 我爱机器翻译。\nEnglish:"
    prompt = FORMATS["alma"]("我爱机器翻译。", ZH, EN)
    assert prompt == CompletionPrompt(
        "Translate this from Chinese to English:\nChinese: 我爱机器翻译。\nEnglish:"
    )


def test_translategemma_structured_content() -> None:
    # Model card: one user message whose content is [{type, source_lang_code,
    # target_lang_code, text}]; the model's chat template writes the instruction.
    content = user_text(FORMATS["translategemma"]("Hello.", EN, lang("de-DE")))
    assert content == [
        {"type": "text", "source_lang_code": "en", "target_lang_code": "de-DE", "text": "Hello."}
    ]


@pytest.mark.parametrize(
    ("raw", "source", "expected"),
    [
        ("  Hallo Welt.<|im_end|>", "Hello world.", "Hallo Welt."),
        ("German: Hallo.", "Hello.", "Hallo."),
        ("Translation: Hallo.", "Hello.", "Hallo."),
        ('"Hallo."', "Hello.", "Hallo."),
        ('"Hallo."', '"Hello."', '"Hallo."'),
        ("Hallo. <de>", "Hello.", "Hallo."),
        ("<end_of_turn>Hallo.</s>", "Hello.", "Hallo."),
        ("Zeile 1\nZeile 2", "Line 1\nLine 2", "Zeile 1\nZeile 2"),
        # Control bytes a byte-level model wrote (no XML parser takes them) go; tabs stay,
        # and a control character the source has is kept.
        ("Hal\x19lo\x0f \x7fWelt\x85.\ufffe", "Hello world.", "Hallo Welt."),
        ("a\tb\x1b", "a\tb", "a\tb"),
        ("Seite\x0c2", "Page\x0c2", "Seite\x0c2"),
    ],
)
def test_clean(raw: str, source: str, expected: str) -> None:
    assert clean(raw, source, DE) == expected


def test_keep_outer_whitespace() -> None:
    assert keep_outer_whitespace("  Hello\n", "Hallo") == "  Hallo\n"
    assert keep_outer_whitespace("Hello", "Hallo") == "Hallo"
    assert keep_outer_whitespace(" \n", "") == " \n"


def test_glossary_terms_in_each_formats_way() -> None:
    terms = [("batch", "Stapel"), ("GPU", "Grafikprozessor")]
    chat = user_text(FORMATS["chat"]("A batch on the GPU.", EN, DE, terms))
    assert chat == (
        "Translate the following English text into German. Reply with the translation only, "
        'without explanations, notes or quotation marks.\nTranslate these terms as given: "batch" '
        'as "Stapel"; "GPU" as "Grafikprozessor".\n\nA batch on the GPU.'
    )
    # Hunyuan-MT's model card: a "参考下面的翻译：" block, one "X 翻译成 Y" line per term.
    hunyuan = user_text(FORMATS["hunyuan-mt"]("一批。", ZH, EN, [("批", "batch")]))
    assert (
        hunyuan
        == "参考下面的翻译：\n批 翻译成 batch\n\n把下面的文本翻译成英语，不要额外解释。\n\n一批。"
    )
    for name in ("seed-x", "tower", "alma"):
        prompt = FORMATS[name]("A batch.", EN, DE, terms[:1])
        text = prompt.text if isinstance(prompt, CompletionPrompt) else str(user_text(prompt))
        assert 'Translate these terms as given: "batch" as "Stapel".' in text
    # Without terms, every format is exactly as before.
    for build in FORMATS.values():
        assert build("Hi.", EN, DE, ()) == build("Hi.", EN, DE)


def test_instructions_from_deepl_values_go_into_instruction_prompts_only() -> None:
    asked = Instructions.of("prefer_more", context="A settings page.", custom=["Be brief"])
    assert (asked.formality, asked.prefer) == ("more", True)
    assert Instructions.of("default ").formality is None  # Weblate's "default " with a space
    assert Instructions.of("informal") == Instructions(formality="less", prefer=True)
    content = user_text(FORMATS["chat"]("Save", EN, DE, (), asked))
    assert content == (
        "Translate the following English text into German. Reply with the translation only, "
        "without explanations, notes or quotation marks.\n"
        "Use a formal register (formal forms of address).\n"
        "Be brief.\n"
        "For reference only, the text comes from this context (do not translate the "
        "context): A settings page.\n\nSave"
    )
    hunyuan = user_text(FORMATS["hunyuan-mt"]("Save", EN, DE, (("Save", "Speichern"),), asked))
    assert isinstance(hunyuan, str)
    assert hunyuan.startswith("Use a formal register")
    assert "参考下面的翻译：\nSave 翻译成 Speichern\n" in hunyuan
    assert "formal" not in str(FORMATS["alma"]("Save", EN, DE, (), asked))
    assert not Instructions()


def test_a_segment_with_placeholders_is_told_to_keep_them() -> None:
    from tolk.translation.prompts import chat

    prompt = chat("Run <g1>make serve</g1>, then <x2/>.", lang("en"), lang("de"))
    assert isinstance(prompt, ChatPrompt)
    system, user = prompt.messages
    assert system["role"] == "system"
    assert "the tags <g1> </g1> <x2/>: copy every tag" in system["content"]
    assert "copy every tag" not in user["content"]  # not where it reads as text
    assert user["content"].endswith("\nRun <g1>make serve</g1>, then <x2/>.")
    plain = chat("Run make serve.", lang("en"), lang("de"))
    assert isinstance(plain, ChatPrompt)
    assert "tags" not in plain.messages[0]["content"]


def test_a_rewrite_asks_for_the_rewrite_not_a_translation() -> None:
    asked = Instructions(rewrite="correct its errors. Write it in a business style.")
    prompt = chat("Teh museum open at nine.", lang("en"), lang("en"), (), asked)
    assert isinstance(prompt, ChatPrompt)
    content = prompt.messages[-1]["content"]
    assert content.startswith("Rewrite the following English text: correct its errors.")
    assert "Translate" not in content
    into = chat("Guten Morgen.", lang("de"), lang("en"), (), asked)
    assert isinstance(into, ChatPrompt)
    assert into.messages[-1]["content"].startswith("Rewrite the following German text in English")


def test_a_style_rule_becomes_prompt_instructions() -> None:
    from tolk.server.api.deepl import rule_instructions
    from tolk.store.keys import CustomInstruction, StyleRule

    rule = StyleRule(
        "id",
        "owner",
        "house style",
        "en",
        0.0,
        0.0,
        configured_rules={"dates_and_times": {"calendar_era": "use_bc_and_ad"}},
        custom_instructions=(CustomInstruction("i", "formal", "Always use formal language"),),
    )
    lines = rule_instructions(rule)
    assert lines == ("Dates and times, calendar era: use bc and ad", "Always use formal language")
    prompt = chat("Hallo.", lang("de"), lang("en"), (), Instructions(custom=lines))
    assert isinstance(prompt, ChatPrompt)
    content = prompt.messages[-1]["content"]
    assert "Dates and times, calendar era: use bc and ad.\n" in content
    assert "Always use formal language.\n" in content


def test_examples_are_human_translations_of_the_shipped_sample_never_a_test_sentence() -> None:
    from tolk.budget import sample
    from tolk.translation.examples import examples

    for target in ("de", "fr", "es", "zh", "ne", "ja", "pt"):
        shown = examples(lang("en"), lang(target), 3)
        assert len(shown) == 3
        pairs = set(zip(sample("en") or (), sample(target) or (), strict=True))
        assert all(pair in pairs for pair in shown), target  # aligned: line N with line N
    # The sample is FLORES devtest 401-500; `tolk bench quality` scores lines 1-400 (where
    # this checkout has the shared data beside it).
    flores = FLORES / "eng.txt"
    if flores.exists():
        scored = set(flores.read_text("utf-8").splitlines()[:400])
        assert len(scored) > 390
        assert not scored & {s for s, _ in examples(EN, DE, 8)}
    assert examples(lang("de"), lang("en"), 2)[0][1] in (sample("en") or ())
    assert examples(lang("en"), lang("de"), 0) == []
    # No examples where the sample has the wrong variety, or no sentences at all.
    assert examples(lang("en"), lang("zh-Hant"), 2) == []
    assert examples(lang("en"), lang("pt-PT"), 2) == []
    assert examples(lang("en"), lang("ko"), 2) == []
    assert len(examples(lang("en-GB"), lang("pt-BR"), 2)) == 2


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("en", "de"),
        ("en", "fr"),
        ("en", "es"),
        ("en", "zh"),
        ("en", "ne"),
        ("en", "ja"),
        ("de", "en"),
        ("fr", "pt"),
    ],
)
def test_the_markup_example_marks_translated_words_on_both_sides(source: str, target: str) -> None:
    from tolk.budget import sample
    from tolk.translation.document import PLACEHOLDER, for_model
    from tolk.translation.examples import examples

    *plain, (marked, translation) = examples(lang(source), lang(target), 2, markup=True)
    assert len(plain) == 1
    assert "<" not in plain[0][0]
    assert plain == examples(lang(source), lang(target), 1)
    # The same placeholders on both sides (their order may move with the words)...
    tags = ["</g1>", "</g2>", "</g3>", "<g1>", "<g2>", "<g3>"]
    assert sorted(m[0] for m in PLACEHOLDER.finditer(marked)) == tags
    assert sorted(m[0] for m in PLACEHOLDER.finditer(translation)) == tags
    # ...around words that are translated, not carried over unchanged.
    for n in (1, 2, 3):
        words = (
            re.findall(rf"<g{n}>(.*?)</g{n}>", marked),
            re.findall(rf"<g{n}>(.*?)</g{n}>", translation),
        )
        assert len(words[0]) == len(words[1]) == 1
        assert words[0] != words[1]
    assert "](1)" in for_model(marked)  # as the default syntax shows it: a markdown link
    # Written for tolk: no sentence of the FLORES sample, and the same one for every pair.
    unmarked = PLACEHOLDER.sub("", marked)
    assert unmarked not in (sample(source) or ())
    english = examples(lang("de"), EN, 1, markup=True)[0][1]
    assert (
        PLACEHOLDER.sub("", english)
        == "The old bridge was closed yesterday because of the heavy rain."
    )
    assert len(PLACEHOLDER.sub("", english)) == 62


def test_the_markup_example_is_shown_whatever_prompt_example_chars() -> None:
    from tolk.translation.examples import LONGEST, examples

    for longest in (70, 90, LONGEST):
        shown = examples(EN, DE, 2, markup=True, longest=longest)
        assert len(shown) == 2
        assert "<g1>" in shown[-1][0]
    assert examples(EN, DE, 1, markup=True) == examples(EN, DE, 2, markup=True)[-1:]
    # None where the sample lacks a language, or for a variety it does not have.
    assert examples(EN, lang("ko"), 2, markup=True) == []
    assert examples(EN, lang("zh-Hant"), 2, markup=True) == []


def test_examples_come_before_the_text_as_earlier_turns(texts: TextMaker) -> None:
    from tolk.budget import Budgets, counting
    from tolk.config import ModelSettings
    from tolk.translation.jobs import plan_job

    settings = ModelSettings(name="m", path="x", languages=["en", "de"], prompt_examples=2)
    budgets = Budgets(counting(texts.tokenizer))
    job = plan_job(
        settings, texts.tokenizer, 4096, 0, "Good morning.", (lang("en"), lang("de")), budgets
    )
    prompt = str(texts.tokenizer.decode(job.prompt_ids))
    asked = "Translate the following English text into German."
    assert prompt.count(asked) == 3
    assert prompt.index("Obwohl alle Länder") < prompt.rindex(asked) < prompt.index("Good morning.")
    assert prompt.count("<|im_start|>assistant") == 3  # two examples answered, then the text's
    marked = plan_job(
        settings, texts.tokenizer, 4096, 0, "Run <g1>make</g1>.", (lang("en"), lang("de")), budgets
    )
    assert "](1)" not in prompt
    assert "](1)" in texts.tokenizer.decode(marked.prompt_ids)
    without = ModelSettings(name="m", path="x", languages=["en", "de"])
    plain = plan_job(
        without, texts.tokenizer, 4096, 0, "Good morning.", (lang("en"), lang("de")), budgets
    )
    assert texts.tokenizer.decode(plain.prompt_ids).count(asked) == 1
    assert len(plain.prompt_ids) < len(job.prompt_ids)


def test_prompt_example_chars_shows_shorter_examples_and_a_shorter_prompt(
    texts: TextMaker,
) -> None:
    from tolk.budget import Budgets, counting
    from tolk.config import ModelSettings
    from tolk.translation.examples import LONGEST, SHORTEST, examples
    from tolk.translation.jobs import plan_job

    for source, target in [("en", "de"), ("en", "ne"), ("de", "en")]:
        usual = examples(lang(source), lang(target), 2)
        short = examples(lang(source), lang(target), 2, longest=90)
        assert len(short) == 2
        assert short != usual
        assert all(SHORTEST <= len(s) <= 90 for s, _ in short)
        assert max(len(s) for s, _ in usual) > 90  # the usual ones are longer
        marked = examples(lang(source), lang(target), 2, markup=True, longest=90)
        assert all(len(s) <= 90 for s, _ in marked[:-1])
    assert examples(EN, DE, 2, longest=LONGEST) == examples(EN, DE, 2)
    # What `tolk bench quality` checks outputs against for copies holds both.
    from tolk.translation.examples import showable

    for longest in (LONGEST, 90):
        assert {t for _, t in examples(EN, DE, 2, longest=longest)} <= set(showable(EN, DE))
    pair = (lang("en"), lang("de"))
    budgets = Budgets(counting(texts.tokenizer))
    ids = {}
    for chars in (160, 90):
        settings = ModelSettings(
            name="m",
            path="x",
            languages=["en", "de"],
            prompt_examples=2,
            prompt_example_chars=chars,
        )
        job = plan_job(settings, texts.tokenizer, 4096, 0, "Good morning.", pair, budgets)
        ids[chars] = job.prompt_ids
        prompt = str(texts.tokenizer.decode(job.prompt_ids))
        for shown, _ in examples(*pair, 2, longest=chars):
            assert shown in prompt
    assert len(ids[90]) < 0.8 * len(ids[160])
    with pytest.raises(ValueError, match="prompt_example_chars"):
        ModelSettings(name="m", path="x", languages=["en"], prompt_example_chars=59)


def test_bare_example_turns_write_the_instruction_once(texts: TextMaker) -> None:
    """prompt_example_turns: bare shows the same examples, each turn the sentence alone; the
    text's own turn still asks."""
    from tolk.budget import Budgets, counting
    from tolk.config import ModelSettings
    from tolk.translation.examples import examples
    from tolk.translation.jobs import plan_job

    pair = (lang("en"), lang("de"))
    budgets = Budgets(counting(texts.tokenizer))
    asked = "Translate the following English text into German."
    prompts = {}
    for turns in ("asked", "bare"):
        settings = ModelSettings(
            name="m",
            path="x",
            languages=["en", "de"],
            prompt_examples=2,
            prompt_example_turns=turns,
        )
        job = plan_job(settings, texts.tokenizer, 4096, 0, "Good morning.", pair, budgets)
        prompts[turns] = (job, str(texts.tokenizer.decode(job.prompt_ids)))
        marked = plan_job(settings, texts.tokenizer, 4096, 0, "Run <g1>make</g1>.", pair, budgets)
        shown = str(texts.tokenizer.decode(marked.prompt_ids))
        assert shown.index("](1)") < shown.rindex(asked)  # the markup example, then the text
    (usual, as_asked), (bare, as_bare) = prompts["asked"], prompts["bare"]
    assert as_asked.count(asked) == 3
    assert as_bare.count(asked) == 1
    assert as_bare.rindex("<|im_start|>assistant") > as_bare.index(asked)  # with the text
    assert as_bare.index(asked) < as_bare.index("Good morning.")
    for source, translation in examples(*pair, 2):
        assert f"<|im_start|>user\n{source}<|im_end|>" in as_bare
        assert f"<|im_start|>assistant\n{translation}<|im_end|>" in as_bare
    assert bare.examples == usual.examples  # what the checks look for copies of
    assert bare.max_tokens == usual.max_tokens
    assert len(bare.prompt_ids) < len(usual.prompt_ids) - 40  # ~26 tokens an example
    with pytest.raises(ValueError, match="prompt_example_turns"):
        ModelSettings(name="m", path="x", languages=["en"], prompt_example_turns="none")


def test_placeholders_told_names_the_links_in_a_system_message(texts: TextMaker) -> None:
    """models[].placeholders_told: a segment shown with links and code spans gets a system
    message naming each, first (its retry too); a plain one, a tags one, or the option off:
    the prompt as before."""
    from tolk.budget import Budgets, counting
    from tolk.config import ModelSettings
    from tolk.translation.jobs import JobSettings, build_job, plan_job

    pair = (lang("en"), lang("de"))
    budgets = Budgets(counting(texts.tokenizer))
    marked = "Run <g1>make serve</g1> with <x2/> now."

    def prompt(text: str, **settings: Any) -> str:
        model = ModelSettings(
            name="m", path="x", languages=["en", "de"], prompt_examples=2, **settings
        )
        job = plan_job(model, texts.tokenizer, 4096, 0, text, pair, budgets)
        return str(texts.tokenizer.decode(job.prompt_ids))

    told = prompt(marked, placeholders_told=True)
    assert told.startswith("<|im_start|>system\nYou are a translator. The text contains the ")
    assert "markup [...](1) `2`: write each of them exactly once" in told
    assert told.index("markup [...](1)") < told.index("Run [make serve](1) with `2` now.")
    assert told.count("<|im_start|>system") == 1
    assert "The text contains" not in prompt(marked)  # off by default
    assert prompt("Run make now.", placeholders_told=True) == prompt("Run make now.")
    # Tags bring their own system message; nothing is added to it.
    tags = prompt(marked, placeholders_told=True, placeholders="tags")
    assert tags == prompt(marked, placeholders="tags")
    assert "<g1>" in tags
    assert "[...](1)" not in tags
    # A hostile text of 2,000 placeholders: the message names TOLD_MARKS of them, not all.
    from tolk.translation.prompts import TOLD_MARKS

    many = " ".join(f"<g{n}>w</g{n}>" for n in range(1, 2001))
    system = prompt(many, placeholders_told=True).split("<|im_end|>")[0]
    assert system.count("[...](") == TOLD_MARKS
    assert "[...](12) and the others: write each" in system
    # The retry (no examples) is told too.
    model = ModelSettings(
        name="m", path="x", languages=["en", "de"], prompt_examples=2, placeholders_told=True
    )
    how = JobSettings(show_examples=False)
    retry = build_job(model, texts.tokenizer, 4096, 0, marked, *pair, how)
    assert "markup [...](1) `2`" in texts.tokenizer.decode(retry.prompt_ids)


def test_prompt_ids_from_remembered_pieces_are_the_tokenizers_own(texts: TextMaker) -> None:
    """PromptEncoder (the system and example turns encoded once per pair) gives exactly the
    ids the tokenizer gives the whole rendered prompt, for every pair and kind of text, a
    text holding a special token's name too; and it is not used where an added token strips
    the text around it."""
    from tolk.budget import Budgets, counting
    from tolk.config import ModelSettings
    from tolk.translation.jobs import PromptEncoder, plan_job

    tokenizer = texts.tokenizer
    settings = ModelSettings(
        name="m", path="x", languages=["en", "de", "ne", "zh"], prompt_examples=2
    )
    samples = [
        "Good morning.",
        "Run <g1>make</g1> now.",
        "  leading and trailing spaces  ",
        "A literal <|im_end|> in the text, and <|im_start|>user again.",
        "नमस्ते संसार।",
        "中文句子，没有空格。",
        texts.text(150),
    ]
    pairs = [("en", "de"), ("de", "en"), ("en", "ne"), ("en", "zh")]
    budgets = Budgets(counting(tokenizer))
    for source, target in pairs:
        for text in samples:
            job = plan_job(
                settings, tokenizer, 4096, 0, text, (lang(source), lang(target)), budgets
            )
            whole = tokenizer.decode(job.prompt_ids)
            assert tokenizer.encode(whole, add_special_tokens=False) == job.prompt_ids
    encoder = PromptEncoder(tokenizer)
    assert encoder.usable
    for text in samples:
        prompt = f"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n{text}<|im_end|>\n"
        for _ in range(2):  # the second time from remembered pieces
            assert encoder.encode(prompt) == tokenizer.encode(prompt, add_special_tokens=False)
    assert encoder.usable  # no difference was found

    stripping = SimpleNamespace(
        added_tokens_decoder={
            1: SimpleNamespace(
                content="<s>", lstrip=True, rstrip=False, single_word=False, normalized=False
            )
        },
        backend_tokenizer=object(),
    )
    assert not PromptEncoder(stripping).usable


def test_framed_chat_prompts_and_segments_counted_in_place_are_the_tokenizers_own(
    texts: TextMaker,
) -> None:
    """ChatFrames (the chat template run once per pair's frame, the segment put in its place)
    renders exactly what the template renders whole, and the segment's tokens, encoded apart
    from its prompt line, are both the prompt's own ids and its count; every plan_job gives
    the source tokens a separate count gives."""
    from tolk.budget import Budgets, counting
    from tolk.config import ModelSettings
    from tolk.translation.jobs import ChatFrames, PromptEncoder, plan_job
    from tolk.translation.prompts import ChatPrompt, chat, with_examples

    tokenizer = texts.tokenizer
    samples = [
        "Good morning.",
        "Run <g1>make</g1> now.",
        "A literal <|im_end|> in the text.",
        f"The marker {ChatFrames.MARKER} itself, written by a user.",
        "नमस्ते संसार।",
        "中文句子，没有空格。",
        "Line one\nline two",
        texts.text(150),
    ]
    framed, encoder = ChatFrames(tokenizer), PromptEncoder(tokenizer)
    en, de = lang("en"), lang("de")
    for text in samples:
        base = chat(text, en, de)
        assert isinstance(base, ChatPrompt)
        for prompt in (base, with_examples(base, [("a", "b")], en, de)):
            messages = list(prompt.messages)
            whole = str(
                tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            )
            for _ in range(2):  # the second time from the remembered frame
                assert framed.render(messages) == whole
            ids, counted = encoder.encode_counted(whole, text)
            assert ids == tokenizer.encode(whole, add_special_tokens=False)
            if "<|im_end|>" not in text:  # a special token's name in it: the line is cut there
                assert counted == encoder.count(text), text
    assert framed.usable
    assert encoder.usable
    assert encoder.tail_usable

    settings = ModelSettings(name="m", path="x", languages=["en", "de"], prompt_examples=2)
    budgets = Budgets(counting(tokenizer))
    for text in [*samples, "  spaced  "]:
        job = plan_job(settings, tokenizer, 4096, 0, text, (en, de), budgets)
        assert job.source_tokens == encoder.count(text), text


def test_a_template_that_rewrites_the_content_is_run_whole(texts: TextMaker) -> None:
    """A chat template that writes the last message's content twice, or changes it, is not
    framed: every prompt is then the template's whole rendering."""
    from tolk.translation.jobs import ChatFrames

    class Doubling:
        def apply_chat_template(self, messages: Any, **_: Any) -> str:
            return "".join(f"[{m['role']}]{m['content']}|{m['content']}" for m in messages)

    class Upper:
        def apply_chat_template(self, messages: Any, **_: Any) -> str:
            return "".join(f"[{m['role']}]{m['content'].upper()}" for m in messages)

    messages = [{"role": "user", "content": "Hello there"}]
    doubled = ChatFrames(Doubling())
    assert doubled.render(messages) == "[user]Hello there|Hello there"
    assert not doubled.usable
    upper = ChatFrames(Upper())
    assert upper.render(messages) == "[user]HELLO THERE"  # the first prompt is checked whole
    assert not upper.usable


def test_a_segment_that_encodes_otherwise_alone_turns_the_cut_off(texts: TextMaker) -> None:
    """Where a tokenizer encodes the segment differently alone than after its line break (as
    a sentencepiece tokenizer with a dummy prefix would), the first prompt shows it: the
    ids returned are the tokenizer's own, and the segment is not cut out again."""
    from tolk.translation.jobs import PromptEncoder

    tokenizer = texts.tokenizer
    encoder = PromptEncoder(tokenizer)
    real: Any = encoder._backend

    class Prefixing:  # encodes a text alone with a space in front, as a dummy prefix would
        def encode(self, text: str, add_special_tokens: bool = False) -> Any:
            alone = " " + text if text == "Bonjour" else text
            return real.encode(alone, add_special_tokens=add_special_tokens)

    encoder._backend = Prefixing()
    prompt = "<|im_start|>user\nTranslate:\nBonjour<|im_end|>\n"
    ids, counted = encoder.encode_counted(prompt, "Bonjour")
    assert ids == tokenizer.encode(prompt, add_special_tokens=False)
    assert counted is None
    assert not encoder.tail_usable
    assert encoder.usable  # the remembered pieces themselves were right
