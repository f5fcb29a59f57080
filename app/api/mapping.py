"""A client's request body → the ``ChatRequest`` the engine runs, or a 400 naming the field.

Every top-level field falls in one of three sets: read (and mapped onto the engine),
accepted and ignored (it cannot change the answer: ``user``, ``metadata``...), or refused
with its name. A field Hearth does not know is refused too: a sampling option silently
dropped would be a wrong answer that looks right.

Each group of fields has one function below: sampling (OpenAI's penalties, log
probabilities), structured output (``response_format`` → a grammar), tools (``tools``,
``tool_choice``, ``parallel_tool_calls`` → the request's tools, a forcing grammar, and how
the output is parsed).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.api import fields
from app.api.errors import bad_request
from app.api.messages import ReplyTokens, parse_messages
from engine import (
    JSON_OBJECT_GRAMMAR,
    MAX_SEED,
    RANDOM_SEED,
    SAMPLING_FIELDS,
    ChatRequest,
    ChatTraits,
    EngineError,
    Grammar,
    SamplingParams,
    grammar_from_json_schema,
    sampling_field,
    seed_value,
    tool_choice_grammar,
)

MAX_STOP_STRINGS = 16
MAX_STOP_LENGTH = 1000
MAX_REQUEST_TOKENS = 2**31 - 1


class Endpoint(enum.StrEnum):
    CHAT = "chat"  # /v1/chat/completions
    COMPLETION = "completion"  # /v1/completions (a raw prompt, for base models)


@dataclass(frozen=True)
class ModelFacts:
    """What validation needs to know about the loaded model (a value, any thread)."""

    name: str  # the id /v1/models lists and responses carry
    display_name: str
    context_per_conversation: int
    has_vision: bool
    traits: ChatTraits = ChatTraits()  # noqa: RUF009 - a frozen value: its tool format, its thinking


@dataclass(frozen=True)
class OutputPlan:
    """How the model's text becomes the answer: reasoning split out, tool calls parsed."""

    traits: ChatTraits = ChatTraits()  # noqa: RUF009 - a frozen value
    tool_names: tuple[str, ...] | None = None  # None: no tools offered, nothing to parse
    parallel_tool_calls: bool = True  # False: at most one call (a second one is not sent)


@dataclass(frozen=True)
class GenerationSpec:
    """A validated request: what to run and how to answer."""

    endpoint: Endpoint
    request: ChatRequest
    stream: bool
    include_usage: bool
    images: int = 0
    output: OutputPlan = OutputPlan()
    logprobs: int | None = None  # None: none asked; n: the sampled token's and n alternatives
    # The excerpts a "documents" request was grounded in ({"n", "path", "page", "text"}).
    sources: tuple[dict[str, Any], ...] = ()


_SAMPLING = frozenset({
    "temperature", "top_p", "top_k", "min_p", "seed", "repeat_penalty", "repeat_last_n",
    "presence_penalty", "frequency_penalty",
})  # fmt: skip
_COMMON = _SAMPLING | {
    "model", "max_tokens", "stop", "n", "stream", "stream_options", "user", "logprobs",
    # llama-server's extensions
    "ignore_eos", "cache_prompt", "n_predict",
}  # fmt: skip
_CHAT = _COMMON | {
    "messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice",
    "parallel_tool_calls", "response_format", "functions", "function_call", "logit_bias",
    "modalities", "audio",
    "documents",  # Hearth's: collections to answer from (app/api/documents.py reads it)
}  # fmt: skip
_COMPLETION = _COMMON | {"prompt", "suffix", "echo", "best_of", "logit_bias"}
# Accepted and ignored: they cannot change what the model writes.
IGNORED = frozenset({
    "metadata", "store", "service_tier", "prediction", "reasoning_effort", "verbosity",
    "safety_identifier", "prompt_cache_key",
})  # fmt: skip


