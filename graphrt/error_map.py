"""One table from exception classes to HTTP status and OpenAI error type.

Every transport converts errors here, once, at its edge. Graph failures are unwrapped to the
exception a calculator raised, so a servable's InvalidRequest is a 400 whether it came through a
graph or not. Anything unexpected is a 500 whose body says only "Internal server error"; the
details (the traceback) go to the log. Every server error's message names the request id
(graphrt.observability.request_ids), which the log lines of that request carry too, so a user's
report leads to the traceback. Messages lose the C++ source locations and build paths openvino's
exceptions carry (servables.errors.readable_message); the log keeps them. A temporary condition
(an engine restarting, a full queue) carries the seconds after which a retry may succeed
(HTTP's Retry-After).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from graphrt.errors import NotFound, RequestTooLarge, Unauthorized
from graphrt.observability.request_ids import with_request_id
from graphruntime.errors import CalculatorError, GraphError, GraphRunError
from servables.errors import (
    EngineDead,
    InvalidRequest,
    ModelNotFound,
    RequestCancelled,
    ServableBusy,
    ServableError,
    ServableLoadError,
    ServableNotReady,
    UnsupportedEndpoint,
    readable_message,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ErrorMapping:
    status: int
    error_type: str
    code: str | None = None


# Most specific classes first: lookup walks the table in order with isinstance().
TABLE: tuple[tuple[type[BaseException], ErrorMapping], ...] = (
    (UnsupportedEndpoint, ErrorMapping(404, "invalid_request_error", "unsupported_endpoint")),
    (InvalidRequest, ErrorMapping(400, "invalid_request_error")),
    (Unauthorized, ErrorMapping(401, "invalid_request_error", "invalid_api_key")),
    (ModelNotFound, ErrorMapping(404, "invalid_request_error", "model_not_found")),
    (NotFound, ErrorMapping(404, "invalid_request_error")),
    (RequestTooLarge, ErrorMapping(413, "invalid_request_error", "request_too_large")),
    (RequestCancelled, ErrorMapping(499, "invalid_request_error", "cancelled")),
    (EngineDead, ErrorMapping(503, "server_error", "engine_unavailable")),
    (ServableBusy, ErrorMapping(503, "server_error", "queue_full")),
    (ServableNotReady, ErrorMapping(503, "server_error", "model_not_ready")),
    (ServableLoadError, ErrorMapping(503, "server_error", "model_not_ready")),
    (ServableError, ErrorMapping(500, "server_error")),
)
INTERNAL = ErrorMapping(500, "server_error")


@dataclass(frozen=True)
class ClientError:
    """What to send: status, OpenAI error fields."""

    status: int
    message: str
    error_type: str
    param: str | None
    code: str | None
    retry_after: int | None = None  # whole seconds, for the Retry-After header


def retry_seconds(value: float | None) -> int | None:
    """Retry-After takes whole seconds; never 0 (that invites a retry storm)."""
    return None if value is None else max(1, math.ceil(value))


def root_cause(error: BaseException) -> BaseException:
    """The exception that explains a graph failure (what the calculator raised)."""
    if isinstance(error, GraphRunError):
        for candidate in error.errors:
            if isinstance(candidate, CalculatorError) and isinstance(
                candidate.cause, ServableError
            ):
                return candidate.cause
        first = error.errors[0] if error.errors else error
        return root_cause(first) if first is not error else error
    if isinstance(error, CalculatorError) and isinstance(error.cause, ServableError):
        return error.cause
    return error


def to_client_error(error: BaseException) -> ClientError:
    cause = root_cause(error)
    for klass, mapping in TABLE:
        if isinstance(cause, klass):
            assert isinstance(cause, ServableError)
            message = readable_message(cause.message)
            if mapping.status >= 500:
                logger.warning("request failed: %s", cause.message)
                message = with_request_id(message)
            return ClientError(
                mapping.status,
                message,
                mapping.error_type,
                cause.param,
                cause.code or mapping.code,
                retry_seconds(cause.retry_after) if mapping.status == 503 else None,
            )
    if isinstance(cause, GraphError):
        # A calculator failed: its message names the node and phase and is meant for users;
        # what it raised, with the traceback, goes to the log.
        failed = getattr(cause, "cause", None)
        if isinstance(failed, BaseException):
            logger.error("graph failed: %s", cause.message, exc_info=failed)
        else:
            logger.warning("graph failed: %s", cause.message)
        message = with_request_id(readable_message(cause.message))
        return ClientError(500, message, INTERNAL.error_type, None, None)
    logger.error("unexpected error while serving a request", exc_info=cause)
    message = with_request_id("Internal server error")
    return ClientError(500, message, INTERNAL.error_type, None, None)
