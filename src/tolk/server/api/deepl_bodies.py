"""DeepL's request bodies (`/v2/translate`, `/v2/document`, `/v2/write/...`, and the v3
glossaries' and style rules'): JSON, or a
urlencoded or multipart form, with parameters also in the query (tolk.server.params), read
into models validated as DeepL validates them, with DeepL's messages (400, `{"message"}`).

Each model's fields are checked in the order they are declared, required ones first (its
`mode="before"` validator), so that a request with several faults is answered with the one
DeepL (and tolk before these models) names first."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args
from xml.etree import ElementTree

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from tolk.errors import InvalidLanguage, InvalidRequest
from tolk.languages import Lang, request_lang
from tolk.server.params import MANY, ParamsModel, strings_of, text_field, text_of
from tolk.store.memories import DEFAULT_THRESHOLD
from tolk.translation.html_format import TagRules
from tolk.translation.prompts import Instructions
from tolk.translation.request import GlossaryRequest, MemoryRequest
from tolk.translation.segment import SplitMode

MAX_INSTRUCTIONS, MAX_INSTRUCTION_CHARS = 10, 300
MAX_GLOSSARY_IDS = 5
ModelType = Literal["quality_optimized", "latency_optimized", "prefer_quality_optimized"]
MODEL_TYPES: tuple[str, ...] = get_args(ModelType)
Formality = Literal["default", "more", "less", "prefer_more", "prefer_less", "formal", "informal"]
SplitSentences = Literal["0", "1", "off", "on", "default", "nonewlines"]


def deepl_lang(code: str, field: str) -> Lang:
    """A language code of a DeepL request; an unknown one answered as DeepL does ("Value for
    'target_lang' not supported", which the clients' tests match), with tolk's reason."""
    try:
        return request_lang(code, field)
    except InvalidLanguage as exc:
        raise InvalidLanguage(f"Value for '{field}' not supported: {exc}", field=field) from exc


# -- what several bodies share -------------------------------------------------------------


def _texts(values: Any) -> list[str]:
    """DeepL's `text`: one string or several, required."""
    if not values:
        raise InvalidRequest("Parameter 'text' not specified.", field="text")
    if not all(isinstance(t, str) for t in values):
        raise InvalidRequest("Parameter 'text' must be strings.", field="text")
    return list(values)


def _required_target(data: Any) -> Any:
    code = text_of(data.get("target_lang"), "target_lang")
    if not code:
        raise InvalidRequest("Parameter 'target_lang' not specified.", field="target_lang")
    return {**data, "target_lang": code}


def _language(value: Any, info: ValidationInfo) -> str | None:
    """A language code as sent (checked: DeepL's message for an unknown one); "" is none."""
    assert info.field_name is not None
    code = text_of(value, info.field_name)
    if not code:
        return None
    deepl_lang(code, info.field_name)
    return code


def _strings(value: Any, info: ValidationInfo) -> list[str]:
    assert info.field_name is not None
    return strings_of(value, info.field_name) or []


def _glossary_ids(value: Any) -> list[str]:
    ids = strings_of(value, "glossary_ids") or []
    if len(ids) > MAX_GLOSSARY_IDS:
        raise InvalidRequest(
            f"glossary_ids must not contain more than {MAX_GLOSSARY_IDS} glossary IDs",
            field="glossary_ids",
        )
    return ids


def _glossary_id(value: Any, info: ValidationInfo) -> str | None:
    """`glossary_id`, checked with `glossary_ids` (before it): a glossary needs a source."""
    one = text_of(value, "glossary_id")
    if (one or info.data.get("glossary_ids")) and not info.data.get("source_lang"):
        raise InvalidRequest("source_lang is required when a glossary is used")
    return one


def _formality(value: Any) -> str:
    formality = (text_of(value, "formality") or "default").strip().lower()
    if formality not in get_args(Formality):
        raise InvalidRequest(f"Value for 'formality' not supported: {formality}")
    return formality


def _custom(value: Any) -> list[str]:
    custom = strings_of(value, "custom_instructions", commas=False) or []
    if len(custom) > MAX_INSTRUCTIONS or any(len(c) > MAX_INSTRUCTION_CHARS for c in custom):
        raise InvalidRequest(
            f"custom_instructions: at most {MAX_INSTRUCTIONS}, of {MAX_INSTRUCTION_CHARS} "
            "characters each",
            field="custom_instructions",
        )
    return custom


Text = Annotated[str | None, BeforeValidator(text_field)]
Language = Annotated[str | None, BeforeValidator(_language)]
Target = Annotated[
    str,
    BeforeValidator(_language),
    Field(description="A DeepL language code: DE, EN-GB, PT-BR, ZH-HANS, ... (any case)."),
]
SOURCE = "A DeepL language code (EN, DE, ...); omitted: detected, text by text."
Tags = Annotated[list[str], MANY, BeforeValidator(_strings)]
Texts = Annotated[
    list[str],
    MANY,
    BeforeValidator(_texts),
    Field(description="The texts, in order (in JSON, one string is one text)."),
]
GlossaryIds = Annotated[
    list[str],
    MANY,
    BeforeValidator(_glossary_ids),
    Field(max_length=MAX_GLOSSARY_IDS, description="Glossaries whose entries are used."),
]
# Validated even when absent (validate_default): with `glossary_ids`, a glossary needs a source.
GlossaryId = Annotated[
    str | None,
    BeforeValidator(_glossary_id),
    Field(validate_default=True, description="A glossary; needs source_lang."),
]
FormalityField = Annotated[
    Formality,
    BeforeValidator(_formality),
    Field(description="A formal or informal register (prefer_ ones only where served)."),
]
CustomInstructions = Annotated[
    list[str],
    MANY,
    BeforeValidator(_custom),
    Field(
        max_length=MAX_INSTRUCTIONS,
        description=f"Free instructions to the model, up to {MAX_INSTRUCTIONS} of "
        f"{MAX_INSTRUCTION_CHARS} characters each.",
    ),
]
CONTEXT = "Text the translation should fit (not translated, not billed)."
STYLE_ID = "A style rule (/v3/style_rules) for the target language: its rules and instructions."


def glossary_of(glossary_id: str | None, glossary_ids: list[str]) -> GlossaryRequest:
    """`glossary_id` and `glossary_ids`: their entries together."""
    return GlossaryRequest(ids=[glossary_id, *glossary_ids] if glossary_id else glossary_ids)


# -- /v2/translate -----------------------------------------------------------------------------


class DeepLTranslate(ParamsModel):
    """DeepL's /v2/translate. Also taken and ignored, as tolk always does them or has no
    use for them: preserve_formatting, outline_detection, show_billed_characters."""

    text: Texts
    source_lang: Language = Field(None, description=SOURCE)
    target_lang: Target
    tag_handling: Literal["xml", "html"] | None = Field(
        None, description="The texts are markup: tolk's html format, every tag kept."
    )
    tag_handling_version: Literal["v1", "v2"] | None = Field(
        None, description="Echoed in each translation; v2 parses XML strictly."
    )
    ignore_tags: Tags = Field(default_factory=list, description="Elements kept as they are.")
    splitting_tags: Tags = Field(default_factory=list)
    non_splitting_tags: Tags = Field(default_factory=list)
    glossary_ids: GlossaryIds = Field(default_factory=list)
    glossary_id: GlossaryId = None
    translation_memory_id: Text = Field(None, description="A translation memory (TMX).")
    translation_memory_threshold: float | None = Field(
        None, ge=0, le=100, description=f"0-100 (default {DEFAULT_THRESHOLD:g})."
    )
    model_type: ModelType | None = Field(None, description="Mapped by deepl.model_types.")
    split_sentences: SplitSentences = Field("1", description="0: each text whole.")
    formality: FormalityField = "default"
    custom_instructions: CustomInstructions = Field(default_factory=list)
    context: Text = Field(None, description=CONTEXT)
    style_id: Text = Field(None, description=STYLE_ID)

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        return _required_target({**data, "text": _texts(data.get("text"))})

    @field_validator("tag_handling", mode="before")
    @classmethod
    def _tag_handling(cls, value: Any) -> str | None:
        tag_handling = text_of(value, "tag_handling")
        if tag_handling not in (None, "xml", "html"):
            raise InvalidRequest(f"Value for 'tag_handling' not supported: {tag_handling}")
        return tag_handling

    @field_validator("tag_handling_version", mode="before")
    @classmethod
    def _tag_handling_version(cls, value: Any, info: ValidationInfo) -> str | None:
        """v1 or v2, echoed in each translation. With v2, XML is parsed strictly, as DeepL's
        v2 does: text that is not well-formed XML (an unclosed tag, an entity XML does not
        define) is refused with DeepL's message. tolk's tag handling is the same for both."""
        version = text_of(value, "tag_handling_version")
        if version not in (None, "v1", "v2"):
            raise InvalidRequest(f"Value for 'tag_handling_version' not supported: {version}")
        if version == "v2" and info.data.get("tag_handling") == "xml":
            for text in info.data["text"]:
                try:
                    # No DOCTYPE can appear inside an element, so no entity can be declared.
                    ElementTree.fromstring(f"<tolk-root>{text}</tolk-root>")
                except ElementTree.ParseError as exc:
                    raise InvalidRequest(
                        f"Tag handling parsing failed, please check input. ({exc})",
                        field="text",
                    ) from exc
        return version

    @field_validator("translation_memory_threshold", mode="before")
    @classmethod
    def _threshold(cls, value: Any, info: ValidationInfo) -> float:
        """0-100, for a `translation_memory_id` only."""
        threshold = text_of(value, "translation_memory_threshold")
        if info.data.get("translation_memory_id") is None:
            raise InvalidRequest(
                "translation_memory_threshold requires translation_memory_id",
                field="translation_memory_threshold",
            )
        try:
            number = float(threshold) if threshold is not None else DEFAULT_THRESHOLD
        except ValueError:
            number = -1.0
        if not 0 <= number <= 100:
            raise InvalidRequest(
                f"Value for 'translation_memory_threshold' not supported: {threshold} (0 to 100)",
                field="translation_memory_threshold",
            )
        return number

    @field_validator("model_type", mode="before")
    @classmethod
    def _model_type(cls, value: Any) -> str | None:
        model_type = text_of(value, "model_type")
        if model_type is not None and model_type not in MODEL_TYPES:
            raise InvalidRequest(f"Value for 'model_type' not supported: {model_type}")
        return model_type

    @field_validator("split_sentences", mode="before")
    @classmethod
    def _split_sentences(cls, value: Any) -> str:
        split = (text_of(value, "split_sentences") or "1").strip().lower()
        if split not in get_args(SplitSentences):
            raise InvalidRequest(
                f"Value for 'split_sentences' not supported: {split}; use 0, 1 or nonewlines",
                field="split_sentences",
            )
        return split

    @property
    def source(self) -> Lang | None:
        return deepl_lang(self.source_lang, "source_lang") if self.source_lang else None

    @property
    def target(self) -> Lang:
        return deepl_lang(self.target_lang, "target_lang")

    @property
    def split(self) -> SplitMode:
        """0 (off): each text whole; 1, on, default, nonewlines: sentences (tolk never
        joins lines)."""
        return "none" if self.split_sentences in ("0", "off") else "sentences"

    @property
    def rules(self) -> TagRules:
        return TagRules(
            ignore=frozenset(self.ignore_tags),
            splitting=frozenset(self.splitting_tags),
            non_splitting=frozenset(self.non_splitting_tags),
        )

    def glossary(self) -> GlossaryRequest:
        return glossary_of(self.glossary_id, self.glossary_ids)

    def translation_memory(self) -> MemoryRequest | None:
        memory_id = self.translation_memory_id
        if memory_id is None:
            return None
        threshold = self.translation_memory_threshold
        return MemoryRequest(memory_id, DEFAULT_THRESHOLD if threshold is None else threshold)

    def instructions(self) -> Instructions:
        return Instructions.of(self.formality, self.context, self.custom_instructions)


# -- /v2/document --------------------------------------------------------------------------


class DeepLDocument(ParamsModel):
    """DeepL's /v2/document, but its file (and `filename`, `output_format`: the upload's,
    checked first, tolk.server.gateway.Upload): as on /v2/translate, glossaries, formality
    (the client always sends one; `default` asks nothing) and a style rule (sent through
    the client's extra_body_parameters)."""

    source_lang: Language = Field(None, description=SOURCE)
    target_lang: Target
    glossary_ids: GlossaryIds = Field(default_factory=list)
    glossary_id: GlossaryId = None
    formality: FormalityField = "default"
    custom_instructions: CustomInstructions = Field(default_factory=list)
    context: Text = Field(None, description=CONTEXT)
    style_id: Text = Field(None, description=STYLE_ID)

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        return _required_target(data)

    @property
    def source(self) -> Lang | None:
        return deepl_lang(self.source_lang, "source_lang") if self.source_lang else None

    @property
    def target(self) -> Lang:
        return deepl_lang(self.target_lang, "target_lang")

    def glossary(self) -> GlossaryRequest:
        return glossary_of(self.glossary_id, self.glossary_ids)

    def instructions(self) -> Instructions:
        return Instructions.of(self.formality, self.context, self.custom_instructions)


UPLOAD_FIELDS: dict[str, Any] = {
    "file": {"type": "string", "format": "binary", "description": "The document."},
    "filename": {"type": "string", "description": "Its name, if not the file's own."},
    "output_format": {"type": "string", "description": "Only the document's own format."},
}


# -- /v2/write/... -----------------------------------------------------------------------------


class DeepLWrite(ParamsModel):
    """DeepL Write's texts, and the language they are written in (omitted: their own)."""

    text: Texts
    target_lang: Language = Field(None, description="Omitted: each text's own language.")

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        return {**data, "text": _texts(data.get("text"))}

    @property
    def target(self) -> Lang | None:
        return deepl_lang(self.target_lang, "target_lang") if self.target_lang else None


AIM = "correct its errors and make it clear and fluent, keeping its meaning."
# DeepL's values, and what each asks of the model (`prefer_` ones the same: every value
# applies to every language tolk serves with a chat model).
WRITING_STYLES = {
    "default": "",
    "academic": "Write it in an academic style.",
    "business": "Write it in a business style.",
    "casual": "Write it in a casual style.",
    "simple": "Write it in simple, plain language.",
}
TONES = {
    "default": "",
    "confident": "Use a confident tone.",
    "diplomatic": "Use a diplomatic tone.",
    "enthusiastic": "Use an enthusiastic tone.",
    "friendly": "Use a friendly tone.",
}


def _aim(style: str | None, tone: str | None) -> str:
    if style and tone:
        raise InvalidRequest(
            "Bad request. Reason: Both writing_style and tone defined. Currently only style "
            "OR tone can be chosen for a single request.",
            field="tone",
        )
    table, field, value = (
        (TONES, "tone", tone) if tone else (WRITING_STYLES, "writing_style", style)
    )
    wording = table.get((value or "default").removeprefix("prefer_"))
    if wording is None:
        raise InvalidRequest(
            f"Value for '{field}' not supported: {value}; use one of {', '.join(table)} "
            "(or prefer_...)",
            field=field,
        )
    return f"{AIM} {wording}".strip()


class Rephrase(ParamsModel):
    """How /v2/write/rephrase rewrites: in a writing style or a tone (DeepL's values, or
    their `prefer_` ones), not both."""

    writing_style: Text = Field(None, description=", ".join(WRITING_STYLES) + " (or prefer_...)")
    tone: Text = Field(None, description=", ".join(TONES) + " (or prefer_...)")

    @model_validator(mode="after")
    def _one_aim(self) -> Rephrase:
        _aim(self.writing_style, self.tone)
        return self

    @property
    def aim(self) -> str:
        """What the model is asked to do with each text."""
        return _aim(self.writing_style, self.tone)


# -- v3 glossaries (tolk.server.api.deepl_glossaries) ---------------------------------------

ENTRIES_FORMATS = ("tsv", "csv")
_NOT_A_DICTIONARY = (
    "Invalid glossary dictionary: an object with source_lang, target_lang, entries and "
    "entries_format"
)


class GlossaryDictionaryBody(ParamsModel):
    """One dictionary of a v3 glossary: the body of `PUT /v3/glossaries/{id}/dictionaries`,
    and each of a glossary's `dictionaries`. Its shape is checked here; its pair (served by
    some model?) and its entries (parsed off the event loop) by the handler."""

    source_lang: str = Field(description="The dictionary's source language.")
    target_lang: str = Field(description="Its target language.")
    entries: str = Field(
        description="Its entries: a `source<TAB>target` line each (tsv), or CSV rows (csv)."
    )
    entries_format: str = Field("tsv", description="tsv (the default) or csv.")

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise InvalidRequest(_NOT_A_DICTIONARY)
        source, target = data.get("source_lang"), data.get("target_lang")
        if not (isinstance(source, str) and isinstance(target, str)):
            raise InvalidRequest("Each dictionary needs source_lang and target_lang")
        entries = data.get("entries")
        if not isinstance(entries, str) or not entries.strip():
            raise InvalidRequest("Invalid glossary entries: none given")
        deepl_lang(source, "source_lang")
        deepl_lang(target, "target_lang")
        return {**data, "entries_format": str(data.get("entries_format") or "tsv")}

    @property
    def source(self) -> Lang:
        return deepl_lang(self.source_lang, "source_lang")

    @property
    def target(self) -> Lang:
        return deepl_lang(self.target_lang, "target_lang")


def _dictionary_list(value: Any) -> list[Any]:
    """`dictionaries` as sent: a list (its items checked by GlossaryDictionaryBody)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRequest(_NOT_A_DICTIONARY, field="dictionaries")
    return value


Dictionaries = Annotated[
    list[Any],
    BeforeValidator(_dictionary_list),
    Field(
        description="One dictionary per language pair: source_lang, target_lang, entries, "
        "entries_format.",
        json_schema_extra={"items": {"type": "object"}},
    ),
]


class GlossaryBody(ParamsModel):
    """`POST /v3/glossaries` (both required) and `PATCH /v3/glossaries/{id}` (either: a new
    name, dictionaries merged into the glossary's), read as `parsed` (its dictionaries
    checked)."""

    name: Text = Field(None, description="The glossary's name.")
    dictionaries: Dictionaries = Field(default_factory=list)

    @property
    def parsed(self) -> list[GlossaryDictionaryBody]:
        """Each dictionary checked (its entries as long as the body: call off the loop)."""
        return [GlossaryDictionaryBody.model_validate(d) for d in self.dictionaries]


class NewGlossary(GlossaryBody):
    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        if not text_of(data.get("name"), "name"):
            raise InvalidRequest("Parameter 'name' not specified.", field="name")
        raw = data.get("dictionaries")
        if not isinstance(raw, list) or not raw:
            raise InvalidRequest("Parameter 'dictionaries' not specified.", field="dictionaries")
        return data


class GlossaryChange(GlossaryBody):
    @model_validator(mode="before")
    @classmethod
    def _something(cls, data: Any) -> Any:
        if not text_of(data.get("name"), "name") and not data.get("dictionaries"):
            raise InvalidRequest("Nothing to update: give a name or dictionaries")
        return data


# -- v3 style rules (tolk.server.api.deepl_style_rules) -------------------------------------

MAX_STYLE_INSTRUCTIONS, MAX_PROMPT, MAX_LABEL = 200, 300, 100
STYLE_CATEGORIES = frozenset(
    {
        "dates_and_times",
        "formatting",
        "numbers",
        "punctuation",
        "spelling_and_grammar",
        "style_and_tone",
        "vocabulary",
    }
)


class InstructionBody(ParamsModel):
    """A style rule's custom instruction: the body of `POST .../custom_instructions` and
    `PUT .../custom_instructions/{id}`, and each of a new rule's `custom_instructions`."""

    label: str = Field(description=f"At most {MAX_LABEL} characters.")
    prompt: str = Field(description=f"The instruction, at most {MAX_PROMPT} characters.")
    source_language: str | None = Field(None, description="Only for texts in this language.")

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise InvalidRequest("A custom instruction is an object with label and prompt")
        label, prompt, source = data.get("label"), data.get("prompt"), data.get("source_language")
        if not isinstance(label, str) or not label.strip() or len(label) > MAX_LABEL:
            raise InvalidRequest(f"label: required, at most {MAX_LABEL} characters", field="label")
        if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > MAX_PROMPT:
            raise InvalidRequest(
                f"prompt: required, at most {MAX_PROMPT} characters", field="prompt"
            )
        if source is not None and not isinstance(source, str):
            raise InvalidRequest("source_language: a language code", field="source_language")
        return data


def parse_configured_rules(raw: Any) -> dict[str, dict[str, str]]:
    """A style rule's `configured_rules`: categories (STYLE_CATEGORIES), each {rule: option}."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(
        isinstance(rules, dict) and all(isinstance(v, str) for v in rules.values())
        for rules in raw.values()
    ):
        raise InvalidRequest("configured_rules: an object of categories, each {rule: option}")
    unknown = set(raw) - STYLE_CATEGORIES
    if unknown:
        raise InvalidRequest(
            f"configured_rules: unknown categories {', '.join(sorted(unknown))}; known: "
            f"{', '.join(sorted(STYLE_CATEGORIES))}"
        )
    return {category: dict(rules) for category, rules in raw.items()}


ConfiguredRules = Annotated[dict[str, dict[str, str]], BeforeValidator(parse_configured_rules)]


def _instruction_list(value: Any) -> list[Any]:
    raw = value or []
    if not isinstance(raw, list) or len(raw) > MAX_STYLE_INSTRUCTIONS:
        raise InvalidRequest(f"custom_instructions: a list of at most {MAX_STYLE_INSTRUCTIONS}")
    return raw


def _required_name(data: Any) -> None:
    if not text_of(data.get("name"), "name"):
        raise InvalidRequest("Parameter 'name' not specified.", field="name")


class StyleRuleName(ParamsModel):
    """`PATCH /v3/style_rules/{id}`: the rule's new name."""

    name: Text = Field(None, description="The style rule's name.")

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        _required_name(data)
        return data


class NewStyleRule(ParamsModel):
    """`POST /v3/style_rules`, checked in DeepL's order: the name, the language (one a model
    writes: `writes` in the validation context, ModelPool.gives_target), the instructions'
    list, the configured rules, then each instruction (`instructions`)."""

    name: Text = Field(None, description="The style rule's name.")
    language: Text = Field(None, description="The language the rule is for.")
    custom_instructions: Annotated[list[Any], BeforeValidator(_instruction_list)] = Field(
        default_factory=list,
        description=f"At most {MAX_STYLE_INSTRUCTIONS}: label, prompt, source_language.",
        json_schema_extra={"items": {"type": "object"}},
    )
    configured_rules: ConfiguredRules = Field(
        default_factory=dict, description="Categories, each {rule: option}."
    )

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any, info: ValidationInfo) -> Any:
        _required_name(data)
        code = text_of(data.get("language"), "language")
        if not code:
            raise InvalidRequest("Parameter 'language' not specified.", field="language")
        language = deepl_lang(code, "language")
        writes = (info.context or {}).get("writes")
        if writes is not None and not writes(language.tag):
            raise InvalidRequest(
                f"Value for 'language' not supported: no model writes {language.tag}"
            )
        return data

    @property
    def lang(self) -> Lang:
        assert self.language is not None
        return deepl_lang(self.language, "language")

    @property
    def instructions(self) -> list[InstructionBody]:
        return [InstructionBody.model_validate(c) for c in self.custom_instructions]