def map_request(
    body: Mapping[str, Any],
    endpoint: Endpoint,
    facts: ModelFacts,
    client: str,
    reply_tokens: ReplyTokens | None = None,
) -> GenerationSpec:
    """``body`` (a parsed JSON object) as a ``GenerationSpec``; ``client`` names the
    request's owner on the dashboard. May decode images: call off the event loop for
    large bodies."""
    known = _CHAT if endpoint is Endpoint.CHAT else _COMPLETION
    unknown = sorted(k for k in body if k not in known and k not in IGNORED)
    if unknown:
        names = ", ".join(f"'{k[:40]}'" for k in unknown[:6])
        raise bad_request(f"Unsupported field{'s' if len(unknown) > 1 else ''}: {names}.", unknown[0])
    fields.string(body, "model", "")
    _one_choice(body, endpoint)
    _refuse_set(body, "logit_bias", "logit_bias (token biases)")
    stream = fields.boolean(body, "stream", False)
    options = fields.obj(body, "stream_options")
    include_usage = bool(stream and fields.boolean(options, "include_usage", False))
    logprobs = _logprobs(body, endpoint)
    sampling = _sampling(body, logprobs)
    max_tokens = _max_tokens(body, endpoint, facts)
    stop = _stop(body)
    user = fields.string(body, "user", "")
    owner = f"API · {user[:40]}" if user else f"API · {client}"
    common: dict[str, Any] = {
        "max_tokens": max_tokens,
        "stop": stop,
        "ignore_eos": fields.boolean(body, "ignore_eos", False),
        "cache": fields.boolean(body, "cache_prompt", True),  # llama-server's: false evaluates it all
        "owner": owner,
    }
    if endpoint is Endpoint.COMPLETION:
        request = ChatRequest(prompt=_prompt(body), sampling=sampling, **common)
        return GenerationSpec(endpoint, request, stream, include_usage, logprobs=logprobs)
    _modalities(body)
    tools, tool_grammar, output = _tools(body, facts.traits)
    grammar = _response_format(body)
    if grammar is not None and tools:
        raise bad_request(
            "'response_format' cannot be combined with 'tools' here: the reply would have to be both.",
            "response_format",
        )
    grammar = grammar or tool_grammar
    if grammar is not None:
        # A thinking model thinks freely first: the grammar starts after its reasoning.
        sampling = replace(sampling, grammar=facts.traits.constrain(grammar))
    parsed = parse_messages(
        body.get("messages"), has_vision=facts.has_vision, model_name=facts.display_name,
        reply_tokens=reply_tokens,
    )  # fmt: skip
    request = ChatRequest(
        messages=parsed.messages, assistant_prefix=parsed.assistant_prefix, sampling=sampling, tools=tools,
        **common,
    )  # fmt: skip
    return GenerationSpec(endpoint, request, stream, include_usage, parsed.images, output, logprobs)


# -- groups of fields ----------------------------------------------------------------------


def _sampling(body: Mapping[str, Any], logprobs: int | None) -> SamplingParams:
    """The sampling fields, each checked against the engine's table (so a value accepted
    here passes ``SamplingParams.validate``, and a refused one is a 400 naming it)."""
    values = {
        spec.name: fields.sampling(body, spec, spec.default)
        for spec in SAMPLING_FIELDS
        if spec.name not in ("seed", "top_p")
    }
    top_p = body.get("top_p")
    if top_p == 0 and not isinstance(top_p, bool):  # nucleus of probability 0: the most likely token
        values["top_p"], values["top_k"] = 1.0, 1
    else:
        values["top_p"] = fields.sampling(body, sampling_field("top_p"), sampling_field("top_p").default)
    seed = fields.integer(body, "seed", None, RANDOM_SEED, MAX_SEED)
    return SamplingParams(**values, seed=seed_value(seed), logprobs=logprobs)


def _max_tokens(body: Mapping[str, Any], endpoint: Endpoint, facts: ModelFacts) -> int:
    """The reply's limit; by default the conversation's context (the engine stops there),
    as OpenAI and llama-server do."""
    value = fields.integer(body, "n_predict", None, -1, MAX_REQUEST_TOKENS)
    value = None if value == -1 else value
    value = fields.integer(body, "max_tokens", value, 1, MAX_REQUEST_TOKENS)
    if endpoint is Endpoint.CHAT:
        value = fields.integer(body, "max_completion_tokens", value, 1, MAX_REQUEST_TOKENS)
    if value is None:
        return facts.context_per_conversation
    if value == 0:
        raise bad_request("'max_tokens' must be at least 1.", "max_tokens")
    return value


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise fields.wrong_type("stop", "a string or an array of strings", value)
    if len(items) > MAX_STOP_STRINGS:
        raise bad_request(f"'stop' holds {len(items)} strings; at most {MAX_STOP_STRINGS}.", "stop")
    for item in items:
        if not isinstance(item, str):
            raise fields.wrong_type("stop", "a string or an array of strings", item)
        if not item:
            raise bad_request("'stop' must not hold an empty string.", "stop")
        if len(item) > MAX_STOP_LENGTH:
            raise bad_request(f"A stop string can be at most {MAX_STOP_LENGTH} characters.", "stop")
    return tuple(items)


def _one_choice(body: Mapping[str, Any], endpoint: Endpoint) -> None:
    names = ("n",) if endpoint is Endpoint.CHAT else ("n", "best_of")
    for name in names:
        fields.integer(body, name, 1, 1, 1 << 20)
        if body.get(name) not in (None, 1):
            raise bad_request(f"'{name}' must be 1: Hearth generates one choice per request.", name)


