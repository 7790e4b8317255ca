"""The ASGI application: OpenAI's routes over one loaded :class:`~nanocompile.api.Model`.

    GET  /health                 status, the model, the queue, request counts
    GET  /v1/models              the one model served (and /v1/models/{id})
    POST /v1/chat/completions    a chat reply (``stream: true``: server-sent events)
    POST /v1/completions         a plain continuation (streamed the same way)

Requests queue on the one model: an :class:`EngineQueue` runs one generation
at a time on its own thread, in arrival order, while the event loop keeps
accepting, parsing and refusing requests. A client that goes away (a
streamed response's connection closes, or a waiting client's does) sets its
job's cancel flag: a job not started yet is skipped, a running one stops
before its next forward pass, and the engine moves on to the next request.

Every error is answered with an OpenAI-shaped JSON body, never a traceback:
400 for a bad request (the message names the field), 404/405 for a route
that does not exist, 413 for a body over the limit, 500 (logged on the
server's stderr) for a failure of the server itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from nanocompile.checkpoint.jsonfile import JSONFileError, parse_json
from nanocompile.inference.generate import ContextLengthError, GenerationResult, check_prompt
from nanocompile.server import protocol
from nanocompile.server.protocol import Job, RequestError, Settings

if TYPE_CHECKING:
    from nanocompile.api import Model

LOG = logging.getLogger("nanocompile.server")
QUEUE_POLICY = ("one request at a time on the one model, in arrival order; the others wait "
                "(a client that disconnects leaves the queue, or stops its running request)")
DEFAULT_MAX_BODY = 1 << 20  # bytes of a request body (a prompt of ~250k tokens fits)
DRAIN_LIMIT = 64 << 20  # an oversized body is read (and dropped) up to this before the 413
POLL_SECONDS = 0.25  # how often a waiting, not-streamed request checks its client is there


class Cancelled(Exception):
    """The job was cancelled (its client left, or the server stops) before it ran."""


class EngineQueue:
    """Runs jobs one at a time, in arrival order, on one engine thread."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nanocompile-engine")
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.waiting = self.running = 0
        self.peak_running = self.peak_waiting = 0
        self.completed = self.cancelled = self.failed = 0
        self.generated_tokens = 0

    def submit(self, job: Job, cancel: threading.Event,
               on_token: Callable[[str], None] | None = None) -> Future[GenerationResult]:
        """Queue ``job``; ``cancel`` set: skip it, or stop it before its next step."""
        with self._lock:
            self.waiting += 1
            self.peak_waiting = max(self.peak_waiting, self.waiting)
        return self._executor.submit(self._run, job, cancel, on_token)

    def _run(self, job: Job, cancel: threading.Event,
             on_token: Callable[[str], None] | None) -> GenerationResult:
        with self._lock:
            self.waiting -= 1
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)
        try:
            result = self._generate(job, cancel, on_token)
        except Cancelled:
            with self._lock:
                self.cancelled += 1
            raise
        except BaseException:
            with self._lock:
                self.failed += 1
            raise
        finally:
            with self._lock:
                self.running -= 1
        with self._lock:
            if result.stop_reason == "cancelled":
                self.cancelled += 1
            else:
                self.completed += 1
            self.generated_tokens += len(result.token_ids)
        return result

    def _generate(self, job: Job, cancel: threading.Event,
                  on_token: Callable[[str], None] | None) -> GenerationResult:
        def stop_now() -> bool:
            return cancel.is_set() or self._closed.is_set()

        if stop_now():
            raise Cancelled(job.id)
        return self.model.generate_ids(
            job.prompt_ids, max_tokens=job.max_tokens, sampling=job.params,
            stop_ids=() if job.ignore_eos else self.model.stop_ids(chat=job.kind == "chat"),
            on_token=on_token,
            stop=job.stop, cancel=stop_now)

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {
                "policy": QUEUE_POLICY,
                "running": self.running,
                "waiting": self.waiting,
                "peak_running": self.peak_running,
                "peak_waiting": self.peak_waiting,
            }

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {"completed": self.completed, "cancelled": self.cancelled,
                    "failed": self.failed, "generated_tokens": self.generated_tokens}

    def close(self) -> None:
        """Stop the running job at its next step, drop the waiting ones."""
        self._closed.set()
        self._executor.shutdown(wait=False, cancel_futures=True)


# --------------------------------------------------------------------------
# the application


