"""The OpenAI request and response bodies the server speaks, checked field by field.

A request body becomes a :class:`Job` (what to prefill, how to sample, where
to stop) or a :class:`RequestError`, whose one-line message names the field:
the server answers it with status 400 and an OpenAI-shaped error body
(``{"error": {"message", "type", "param", "code"}}``). Fields the server does
not know are ignored, as OpenAI's API ignores them; fields it knows but
cannot honour (``n > 1``, ``logprobs``, tools, non-zero presence or frequency
penalties, ...) are refused by name rather than silently dropped.

Sampling (spec §1.4): ``temperature``, ``top_p``, ``top_k`` (an extension,
as llama.cpp's and vLLM's servers have it), ``seed``, ``repetition_penalty``
(an extension), ``max_tokens`` (``max_completion_tokens`` too), ``stop``
(a string or a list of up to 16) and ``ignore_eos`` (an extension, as
llama.cpp's: do not stop at the end-of-text or end-of-turn token). Fields
the request leaves out come from the server's defaults (the snapshot's
``generation_config.json`` unless the server was started with
``--no-model-defaults``); without a ``seed`` every request draws a fresh
one.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from nanocompile.inference.generate import MAX_STOP_STRINGS, GenerationResult
from nanocompile.inference.sampling import SamplingParams

Kind = Literal["chat", "completion"]
ROLES = ("system", "developer", "user", "assistant")
MAX_SEED = 2**63 - 1
# fields a client may send that this server cannot honour, with the value that means "off"
UNSUPPORTED: dict[str, tuple[object, ...]] = {
    "n": (None, 1),
    "best_of": (None, 1),
    "echo": (None, False),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "suffix": (None, ""),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "logit_bias": (None, {}),
    "tools": (None, []),
    "functions": (None, []),
    "tool_choice": (None, "none", "auto"),
    "audio": (None,),
    "prediction": (None,),
}


class RequestError(ValueError):
    """A request the server refuses: ``status``, and the OpenAI error's fields."""

    def __init__(self, message: str, *, param: str | None = None, status: int = 400,
                 code: str | None = None, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.message, self.param, self.status, self.code, self.kind = (
            message, param, status, code, kind)

    def body(self) -> dict[str, Any]:
        """The OpenAI error body."""
        return error_body(self.message, kind=self.kind, param=self.param, code=self.code)


def error_body(message: str, *, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` as OpenAI's API answers a failed request."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@dataclass(frozen=True)
class Job:
    """One generation the server runs: a chat reply or a completion."""

    kind: Kind
    model: str
    prompt_ids: list[int]
    max_tokens: int
    params: SamplingParams
    stop: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False
    ignore_eos: bool = False
    id: str = field(default_factory=lambda: secrets.token_hex(12))
    created: int = field(default_factory=lambda: int(time.time()))


# --------------------------------------------------------------------------
# fields


def _integer(body: Mapping[str, Any], name: str, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name} must be an integer, got {value!r}", param=name)
    if not low <= value <= high:
        raise RequestError(f"{name} must be in [{low}, {high}], got {value}", param=name)
    return value


def _number(body: Mapping[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f"{name} must be a number, got {value!r}", param=name)
    number = float(value)
    if not math.isfinite(number):
        raise RequestError(f"{name} must be finite, got {value!r}", param=name)
    return number


def _boolean(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RequestError(f"{name} must be true or false, got {value!r}", param=name)
    return value


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise RequestError(f"stop must be a non-empty string or a list of them, got {value!r}",
                           param="stop")
    if len(stops) > MAX_STOP_STRINGS:
        raise RequestError(f"stop takes at most {MAX_STOP_STRINGS} strings, got {len(stops)}",
                           param="stop")
    return tuple(stops)


def _unsupported(body: Mapping[str, Any]) -> None:
    for name, off in UNSUPPORTED.items():
        if name in body and body[name] not in off:
            raise RequestError(f"{name} is not supported by this server, got {body[name]!r}",
                               param=name)


def _model(body: Mapping[str, Any], served: str) -> str:
    value = body.get("model")
    if value is None:
        return served
    if not isinstance(value, str):
        raise RequestError(f"model must be a string, got {value!r}", param="model")
    return served  # one model is served: any name is answered by it (as llama.cpp's server)


def sampling(body: Mapping[str, Any], defaults: SamplingParams) -> SamplingParams:
    """The request's sampling fields over ``defaults`` (checked as spec §1.4 says)."""
    chosen: dict[str, Any] = {}
    for name in ("temperature", "top_p", "repetition_penalty"):
        value = _number(body, name)
        if value is not None:
            chosen[name] = value
    top_k = _integer(body, "top_k", 0, 2**31 - 1)
    if top_k is not None:
        chosen["top_k"] = top_k
    chosen["seed"] = _integer(body, "seed", 0, MAX_SEED)
    try:
        return replace(defaults, **chosen)
    except ValueError as exc:
        name = str(exc).split(" ", 1)[0]
        raise RequestError(str(exc), param=name if name in chosen else None) from None


def _max_tokens(body: Mapping[str, Any], default: int) -> int:
    value = _integer(body, "max_completion_tokens", 1, 2**31 - 1)
    if value is None:
        value = _integer(body, "max_tokens", 1, 2**31 - 1)
    return default if value is None else value


def _stream_options(body: Mapping[str, Any], stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise RequestError(f"stream_options must be an object, got {options!r}",
                           param="stream_options")
    if not stream:
        raise RequestError("stream_options needs stream: true", param="stream_options")
    return _boolean(options, "include_usage")


# --------------------------------------------------------------------------
# requests


Tokenize = Callable[[Any], list[int]]


@dataclass(frozen=True)
class Settings:
    """What the server fills in: the model's name, the sampling defaults, the
    ``max_tokens`` of a request that gives none."""

    model: str
    defaults: SamplingParams
    max_tokens: int = 512


def _job(kind: Kind, body: Mapping[str, Any], settings: Settings, ids: list[int]) -> Job:
    stream = _boolean(body, "stream")
    return Job(kind, _model(body, settings.model), ids, _max_tokens(body, settings.max_tokens),
               sampling(body, settings.defaults), _stop(body), stream,
               _stream_options(body, stream), _boolean(body, "ignore_eos"))


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise RequestError(f"the body must be a JSON object, got {type(body).__name__}")
    _unsupported(body)
    return body


def _content(message: Mapping[str, Any], i: int) -> str:
    content = message.get("content")
    if content is None and message.get("role") == "assistant":
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: text only
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(
                    part.get("text"), str):
                raise RequestError(f"messages[{i}].content: only text parts are supported, "
                                   f"got {part!r}", param="messages")
            texts.append(part["text"])
        return "".join(texts)
    raise RequestError(f"messages[{i}].content must be a string or a list of text parts, "
                       f"got {content!r}", param="messages")


def chat_messages(body: Mapping[str, Any]) -> list[dict[str, str]]:
    """``messages`` as role/content dicts ("developer" is the system message)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(f"messages must be a non-empty list, got {messages!r}",
                           param="messages")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise RequestError(f"messages[{i}] must be an object, got {message!r}",
                               param="messages")
        role = message.get("role")
        if role not in ROLES:
            raise RequestError(f"messages[{i}].role must be one of {', '.join(ROLES)}, "
                               f"got {role!r}", param="messages")
        out.append({"role": "system" if role == "developer" else role,
                    "content": _content(message, i)})
    return out


def chat_job(body: Any, settings: Settings, tokenize: Tokenize) -> Job:
    """A ``/v1/chat/completions`` body as a job (``tokenize``: messages -> prompt ids)."""
    body = _object(body)
    job = _job("chat", body, settings, [])  # every field checked before the (slower) template
    return replace(job, prompt_ids=_tokenized(tokenize, chat_messages(body), "messages"))


def completion_job(body: Any, settings: Settings, tokenize: Tokenize) -> Job:
    """A ``/v1/completions`` body as a job (``tokenize``: text -> prompt ids; a prompt
    given as token ids is taken as it is)."""
    body = _object(body)
    job = _job("completion", body, settings, [])
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        ids = _tokenized(tokenize, prompt, "prompt")
    elif isinstance(prompt, list) and prompt and all(
            isinstance(i, int) and not isinstance(i, bool) for i in prompt):
        ids = list(prompt)
    else:
        raise RequestError("prompt must be a string, a list of token ids, or a list of one "
                           f"of them, got {_short(prompt)}", param="prompt")
    return replace(job, prompt_ids=ids)


def _tokenized(tokenize: Tokenize, what: Any, param: str) -> list[int]:
    try:
        return tokenize(what)
    except ValueError as exc:  # a lone surrogate, a template that refused the conversation
        raise RequestError(f"{param}: {first_line(exc)}", param=param) from None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


# --------------------------------------------------------------------------
# responses


FINISH: dict[str, str] = {"stop_token": "stop", "stop_string": "stop", "max_tokens": "length",
                          "context": "length", "cancelled": "stop"}


def finish_reason(result: GenerationResult) -> str:
    """OpenAI's ``finish_reason``: "stop" (a stop token or string), "length"
    (``max_tokens`` or the context)."""
    return FINISH[result.stop_reason]


def usage(result: GenerationResult) -> dict[str, int]:
    """Prompt and completion tokens (the completion's include a token that completed
    a stop string, not a stop token)."""
    n = len(result.token_ids)
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": n,
            "total_tokens": result.prompt_tokens + n}


def _head(job: Job, obj: str) -> dict[str, Any]:
    prefix = "chatcmpl-" if job.kind == "chat" else "cmpl-"
    return {"id": prefix + job.id, "object": obj, "created": job.created, "model": job.model}


def response(job: Job, result: GenerationResult) -> dict[str, Any]:
    """The whole (not streamed) answer."""
    if job.kind == "chat":
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant",
                                                          "content": result.text},
                                  "logprobs": None, "finish_reason": finish_reason(result)}
        head = _head(job, "chat.completion")
    else:
        choice = {"index": 0, "text": result.text, "logprobs": None,
                  "finish_reason": finish_reason(result)}
        head = _head(job, "text_completion")
    return {**head, "choices": [choice], "usage": usage(result)}


def chunk(job: Job, text: str | None = None, *, first: bool = False,
          result: GenerationResult | None = None) -> dict[str, Any]:
    """One streamed event: the role (chat, ``first``), a piece of text, or the end
    (``result``: its finish reason; no text)."""
    reason = None if result is None else finish_reason(result)
    if job.kind == "completion":
        choice: dict[str, Any] = {"index": 0, "text": text or "", "logprobs": None,
                                  "finish_reason": reason}
        return {**_head(job, "text_completion"), "choices": [choice]}
    delta: dict[str, Any] = {}
    if first:
        delta = {"role": "assistant", "content": ""}
    elif text is not None:
        delta = {"content": text}
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
    return {**_head(job, "chat.completion.chunk"), "choices": [choice]}


def usage_chunk(job: Job, result: GenerationResult) -> dict[str, Any]:
    """The last streamed event with ``stream_options.include_usage``: no choices."""
    obj = "chat.completion.chunk" if job.kind == "chat" else "text_completion"
    return {**_head(job, obj), "choices": [], "usage": usage(result)}


def model_card(name: str, created: int) -> dict[str, Any]:
    """One entry of ``/v1/models``."""
    return {"id": name, "object": "model", "created": created, "owned_by": "nanocompile"}


def sampling_summary(params: SamplingParams) -> dict[str, Any]:
    """The defaults as ``/health`` shows them."""
    return {"temperature": params.temperature, "top_k": params.top_k, "top_p": params.top_p,
            "repetition_penalty": params.repetition_penalty}

