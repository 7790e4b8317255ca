"""``nanocompile serve`` end to end: a real uvicorn process on a loopback port,
driven by the official ``openai`` client, raw HTTP for what a client library
would never send, and several clients at once.

Independent checks: the texts the server returns are compared with the
Python API's (``Model.chat`` / ``Model.generate`` with the same
``SamplingParams``, in this process, same backend); a stop string's cut with
the text of the same request without it; the queue's behaviour with the
counts ``/health`` reports. Every wait is bounded and fails loudly; nothing
asserts a speed.

Two tests run in the fast suite: the client streamed and not (with a bad
request), and the queue with a client that disconnects mid-stream. The
others are ``slow``, though each takes well under a second on the module's
server: under ``-n 2`` a second worker would start a second server (~2 s)
and load a second in-process model, which the fast suite's 3 minutes cannot
spare.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nanocompile.api import Model, load
from nanocompile.inference.sampling import SamplingParams

openai = pytest.importorskip("openai")

HOST = "127.0.0.1"
START_SECONDS = 300  # a cold kernel cache compiles the tiny model first
REQUEST_SECONDS = 120
MAX_BODY = 65536
CONTEXT = 512
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Name three colours."}]
PROMPT = "The capital of France is"


@dataclass
class ServerProcess:
    """A ``nanocompile serve`` child and what it printed on stderr."""

    proc: subprocess.Popen[str]
    port: int = 0
    lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def client(self) -> Any:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key="none", max_retries=0,
                             timeout=REQUEST_SECONDS)

    def get(self, path: str) -> tuple[int, Any]:
        return self.request("GET", path)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=REQUEST_SECONDS)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            reply = conn.getresponse()
            raw = reply.read()
        finally:
            conn.close()
        assert b"Traceback" not in raw
        return reply.status, json.loads(raw)

    def health(self) -> dict[str, Any]:
        status, body = self.get("/health")
        assert status == 200
        return body  # type: ignore[no-any-return]


def _read_stderr(server: ServerProcess, ready: threading.Event) -> None:
    assert server.proc.stderr is not None
    for line in server.proc.stderr:
        server.lines.append(line.rstrip("\n"))
        if "serving" in line and " at http://" in line:
            server.port = int(line.split(" at http://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
            ready.set()
    ready.set()  # the process ended


def _wait_until(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server(tiny_snapshot: Path) -> Iterator[ServerProcess]:
    env = {k: v for k, v in os.environ.items() if k != "NANOCOMPILE_TRACEBACK"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nanocompile.cli", "serve", "--model", str(tiny_snapshot),
         "--port", "0", "--context", str(CONTEXT), "--max-body-bytes", str(MAX_BODY),
         "--log-level", "warning"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env=env)
    running = ServerProcess(proc)
    ready = threading.Event()
    threading.Thread(target=_read_stderr, args=(running, ready), daemon=True).start()
    try:
        assert ready.wait(START_SECONDS), "the server did not start"
        assert running.port, "\n".join(running.lines)
        _wait_until(lambda: _answers(running), 60, "/health")
        yield running
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, "\n".join(running.lines)
    assert running.lines[-1] == "nanocompile: server stopped"
    assert not any("Traceback" in line for line in running.lines), "\n".join(running.lines)


def _answers(server: ServerProcess) -> bool:
    try:
        return server.get("/health")[0] == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def model(tiny_snapshot: Path) -> Model:
    """The same model in this process (the oracle for the texts)."""
    return load(tiny_snapshot, backend="c", context=CONTEXT)


# --------------------------------------------------------------------------
# the client, streamed and not


def test_openai_client_streamed_and_not(server: ServerProcess) -> None:
    """The official client: a chat reply whole and streamed (the same greedy text,
    the pieces joined), usage, and a bad request as the client's BadRequestError."""
    client = server.client()
    whole = client.chat.completions.create(model="anything", messages=MESSAGES,
                                           max_tokens=12, temperature=0)
    assert whole.object == "chat.completion"
    assert whole.choices[0].message.role == "assistant"
    assert whole.choices[0].finish_reason == "length"
    assert whole.usage.completion_tokens == 12
    text = whole.choices[0].message.content
    assert text

    pieces, finishes, usage = [], [], None
    for event in client.chat.completions.create(model="anything", messages=MESSAGES,
                                                max_tokens=12, temperature=0, stream=True,
                                                stream_options={"include_usage": True}):
        assert event.object == "chat.completion.chunk"
        if event.usage is not None:
            usage = event.usage
        for choice in event.choices:
            pieces.append(choice.delta.content or "")
            finishes.append(choice.finish_reason)
    assert "".join(pieces) == text
    assert finishes[-1] == "length"
    assert set(finishes[:-1]) == {None}
    assert usage is not None
    assert usage.prompt_tokens == whole.usage.prompt_tokens
    assert usage.completion_tokens == 12

    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="anything", messages=MESSAGES, top_p=3.0)
    assert info.value.status_code == 400
    assert info.value.body == {"message": "top_p must be in (0, 1], got 3.0",
                               "type": "invalid_request_error", "param": "top_p",
                               "code": None}


