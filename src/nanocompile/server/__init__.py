"""``nanocompile serve``: an OpenAI-compatible HTTP server for one loaded model.

    nanocompile serve --model ~/Qwen2.5-0.5B-Instruct            # http://127.0.0.1:8000/v1
    curl -s http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\
        -d '{"model": "any", "messages": [{"role": "user", "content": "Hi"}]}'

The application (:mod:`nanocompile.server.app`) is Starlette, run by uvicorn;
the request and response bodies are :mod:`nanocompile.server.protocol`.
Requests queue on the one model (one generation at a time, in arrival
order); ``/health`` shows the queue. It listens on 127.0.0.1 unless told
otherwise: it has no authentication.
"""

from __future__ import annotations

import signal
import socket
import threading
from types import FrameType
from typing import TYPE_CHECKING

from nanocompile.server.app import DEFAULT_MAX_BODY, QUEUE_POLICY, create_app
from nanocompile.server.protocol import Settings

if TYPE_CHECKING:
    from nanocompile.api import Model

__all__ = ["DEFAULT_MAX_BODY", "QUEUE_POLICY", "Settings", "create_app", "listen", "serve"]

GRACEFUL_SECONDS = 3  # at shutdown, how long open responses may take to finish


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free one); OSError
    with the address in its message if it cannot be had."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


class _Stopped(Exception):
    """SIGTERM, raised again by uvicorn once it has shut down."""


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise _Stopped


def serve(model: Model, settings: Settings, sock: socket.socket, *,
          max_body: int = DEFAULT_MAX_BODY, log_level: str = "info") -> None:
    """Serve ``model`` on the listening ``sock`` until SIGINT or SIGTERM, then
    return (uvicorn shuts down gracefully, then raises the signal again: here
    that is the normal end, not an interruption)."""
    import uvicorn

    app = create_app(model, settings, max_body=max_body)
    config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=GRACEFUL_SECONDS,
                            lifespan="on")
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _stopped) if main else None
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except (KeyboardInterrupt, _Stopped):
        pass
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