def _prompt(body: Mapping[str, Any]) -> str:
    value = body.get("prompt")
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]
    if isinstance(value, list):
        raise bad_request(
            "'prompt' must be one string: Hearth completes one prompt per request (not token ids).", "prompt"
        )
    if not isinstance(value, str):
        raise fields.wrong_type("prompt", "a string", value)
    if fields.string(body, "suffix", ""):
        raise bad_request("'suffix' (fill-in-the-middle) is not supported.", "suffix")
    if fields.boolean(body, "echo", False):
        raise bad_request("'echo' is not supported: the response holds the completion only.", "echo")
    return value


def _refuse_set(body: Mapping[str, Any], name: str, what: str) -> None:
    if body.get(name):
        raise bad_request(f"'{name}' is not supported: {what} would be ignored.", name)


# -- log probabilities, structured output, tools ---------------------------------------------


def _logprobs(body: Mapping[str, Any], endpoint: Endpoint) -> int | None:
    """How many alternatives to report per token (None: no log probabilities)."""
    if endpoint is Endpoint.COMPLETION:  # the legacy API: an integer, 0..5
        return fields.integer(body, "logprobs", None, 0, 5)
    wanted = fields.boolean(body, "logprobs", False)
    top = fields.integer(body, "top_logprobs", None, 0, 20)
    if top is not None and not wanted:
        raise bad_request("'top_logprobs' needs 'logprobs': true.", "top_logprobs")
    return (top or 0) if wanted else None


def _response_format(body: Mapping[str, Any]) -> Grammar | None:
    value = fields.obj(body, "response_format")
    kind = value.get("type", "text") if value else "text"
    if kind == "text":
        return None
    if kind == "json_object":
        return JSON_OBJECT_GRAMMAR
    if kind != "json_schema":
        raise bad_request(
            "'response_format.type' must be text, json_object or json_schema.", "response_format"
        )
    spec = fields.obj(value, "json_schema", "response_format.json_schema")
    schema = spec.get("schema", {})
    if not isinstance(schema, dict | bool):
        raise fields.wrong_type("response_format.json_schema.schema", "a JSON schema object", schema)
    try:
        return grammar_from_json_schema(schema)
    except EngineError as exc:
        raise bad_request(exc.message, "response_format.json_schema.schema") from None


def _tools(
    body: Mapping[str, Any], traits: ChatTraits
) -> tuple[tuple[dict, ...], Grammar | None, OutputPlan]:
    """The tools to render, the grammar that forces a call (tool_choice "required" or a
    function), and how to parse the output."""
    _refuse_set(body, "functions", "functions (retired: send 'tools')")
    if body.get("function_call") is not None:
        raise bad_request("'function_call' is retired: send 'tool_choice'.", "function_call")
    parallel = fields.boolean(body, "parallel_tool_calls", True)
    tools = fields.array(body, "tools") or []
    for i, tool in enumerate(tools):
        if (
            not isinstance(tool, dict)
            or tool.get("type") != "function"
            or not isinstance(tool.get("function"), dict)
        ):
            raise bad_request(
                f'\'tools[{i}]\' must be {{"type": "function", "function": {{...}}}}.', f"tools[{i}]"
            )
    # The rest of each tool (names, descriptions, parameters) is checked once, by the
    # engine when the request is submitted (ChatRequest.validate): its 400 names 'tools'.
    choice = body.get("tool_choice", "auto" if tools else "none")
    named = isinstance(choice, dict)
    if not named and choice not in ("none", "auto", "required"):
        raise bad_request("'tool_choice' must be none, auto, required or a function.", "tool_choice")
    if not tools:
        if choice not in ("none", "auto"):
            raise bad_request("'tool_choice' needs 'tools' to choose from.", "tool_choice")
        return (), None, OutputPlan(traits)
    if choice == "none":  # tools offered but not to be called: not shown to the model at all
        return (), None, OutputPlan(traits)
    try:
        grammar = tool_choice_grammar(traits.tool_format, tools, choice, parallel)
    except EngineError as exc:
        raise bad_request(exc.message, "tool_choice" if named or choice == "required" else "tools") from None
    names = tuple(str(t["function"].get("name", "")) for t in tools)
    return tuple(tools), grammar, OutputPlan(traits, names, parallel)


def _modalities(body: Mapping[str, Any]) -> None:
    modalities = fields.array(body, "modalities")
    if modalities is not None and modalities != ["text"]:
        raise bad_request("'modalities' can only be [\"text\"]: Hearth writes text.", "modalities")
    if body.get("audio") is not None:
        raise bad_request("'audio' output is not supported: Hearth writes text.", "audio")
