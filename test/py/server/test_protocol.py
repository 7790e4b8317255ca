"""The server's request checks and response shapes (``nanocompile.server.protocol``),
without a server or a model: every refusal names its field, every accepted
field lands in the job as spec §1.4 says.

The expected bodies are written out here from OpenAI's API reference, not
derived from the code under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from nanocompile.inference.generate import GenerationResult
from nanocompile.inference.sampling import SamplingParams
from nanocompile.server.protocol import (
    Job,
    RequestError,
    Settings,
    chat_job,
    chunk,
    completion_job,
    response,
    usage_chunk,
)

DEFAULTS = SamplingParams(temperature=0.7, top_k=20, top_p=0.8)  # generation_config's
SETTINGS = Settings("tiny", DEFAULTS, max_tokens=33)
USER = [{"role": "user", "content": "Hi"}]


def tokenize_chat(messages: list[dict[str, str]]) -> list[int]:
    """A stand-in for ``Model.chat_ids``: one id per message, the content's length."""
    return [len(m["content"]) for m in messages]


def tokenize_text(text: str) -> list[int]:
    if "\udcff" in text:
        raise ValueError("text contains a lone surrogate U+DCFF\nsecond line")
    return [ord(c) for c in text]


def chat(**body: Any) -> Job:
    return chat_job({"messages": USER} | body, SETTINGS, tokenize_chat)


def refused(make: Any, body: Any) -> RequestError:
    with pytest.raises(RequestError) as info:
        make(body)
    assert "\n" not in info.value.message
    return info.value


def test_defaults_fill_what_the_request_leaves_out() -> None:
    job = chat(model="gpt-4o")
    assert job.kind == "chat"
    assert job.model == "tiny"  # one model answers every name
    assert job.max_tokens == 33
    assert job.params == DEFAULTS
    assert job.stop == ()
    assert not job.stream
    assert not job.include_usage
    assert job.prompt_ids == [2]


def test_sampling_fields_reach_the_params() -> None:
    """Spec §1.4's fields, top_k and repetition_penalty as extensions."""
    job = chat(temperature=1.5, top_p=0.5, top_k=7, seed=12, repetition_penalty=1.2,
               max_tokens=9, stop=["\n\n", "END"], stream=True,
               stream_options={"include_usage": True})
    assert job.params == SamplingParams(temperature=1.5, top_k=7, top_p=0.5, seed=12,
                                        repetition_penalty=1.2)
    assert job.max_tokens == 9
    assert job.stop == ("\n\n", "END")
    assert job.stream
    assert job.include_usage
    assert chat(temperature=0).params.greedy
    assert chat(max_completion_tokens=4, max_tokens=8).max_tokens == 4  # the newer name wins
    assert chat(stop="x").stop == ("x",)
    assert chat(seed=None).params.seed is None


def test_messages_roles_and_content_parts() -> None:
    messages = [{"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "a"},
                                             {"type": "text", "text": "bc"}]},
                {"role": "assistant", "content": None},
                {"role": "user", "content": "d"}]
    seen: list[list[dict[str, str]]] = []

    def record(m: list[dict[str, str]]) -> list[int]:
        seen.append(m)
        return [1]

    chat_job({"messages": messages}, SETTINGS, record)
    assert seen == [[{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "abc"},
                     {"role": "assistant", "content": ""},
                     {"role": "user", "content": "d"}]]


@pytest.mark.parametrize(("body", "param", "message"), [
    ({"temperature": "hot"}, "temperature", "temperature must be a number, got 'hot'"),
    ({"temperature": -1}, "temperature", "temperature must be >= 0, got -1.0"),
    ({"top_p": 1.5}, "top_p", "top_p must be in (0, 1], got 1.5"),
    ({"top_p": 0}, "top_p", "top_p must be in (0, 1], got 0.0"),
    ({"top_k": -2}, "top_k", "top_k must be in [0, 2147483647], got -2"),
    ({"top_k": 2.5}, "top_k", "top_k must be an integer, got 2.5"),
    ({"seed": -1}, "seed", "seed must be in [0, 9223372036854775807], got -1"),
    ({"seed": True}, "seed", "seed must be an integer, got True"),
    ({"max_tokens": 0}, "max_tokens", "max_tokens must be in [1, 2147483647], got 0"),
    ({"max_tokens": "3"}, "max_tokens", "max_tokens must be an integer, got '3'"),
    ({"repetition_penalty": 0}, "repetition_penalty",
     "repetition_penalty must be finite and > 0, got 0.0"),
    ({"stop": ""}, "stop", "stop must be a non-empty string or a list of them, got ''"),
    ({"stop": [1]}, "stop", "stop must be a non-empty string or a list of them, got [1]"),
    ({"stop": ["x"] * 17}, "stop", "stop takes at most 16 strings, got 17"),
    ({"stream": "yes"}, "stream", "stream must be true or false, got 'yes'"),
    ({"stream_options": {"include_usage": True}}, "stream_options",
     "stream_options needs stream: true"),
    ({"n": 2}, "n", "n is not supported by this server, got 2"),
    ({"logprobs": True}, "logprobs", "logprobs is not supported by this server, got True"),
    ({"presence_penalty": 0.5}, "presence_penalty",
     "presence_penalty is not supported by this server, got 0.5"),
    ({"tools": [{"type": "function"}]}, "tools",
     "tools is not supported by this server, got [{'type': 'function'}]"),
    ({"model": 3}, "model", "model must be a string, got 3"),
    ({"messages": []}, "messages", "messages must be a non-empty list, got []"),
    ({"messages": "hi"}, "messages", "messages must be a non-empty list, got 'hi'"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages",
     "messages[0].role must be one of system, developer, user, assistant, got 'tool'"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages",
     "messages[0].content must be a string or a list of text parts, got 5"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages",
     "messages[0].content: only text parts are supported, got {'type': 'image_url'}"),
    ({"messages": ["hi"]}, "messages", "messages[0] must be an object, got 'hi'"),
])
def test_bad_chat_fields_are_refused_by_name(body: dict[str, Any], param: str,
                                             message: str) -> None:
    error = refused(lambda b: chat_job({"messages": USER} | b, SETTINGS, tokenize_chat), body)
    assert (error.status, error.param, error.message) == (400, param, message)
    assert error.body() == {"error": {"message": message, "type": "invalid_request_error",
                                      "param": param, "code": None}}


