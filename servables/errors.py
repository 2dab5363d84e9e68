"""Errors a servable reports; the server maps each class to an HTTP status and an OpenAI error type.

`message` is safe to show to the client; internals go to the log, never into it.
`readable_message` strips the C++ source locations openvino puts in its exceptions before any
message reaches a client.
"""

from __future__ import annotations

import re

_SOURCE = r"(?:[\w.+-]*/)*[\w.+-]+\.(?:cpp|cxx|cc|hpp|hxx|hh|h|c|inl)(?::\d+)*"
# "Exception from src/inference/src/cpp/infer_request.cpp:224:" (openvino's prefix per frame)
_EXCEPTION_FROM = re.compile(rf"Exception from /?{_SOURCE}:?[ \t]*")
# "Check 'x' failed at src/core/src/node.cpp:12:" → "Check 'x' failed:"
_FAILED_AT = re.compile(rf" failed at /?{_SOURCE}:?")
# Any other source file path with a line, absolute or build-relative.
_LOCATION = re.compile(rf"(?<![\w/])/?{_SOURCE}:\d+:?[ \t]*")
_BUILD_ROOT = re.compile(r"/\S*?/(?:b/repos|workspace)/\S*?(?=[\w.+-]+\.(?:cpp|cxx|cc|hpp|h)\b)")


def readable_message(message: str) -> str:
    """`message` without the C++ source locations and build paths openvino's exceptions carry
    (`Exception from src/inference/src/cpp/infer_request.cpp:224:`, `/home/jenkins/agent/
    workspace/.../node.cpp:78`), with the meaningful text kept and its lines joined; a message
    without any is returned unchanged."""
    text = _BUILD_ROOT.sub("", message)
    text = _EXCEPTION_FROM.sub("", text)
    text = _FAILED_AT.sub(" failed:", text)
    text = _LOCATION.sub("", text)
    if text == message:
        return message  # nothing stripped: the message is left as it is
    lines = [line.strip() for line in text.splitlines()]
    text = " ".join(line for line in lines if line)
    return re.sub(r"\s{2,}", " ", text).strip() or message


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


class UnsupportedEndpoint(InvalidRequest):
    """The request's path is no endpoint of the model's graph, nor of any API (404)."""


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
