"""`tracerl guard serve`: the guard on a loopback HTTP endpoint (FastAPI on uvicorn).

    POST /score   {"messages": [...OpenAI-chat messages...],
                   "call": {"name": "...", "arguments": {...} or "<JSON text>"}}
                  -> Guard.score's answer (verdict, support, q, v, advantage, reason)
    GET  /health  -> {"status": "ok", ...what the guard was built from}

A body that is not JSON, lacks a field, or holds a history the adapter rejects gets a 422
whose `detail` names the field and the reason; a body over `max_body_bytes` a 413 (read no
further: a declared length is refused before reading, a streamed one once it passes the
limit); with a token, a request without `Authorization: Bearer <token>` a 401. Only
loopback addresses are served: the guard answers agents on this machine, and its answers
describe the logs. The server logs to a file (`guard.log` of params), never to a pipe.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tracerl.guard.guard import Guard, GuardInputError


class Call(BaseModel):
    """The proposed tool call: its name and arguments (an object, or its JSON text)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class ScoreRequest(BaseModel):
    """POST /score's body: the conversation so far and the call proposed next."""

    model_config = ConfigDict(extra="forbid")
    messages: list[dict[str, Any]]
    call: Call
    context: dict[str, str] | None = None  # {task, domain}: what a chat history lacks


def is_loopback(host: str) -> bool:
    """True for a loopback address or a name that resolves only to loopback addresses."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


class _Limits:
    """Refuse, before the app reads a body: a missing or wrong bearer token (401), a body
    over `max_body_bytes` (413: by its declared length, else once the stream passes it)."""

    def __init__(self, app: Any, token: str | None, max_body_bytes: int) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes
        self.expected = f"Bearer {token}".encode() if token else None
        self.too_large = f"request body over {max_body_bytes} bytes (guard.max_body_bytes)"

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        from fastapi import HTTPException
        from fastapi.responses import JSONResponse

        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or ())
        if self.expected is not None and not hmac.compare_digest(
                headers.get(b"authorization", b""), self.expected):
            return await JSONResponse({"detail": "missing or wrong bearer token"}, 401,
                                      {"WWW-Authenticate": "Bearer"})(scope, receive, send)
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_body_bytes:
            return await JSONResponse({"detail": self.too_large}, 413)(scope, receive, send)
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body_bytes:
                raise HTTPException(status_code=413, detail=self.too_large)
            return message

        await self.app(scope, counted, send)


def create_app(guard: Guard, *, token: str | None = None,
               max_body_bytes: int = 1_000_000) -> Any:
    """The FastAPI app answering for `guard`; `token`: the bearer token every request must
    carry (None: none); `max_body_bytes`: the largest request body read."""
    from fastapi import FastAPI, HTTPException

    app = FastAPI(title="tracerl guard", version="1",
                  summary="Vet a proposed tool call against the logs before it runs.")

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", **guard.describe()}

    @app.post("/score")
    def score(request: ScoreRequest) -> dict[str, Any]:
        try:
            return guard.score(request.messages, request.call.model_dump(), request.context)
        except GuardInputError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None

    app.add_middleware(_Limits, token=token, max_body_bytes=max_body_bytes)
    return app


def serve(guard: Guard, host: str, port: int, log_level: str = "info", *,
          token: str | None = None, max_body_bytes: int = 1_000_000,
          log_file: Path | None = None) -> None:
    """Serve until SIGINT or SIGTERM: either finishes the open requests, stops, and returns
    (the process then exits 0: the stop was asked for, not a crash; uvicorn alone would
    re-raise the signal and die by it). The server's log goes to `log_file` (appended)."""
    import contextlib
    import signal

    import uvicorn

    if not is_loopback(host):
        raise ValueError(f"host {host!r} is not a loopback address: the guard serves this "
                         "machine only (use 127.0.0.1 or ::1)")

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):  # noqa: ANN202 (uvicorn's hook)
            stops = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in stops}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    log_config = None if log_file is None else _file_logging(Path(log_file), log_level)
    app = create_app(guard, token=token, max_body_bytes=max_body_bytes)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                            access_log=log_file is not None, log_config=log_config)
    _Server(config).run()


def _file_logging(path: Path, level: str) -> dict[str, Any]:
    """uvicorn's loggers (server, errors, each request) into one file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = {"class": "logging.FileHandler", "filename": str(path), "formatter": "plain"}
    return {"version": 1, "disable_existing_loggers": False,
            "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(message)s"}},
            "handlers": {"file": handler},
            "loggers": {name: {"handlers": ["file"], "level": level.upper(),
                               "propagate": False}
                        for name in ("uvicorn", "uvicorn.error", "uvicorn.access")}}