# --------------------------------------------------------------------------
# sampling, stop strings, models


@pytest.mark.slow  # the fast suite's budget: see the module docstring
def test_sampling_fields_map_to_the_api(server: ServerProcess, model: Model) -> None:
    """temperature, top_p, top_k (extension), seed, max_tokens: the same text as the
    Python API with the same SamplingParams."""
    client = server.client()
    params = SamplingParams(temperature=3.0, top_k=40, top_p=0.9, seed=5)
    reply = client.chat.completions.create(model="m", messages=MESSAGES, temperature=3.0,
                                           top_p=0.9, seed=5, max_tokens=16,
                                           extra_body={"top_k": 40})
    want = model.chat(MESSAGES, max_tokens=16, sampling=params)
    assert reply.choices[0].message.content == want.text
    assert reply.usage.prompt_tokens == want.prompt_tokens

    done = client.completions.create(model="m", prompt=PROMPT, temperature=3.0, top_p=0.9,
                                     seed=5, max_tokens=16, extra_body={"top_k": 40})
    want = model.generate(PROMPT, max_tokens=16, sampling=params)
    assert done.object == "text_completion"
    assert done.choices[0].text == want.text
    assert done.usage.completion_tokens == len(want.token_ids)

    streamed = "".join(e.choices[0].text for e in client.completions.create(
        model="m", prompt=PROMPT, temperature=3.0, top_p=0.9, seed=5, max_tokens=16,
        extra_body={"top_k": 40}, stream=True) if e.choices)
    assert streamed == want.text
    other = client.completions.create(model="m", prompt=PROMPT, temperature=3.0, top_p=0.9,
                                      seed=6, max_tokens=16, extra_body={"top_k": 40})
    assert other.choices[0].text != want.text  # the seed reached the sampler


@pytest.mark.slow  # the fast suite's budget: see the module docstring
def test_stop_strings_cut_the_text(server: ServerProcess) -> None:
    client = server.client()
    full = client.completions.create(model="m", prompt=PROMPT, max_tokens=24, temperature=0,
                                     extra_body={"ignore_eos": True}).choices[0].text
    stop = full[len(full) // 2:len(full) // 2 + 3]
    assert stop.strip(), full
    cut = full[:full.index(stop)]
    done = client.completions.create(model="m", prompt=PROMPT, max_tokens=24, temperature=0,
                                     stop=[stop, "never seen"],
                                     extra_body={"ignore_eos": True})
    assert done.choices[0].text == cut
    assert done.choices[0].finish_reason == "stop"
    streamed = [e.choices[0] for e in client.completions.create(
        model="m", prompt=PROMPT, max_tokens=24, temperature=0, stop=stop, stream=True,
        extra_body={"ignore_eos": True}) if e.choices]
    assert "".join(c.text for c in streamed) == cut  # nothing of the stop string leaked out
    assert streamed[-1].finish_reason == "stop"


@pytest.mark.slow  # the fast suite's budget: see the module docstring
def test_models_and_health(server: ServerProcess, tiny_snapshot: Path) -> None:
    client = server.client()
    listed = client.models.list()
    assert [m.id for m in listed.data] == [tiny_snapshot.name]
    assert client.models.retrieve(tiny_snapshot.name).owned_by == "nanocompile"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")
    health = server.health()
    assert health["status"] == "ok"
    assert health["context"] == CONTEXT
    assert health["queue"]["policy"].startswith("one request at a time on the one model")
    assert health["defaults"]["top_k"] == json.loads(
        (tiny_snapshot / "generation_config.json").read_text())["top_k"]


# --------------------------------------------------------------------------
# bad requests: 400 (413 for a body over the limit), OpenAI-shaped, never a traceback


BAD_BODIES: list[tuple[str, bytes, int, str | None, str]] = [
    ("/v1/chat/completions", b"{oops", 400, None, "the body is not valid JSON: Expecting"),
    ("/v1/chat/completions", b"\xff\xfe\x00", 400, None, "the body is not UTF-8"),
    ("/v1/chat/completions", b"[1, 2]", 400, None, "the body must be a JSON object, got list"),
    ("/v1/chat/completions", b"[" * 100_000 + b"]" * 100_000, 413, None,
     f"the request body is larger than {MAX_BODY} bytes"),
    ("/v1/completions", b"[" * 30_000 + b"]" * 30_000, 400, None,
     "the body is not valid JSON"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], '
     b'"temperature": "hot"}', 400, "temperature", "temperature must be a number"),
    ("/v1/chat/completions", b'{"messages": []}', 400, "messages", "messages must be"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\\udcff"}]}',
     400, "messages", "messages: "),
    ("/v1/completions", b'{"prompt": "hi", "n": 3}', 400, "n", "n is not supported"),
    ("/v1/completions", b'{"prompt": ""}', 400, "prompt", "the prompt is empty"),
    ("/v1/completions", b'{"prompt": [999999999]}', 400, "prompt",
     "prompt: token id 999999999 is outside the vocabulary"),
    ("/v1/completions", json.dumps({"prompt": "word " * (CONTEXT + 10)}).encode(), 400,
     "prompt", "the prompt has"),
]