@pytest.mark.parametrize("body", [[1, 2], "text", None, 3])
def test_a_body_that_is_not_an_object(body: object) -> None:
    error = refused(lambda b: chat_job(b, SETTINGS, tokenize_chat), body)
    assert error.message.startswith("the body must be a JSON object, got ")


def test_completion_prompts() -> None:
    def make(prompt: object) -> Job:
        return completion_job({"prompt": prompt}, SETTINGS, tokenize_text)

    assert make("ab").prompt_ids == [97, 98]
    assert make(["ab"]).prompt_ids == [97, 98]  # a batch of one
    assert make([5, 6]).prompt_ids == [5, 6]  # token ids as they are
    assert make([[5, 6]]).prompt_ids == [5, 6]
    assert make("ab").kind == "completion"
    for bad in (["a", "b"], [], [1.5], None, {"text": "a"}, [True]):
        error = refused(make, bad)
        assert error.param == "prompt"
        assert error.message.startswith("prompt must be a string, a list of token ids")
    error = refused(make, "x\udcff")
    assert error.message == "prompt: text contains a lone surrogate U+DCFF"


def test_echo_and_suffix_are_refused() -> None:
    for body in ({"echo": True}, {"suffix": "x"}, {"best_of": 3}):
        error = refused(lambda b: completion_job({"prompt": "a"} | b, SETTINGS, tokenize_text),
                        body)
        assert error.param == next(iter(body))


RESULT = GenerationResult(text="Paris.", token_ids=[1, 2, 3], prompt_tokens=5,
                          prefill_seconds=0.1, decode_seconds=0.2, decode_tok_per_s=10.0,
                          stop_reason="stop_string", decode_steps=2)


def test_chat_response_shape() -> None:
    job = chat()
    body = response(job, RESULT)
    assert body["id"] == f"chatcmpl-{job.id}"
    assert body["object"] == "chat.completion"
    assert body["model"] == "tiny"
    assert isinstance(body["created"], int)
    assert body["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "Paris."},
                                "logprobs": None, "finish_reason": "stop"}]
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}


@pytest.mark.parametrize(("reason", "finish"), [
    ("stop_token", "stop"), ("stop_string", "stop"), ("max_tokens", "length"),
    ("context", "length")])
def test_finish_reasons(reason: str, finish: str) -> None:
    result = GenerationResult("x", [1], 1, 0.0, 0.0, 0.0, reason)  # type: ignore[arg-type]
    job = completion_job({"prompt": "a"}, SETTINGS, tokenize_text)
    assert response(job, result)["choices"][0]["finish_reason"] == finish


def test_stream_chunks() -> None:
    job = chat(stream=True, stream_options={"include_usage": True})
    first, piece, last = (chunk(job, first=True), chunk(job, "Par"),
                          chunk(job, result=RESULT))
    for c in (first, piece, last):
        assert c["object"] == "chat.completion.chunk"
        assert c["id"] == f"chatcmpl-{job.id}"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert piece["choices"][0] == {"index": 0, "delta": {"content": "Par"}, "logprobs": None,
                                   "finish_reason": None}
    assert last["choices"][0]["delta"] == {}
    assert last["choices"][0]["finish_reason"] == "stop"
    usage = usage_chunk(job, RESULT)
    assert usage["choices"] == []
    assert usage["usage"]["total_tokens"] == 8
    text_job = completion_job({"prompt": "a", "stream": True}, SETTINGS, tokenize_text)
    assert chunk(text_job, "is")["choices"][0]["text"] == "is"
    assert chunk(text_job, "is")["object"] == "text_completion"
