"""Errors a servable reports; the server maps each class to an HTTP status and an OpenAI error type.

`message` is safe to show to the client; internals go to the log, never into it.
"""

from __future__ import annotations


class ServableError(Exception):
    """Root of servable errors (maps to 500 unless a subclass says otherwise)."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        # Seconds after which the same request may succeed (a temporary condition), else None.
        self.retry_after = retry_after


class InvalidRequest(ServableError):
    """The request is malformed or out of range (400)."""


class GrammarNotCompiled(InvalidRequest):
    """The engine could not compile the request's grammar (400; the servable names the field)."""


class ModelNotFound(ServableError):
    """No servable has the requested name (404)."""


class ServableNotReady(ServableError):
    """The servable is loading, unloading or failed to load (503)."""


class EngineDead(ServableNotReady):
    """The engine process died; requests fail until it has been restarted (503)."""


class ServableBusy(ServableError):
    """The servable's queue of waiting requests is full (503 with Retry-After)."""


class RequestCancelled(ServableError):
    """The client went away or the request was aborted."""


class ServableLoadError(ServableError):
    """The model files or options do not allow the servable to be built."""
