"""`tracerl guard serve`: the guard on a loopback HTTP endpoint (FastAPI on uvicorn).

    POST /score   {"messages": [...OpenAI-chat messages...],
                   "call": {"name": "...", "arguments": {...} or "<JSON text>"}}
                  -> Guard.score's answer (verdict, support, q, v, advantage, reason)
    GET  /health  -> {"status": "ok", ...what the guard was built from}

A body that is not JSON, lacks a field, or holds a history the adapter rejects gets a 422
whose `detail` names the field and the reason. Only loopback addresses are served: the
guard answers agents on this machine, and its answers describe the logs.
"""

from __future__ import annotations

import ipaddress
import socket
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


def create_app(guard: Guard) -> Any:
    """The FastAPI app answering for `guard`."""
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

    return app


def serve(guard: Guard, host: str, port: int, log_level: str = "info") -> None:
    """Serve until SIGINT or SIGTERM: either finishes the open requests, stops, and returns
    (the process then exits 0: the stop was asked for, not a crash; uvicorn alone would
    re-raise the signal and die by it)."""
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

    config = uvicorn.Config(create_app(guard), host=host, port=port, log_level=log_level,
                            access_log=False)
    _Server(config).run()
