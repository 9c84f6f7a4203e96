"""HTTP bodies: what clients send and receive."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import UploadFile
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tolk.translation.formats import Format
from tolk.translation.request import MemoryMode
from tolk.translation.segment import SplitMode

Formality = Literal["default", "more", "less", "prefer_more", "prefer_less"]


class TranslateRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"text": "Hello, world!", "source_lang": "en", "target_lang": "de"},
                {"text": ["One.", "Two."], "source_lang": "EN", "target_lang": "ne"},
                {
                    "text": "# Title\n\nSome *markdown* with `code`.",
                    "source_lang": "en",
                    "target_lang": "fr",
                    "format": "markdown",
                },
            ]
        },
    )

    text: str | list[str] = Field(
        description="A text, or a list of texts translated independently and returned in order."
    )
    source_lang: str | None = Field(
        None,
        max_length=64,
        description="BCP-47 or ISO 639 code: en, en-US, eng. Omitted or 'auto': each text's "
        "language is detected (see `detected` in the response).",
    )
    target_lang: str = Field(min_length=1, max_length=64)
    model: str | None = Field(
        None, description="A configured model name; by default the first that serves the pair."
    )
    split: SplitMode = Field(
        "sentences",
        description="How texts are cut into segments translated side by side: 'sentences' "
        "(each line; a long line at sentence boundaries), 'paragraphs' (blank-line "
        "separated; list items apart), 'none' (each text whole).",
    )
    tag_handling: Literal["html", "xml"] | None = Field(
        None,
        description="As DeepL's: the text is markup (HTML, or XML such as Weblate's "
        '`<x id="1"></x>`); the same as `format: html`, which keeps every tag as written.',
    )
    glossary: dict[str, str] | None = Field(
        None,
        description="Term translations, source term -> target term: the terms found in a "
        "segment are given to the model in its prompt (a model follows them usually, not "
        "always).",
    )
    glossary_id: str | None = Field(
        None, description="A glossary configured on the server for this language pair."
    )
    do_not_translate: list[str] | None = Field(
        None,
        description="Terms that come back exactly as written (protected as placeholders).",
    )
    stream: bool = Field(
        False,
        description="Answer with Server-Sent Events: a `segment` event per finished segment "
        "({index, text, translation, done, planned, in_flight}) as they finish, then `done` "
        "with this endpoint's usual response (or `error` with the error shape). A client "
        "that disconnects stops the rest.",
    )
    formality: Formality = Field(
        "default",
        description="As DeepL's: a formal or informal register, asked of the model in its "
        "prompt. 'more'/'less' fail (400) where the model's prompt format takes no "
        "instructions or the target has no registers; 'prefer_' ones are then ignored.",
    )
    context: str | None = Field(
        None,
        max_length=4000,
        description="Text the translation should fit (e.g. the surrounding paragraph): given "
        "to the model, not translated, not counted.",
    )
    instructions: list[str] | None = Field(
        None,
        max_length=10,
        description="Free instructions to the model ('use British spelling'), at most 10 of "
        "300 characters; only for models with instruction prompts (chat, hunyuan-mt, tower).",
    )
    format: Format = Field(
        "text",
        description="'text' (nothing interpreted), 'markdown' (CommonMark with GFM tables: "
        "prose translated, code, URLs, HTML and table syntax kept byte for byte) or 'html' "
        "(text nodes and alt/title/placeholder/aria-label translated, every tag kept; also "
        "XML-ish markup).",
    )

    memory: Literal["use", "refresh", "off"] = Field(
        "use",
        description="The segment cache: 'use' (segments translated before, with the same "
        "model, prompt and settings, come from it without engine work), 'refresh' "
        "(translated anew, and cached), 'off' (neither). A `Cache-Control: no-cache` or "
        "`no-store` header does the same on every API.",
    )
    translation_memory_id: str | None = Field(
        None,
        description="A translation memory (a TMX file imported with `tolk memories import`): "
        "a segment found in it is its translation; a close one (at least "
        "`translation_memory_threshold` similar) is given to the model as a reference.",
    )
    translation_memory_threshold: float = Field(
        75, ge=0, le=100, description="Similarity (0-100) a memory's unit needs to be used."
    )
    alternatives: int = Field(
        0,
        ge=0,
        description="Other translations of each text to return besides the chosen one, at "
        "most the server's `max_alternatives`: sampled outputs of the model (each costs about "
        "one more translation's output tokens, counted in `usage`) that passed the checks, "
        "distinct; fewer when the samples agree.",
    )

    @model_validator(mode="after")
    def _tag_handling_is_html(self) -> TranslateRequest:
        if self.tag_handling is not None:
            if self.format not in ("text", "html"):
                raise ValueError(
                    f"tag_handling is for markup; it cannot go with format {self.format}"
                )
            self.format = "html"
        return self

    @field_validator("instructions")
    @classmethod
    def _short_instructions(cls, value: list[str] | None) -> list[str] | None:
        if value and any(len(i) > 300 for i in value):
            raise ValueError("each instruction is at most 300 characters")
        return value


class TranslateFileForm(BaseModel):
    """`POST /translate/file`'s multipart form: the file, and the options /translate has for
    a whole file."""

    file: UploadFile = Field(description="The file; its extension gives its type.")
    target_lang: str = Field(min_length=1, max_length=64)
    source_lang: str | None = Field(None, max_length=64, description="Omitted or 'auto': detected.")
    model: str | None = None
    split: SplitMode = Field("sentences", description="As on /translate.")
    glossary_id: str | None = Field(None, description="As on /translate.")
    formality: Formality = Field("default", description="As on /translate.")
    memory: MemoryMode = Field("use", description="As on /translate.")


class Candidate(BaseModel):
    language: str
    confidence: float


class Detected(BaseModel):
    language: str = Field(description="A language this server serves (BCP-47), or the fallback.")
    confidence: float = Field(description="0..1, among the served languages.")
    reliable: bool = Field(description="False: too short, too mixed, or no letters at all.")
    candidates: list[Candidate] = Field(default_factory=list, description="Best first, up to 3.")


class DetectRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | list[str] = Field(description="A text, or a list of texts.")


class DetectResponse(BaseModel):
    detected: Detected | list[Detected] = Field(description="Same shape as `text`.")


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    characters: int = Field(description="Characters of source text translated.")
    segments: int = Field(description="Engine requests the texts were cut into (distinct ones).")
    memory_segments: int = Field(
        0, description="Of `segments`, those answered from the segment cache (no engine work)."
    )
    translation_memory_segments: int = Field(
        0, description="Of `segments`, exact matches in the request's translation memory."
    )


class TextWarning(BaseModel):
    text: int = Field(description="Which text (its index in the request's `text`; 0 for one).")
    code: str = Field(
        description="off_target, echo, loop, truncated, cut_character, empty, "
        "markup_dropped, markup_split or untranslated (README: 'Warnings')."
    )
    message: str = Field(description="What it means, in words.")
    units: int = Field(description="How many of the text's segments or markup units have it.")


class TranslateResponse(BaseModel):
    translation: str | list[str] = Field(description="Same shape as the request's `text`.")
    source_lang: str = Field(description="Normalised source language tag (the first text's).")
    target_lang: str
    model: str
    detected: Detected | list[Detected] | None = Field(
        None, description="When the source was detected: per text, same shape as `text`."
    )
    usage: Usage
    alternatives: list[str] | list[list[str]] | None = Field(
        None,
        description="When asked for: each text's other translations, same shape as `text`.",
    )
    warnings: list[TextWarning] = Field(
        default_factory=list,
        description="What tolk suspects about a translation after checking it (and trying "
        "once more): wrong language, the source echoed, a loop, cut at the budget, markup "
        "that could not be kept. Empty when every text passed its checks.",
    )
    # DeepLX's answer's fields, so that a DeepLX client (KISS, Pot, Zotero: they send this
    # endpoint's body already) pointed here reads its translation (`data`); tolk's own
    # fields keep their meaning, `source_lang` and `target_lang` tolk's tags.
    code: int = Field(200, description="DeepLX's: 200.")
    id: int = Field(0, description="DeepLX's: a random number.")
    data: str | None = Field(
        None, description="DeepLX's name for `translation`, when `text` is one string."
    )
    method: str = Field("tolk", description="DeepLX's: which service answered.")


class ErrorBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    code: str = Field(description="Stable, machine-readable: branch on this.")
    message: str = Field(description="What went wrong and what to do about it.")
    request_id: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


class ModelLanguages(BaseModel):
    model: str
    prompt_format: str
    languages: list[str] = Field(default_factory=list, description="Any pair among these.")
    pairs: list[str] = Field(default_factory=list, description="Explicit pairs, 'source>target'.")
    ready: bool
    capacity: int = Field(
        description="Requests this model admits at once (max_num_seqs + max_waiting); the "
        "server refuses new translations while it holds its models' summed capacity, and a "
        "tolk proxy refuses on sight while its own requests there reach it."
    )


class LanguagesResponse(BaseModel):
    models: list[ModelLanguages]


class ReadyResponse(BaseModel):
    status: str
    models: dict[str, str]


class HealthResponse(BaseModel):
    status: str


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in {
        400: "Unsupported language pair, invalid language code, unknown model or glossary",
        413: "Too much text, too many texts, or a body over the size limit",
        422: "The body does not match the schema (the field is named)",
        503: "Overloaded (see Retry-After), engine unavailable, or shutting down",
        504: "The request's deadline passed; the engine work was stopped",
    }.items()
}
