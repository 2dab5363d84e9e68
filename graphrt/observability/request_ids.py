"""Request ids: one per request, in the response's `X-Request-Id`, in its log lines and 500s.

The id is kept in a context variable, so everything a request runs (its graph's calculators,
threads started with `asyncio.to_thread`) sees it without passing it around, and a logging
filter adds it to every line logged on the request's behalf. An id the client sends in
`X-Request-Id` (or a proxy in front of the server) is reused when it is reasonable (printable
ASCII, at most 128 characters), so one id follows a request through every hop; otherwise a new
one is made. Transports bind it (`bind`) when a request arrives; anything else just reads it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
from contextvars import ContextVar

HEADER = "X-Request-Id"
GRPC_METADATA_KEY = "x-request-id"
MAX_LENGTH = 128
_ACCEPTABLE = re.compile(rf"[!-~]{{1,{MAX_LENGTH}}}")  # printable ASCII, no spaces

_current: ContextVar[str | None] = ContextVar("graphrt_request_id", default=None)


def current() -> str | None:
    """The id of the request being served here, if any."""
    return _current.get()


def accept(incoming: str | None) -> str:
    """The client's id if it is acceptable, else a fresh one."""
    if incoming is not None and _ACCEPTABLE.fullmatch(incoming):
        return incoming
    return secrets.token_hex(16)  # as random as uuid4, without building a UUID (~4 us)


class BoundId:
    """The context manager `bind` returns: a class rather than a generator-based one, as it is
    entered for every request (a microsecond less)."""

    __slots__ = ("_token", "request_id")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id

    def __enter__(self) -> str:
        self._token = _current.set(self.request_id)
        return self.request_id

    def __exit__(self, *exc_info: object) -> None:
        # An async generator closed from another context (garbage collection) cannot reset.
        with contextlib.suppress(ValueError):
            _current.reset(self._token)


def bind(request_id: str) -> BoundId:
    """Make `request_id` the current id for the block (and tasks started inside it)."""
    return BoundId(request_id)


def with_request_id(message: str) -> str:
    """`message`, naming the current request id so a user can quote it (server errors)."""
    request_id = current()
    return f"{message} (request id {request_id})" if request_id else message


class RequestIdFilter(logging.Filter):
    """Adds `request_id` (or "-") and `request_prefix` ("[request ID] " or "") to records."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = current()
        record.request_id = request_id or "-"
        record.request_prefix = f"[request {request_id}] " if request_id else ""
        return True


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(request_prefix)s%(message)s"


def install(handlers: list[logging.Handler]) -> None:
    """Put the filter on the given handlers (filters on handlers see every logger's records)."""
    for handler in handlers:
        handler.addFilter(RequestIdFilter())