class Server:
    """The routes' shared state: the model, the queue, the settings."""

    def __init__(self, model: Model, settings: Settings, max_body: int) -> None:
        self.model = model
        self.settings = settings
        self.max_body = max_body
        self.queue = EngineQueue(model)
        self.started = int(time.time())

    # -- routes -----------------------------------------------------------

    async def health(self, request: Request) -> Response:
        model = self.model
        return JSONResponse({
            "status": "ok",
            "model": self.settings.model,
            "path": str(model.path),
            "synthetic": model.synthetic,
            "backend": model.backend,
            "weights": model.weights,
            "context": model.context,
            "defaults": {**protocol.sampling_summary(self.settings.defaults),
                         "max_tokens": self.settings.max_tokens},
            "queue": self.queue.status(),
            "requests": self.queue.counts(),
        })

    async def models(self, request: Request) -> Response:
        card = protocol.model_card(self.settings.model, self.started)
        return JSONResponse({"object": "list", "data": [card]})

    async def one_model(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name != self.settings.model:
            raise RequestError(f"the model {name!r} does not exist; this server serves "
                               f"{self.settings.model!r}", param="model", status=404,
                               code="model_not_found")
        return JSONResponse(protocol.model_card(self.settings.model, self.started))

    async def chat(self, request: Request) -> Response:
        body = await self._json(request)
        job = protocol.chat_job(body, self.settings, self.model.chat_ids)
        return await self._answer(request, job)

    async def completions(self, request: Request) -> Response:
        body = await self._json(request)
        job = protocol.completion_job(body, self.settings, self.model.tokenizer.encode)
        return await self._answer(request, job)

    # -- the body ---------------------------------------------------------

    async def _json(self, request: Request) -> Any:
        declared = request.headers.get("content-length", "")
        too_big = declared.isdigit() and int(declared) > self.max_body
        parts: list[bytes] = []
        size = 0
        async for part in request.stream():
            size += len(part)
            if size > self.max_body:
                too_big = True
            if size > DRAIN_LIMIT:
                break
            if not too_big:
                parts.append(part)
        if too_big:
            raise RequestError(f"the request body is larger than {self.max_body} bytes "
                               "(the server's --max-body-bytes)", status=413,
                               code="request_too_large")
        raw = b"".join(parts)
        try:
            return parse_json(raw)
        except JSONFileError as exc:  # not UTF-8, not JSON, nested too deeply
            raise RequestError(f"the body is {protocol.first_line(exc)}") from None

    # -- running a job ----------------------------------------------------

    def _check(self, job: Job) -> None:
        vocab = self.model.config.vocab_size
        bad = [i for i in job.prompt_ids if not 0 <= i < vocab]
        if bad:
            raise RequestError(f"prompt: token id {bad[0]} is outside the vocabulary "
                               f"[0, {vocab})", param="prompt")
        try:
            check_prompt(job.prompt_ids, self.model.context)
        except ContextLengthError as exc:
            raise RequestError(str(exc), param="messages" if job.kind == "chat" else "prompt",
                               code="context_length_exceeded") from None
        except ValueError as exc:
            raise RequestError(str(exc), param="prompt") from None

    async def _answer(self, request: Request, job: Job) -> Response:
        self._check(job)
        if job.stream:
            return StreamingResponse(self._events(job), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache",
                                              "X-Accel-Buffering": "no"})
        cancel = threading.Event()
        future = asyncio.wrap_future(self.queue.submit(job, cancel))
        try:
            while True:
                done, _ = await asyncio.wait({future}, timeout=POLL_SECONDS)
                if done:
                    break
                if await request.is_disconnected():
                    cancel.set()
        finally:
            cancel.set()  # finished: harmless; cancelled (the client left): frees the engine
        try:
            result = future.result()
        except Cancelled:  # before it ran: the client left, or the server is stopping
            raise RequestError("the request was cancelled before it ran (the server is "
                               "stopping)", status=503, kind="server_error") from None
        return JSONResponse(protocol.response(job, result))

    async def _events(self, job: Job) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def on_token(piece: str) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the server stops
                loop.call_soon_threadsafe(pieces.put_nowait, ("piece", piece))

        def finished(future: Future[GenerationResult]) -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(pieces.put_nowait, ("done", future))

        cancel = threading.Event()
        self.queue.submit(job, cancel, on_token).add_done_callback(finished)
        try:
            if job.kind == "chat":
                yield _event(protocol.chunk(job, first=True))
            while True:
                kind, value = await pieces.get()
                if kind == "piece":
                    yield _event(protocol.chunk(job, value))
                    continue
                try:
                    result = value.result()
                except Exception as exc:
                    LOG.exception("generation failed")
                    yield _event(protocol.error_body(f"generation failed: "
                                                     f"{protocol.first_line(exc)}",
                                                     kind="server_error"))
                    return
                yield _event(protocol.chunk(job, result=result))
                if job.include_usage:
                    yield _event(protocol.usage_chunk(job, result))
                yield "data: [DONE]\n\n"
                return
        finally:
            cancel.set()  # the client left mid-stream (or it ended): the engine moves on


def _event(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


# --------------------------------------------------------------------------
# errors


async def _request_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestError)
    return JSONResponse(exc.body(), status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    message = {404: f"no route {request.method} {request.url.path} (see /v1/models, "
                    "/v1/chat/completions, /v1/completions, /health)",
               405: f"{request.method} is not allowed on {request.url.path}"
               }.get(exc.status_code, str(exc.detail))
    return JSONResponse(protocol.error_body(message, kind=kind), status_code=exc.status_code,
                        headers=getattr(exc, "headers", None))


async def _server_error(request: Request, exc: Exception) -> Response:
    LOG.error("%s %s failed: %s: %s", request.method, request.url.path,
              type(exc).__name__, protocol.first_line(exc))
    body = protocol.error_body(f"internal server error ({type(exc).__name__}); see the "
                               "server's log", kind="server_error")
    return JSONResponse(body, status_code=500)


def create_app(model: Model, settings: Settings, *, max_body: int = DEFAULT_MAX_BODY
               ) -> Starlette:
    """The server's ASGI application for ``model`` (run it with uvicorn)."""
    server = Server(model, settings, max_body)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        server.queue.close()

    routes = [
        Route("/health", server.health, methods=["GET"]),
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/v1/models/{name:path}", server.one_model, methods=["GET"]),
        Route("/v1/chat/completions", server.chat, methods=["POST"]),
        Route("/v1/completions", server.completions, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        RequestError: _request_error, HTTPException: _http_error, Exception: _server_error})
    app.state.server = server
    return app