@pytest.mark.slow  # the fast suite's budget: see the module docstring
@pytest.mark.parametrize(("path", "body", "status", "param", "message"), BAD_BODIES)
def test_bad_bodies(server: ServerProcess, path: str, body: bytes, status: int,
                    param: str | None, message: str) -> None:
    code, reply = server.request("POST", path, body, {"Content-Type": "application/json"})
    assert code == status, reply
    error = reply["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["message"].startswith(message), error
    assert "\n" not in error["message"]
    assert server.health()["status"] == "ok"  # and it still serves


@pytest.mark.slow  # the fast suite's budget: see the module docstring
def test_context_overflow_has_openai_code(server: ServerProcess) -> None:
    client = server.client()
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "word " * (CONTEXT + 10)}])
    assert info.value.body["code"] == "context_length_exceeded"


@pytest.mark.slow  # the fast suite's budget: see the module docstring
def test_unknown_routes_and_methods(server: ServerProcess) -> None:
    code, reply = server.get("/v1/embeddings")
    assert code == 404
    assert reply["error"]["type"] == "not_found_error"
    code, reply = server.request("DELETE", "/v1/models")
    assert code == 405
    assert reply["error"]["message"] == "DELETE is not allowed on /v1/models"


# --------------------------------------------------------------------------
# the queue: one generation at a time, a disconnect frees the engine


def test_requests_queue_and_a_disconnect_frees_the_engine(server: ServerProcess,
                                                          model: Model) -> None:
    """A long streamed request runs; three clients queue behind it (``/health`` shows
    them waiting, one running); the long stream's client disconnects: its request
    stops early (cancelled) and the three get their answers, each the text it
    would get alone."""
    before = server.health()["requests"]
    client = server.client()
    long = client.completions.create(model="m", prompt=PROMPT, max_tokens=20_000,
                                     temperature=0, stream=True,
                                     extra_body={"ignore_eos": True})
    first = next(iter(long))
    assert first.choices[0].text is not None
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def ask(seed: int) -> None:
        try:
            reply = server.client().completions.create(
                model="m", prompt=PROMPT, max_tokens=8, temperature=3.0, seed=seed)
            results[seed] = reply.choices[0].text
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(seed,)) for seed in (1, 2, 3)]
    for t in threads:
        t.start()
    _wait_until(lambda: server.health()["queue"]["waiting"] == 3, REQUEST_SECONDS,
                "three waiting requests")
    queue = server.health()["queue"]
    assert queue["running"] == 1
    assert not results  # nobody overtook the running request
    long.close()  # the client goes away mid-stream
    for t in threads:
        t.join(REQUEST_SECONDS)
        assert not t.is_alive(), "a queued request never finished"
    assert not errors, errors
    for seed in (1, 2, 3):
        want = model.generate(PROMPT, max_tokens=8,
                              sampling=SamplingParams(temperature=3.0, top_k=20, top_p=0.8,
                                                      seed=seed))
        assert results[seed] == want.text
    after = server.health()
    assert after["queue"]["peak_running"] == 1
    assert (after["queue"]["running"], after["queue"]["waiting"]) == (0, 0)
    assert after["requests"]["cancelled"] == before["cancelled"] + 1
    assert after["requests"]["completed"] == before["completed"] + 3
    long_tokens = (after["requests"]["generated_tokens"] - before["generated_tokens"]
                   - 3 * 8)
    assert 1 <= long_tokens < 20_000
