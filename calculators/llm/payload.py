"""The HTTP request as a graph packet, and the connection it came on.

The server (application layer) fills these in; calculators only see this module, so they never
depend on the HTTP framework. `ClientConnection` is how a disconnect reaches a calculator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from servables.request_fields import Form


class ClientConnection(Protocol):
    def is_disconnected(self) -> bool: ...

    def on_disconnect(self, callback: Callable[[], None]) -> None: ...


@dataclass(frozen=True)
class HttpPayload:
    """One HTTP request: what OVMS's HttpPayload carries (uri, headers, body, parsed JSON, and
    the parts of a multipart form, whose `body` is then empty)."""

    uri: str
    headers: Mapping[str, str]
    body: bytes
    parsed_json: Any = None
    client: ClientConnection | None = None
    form: Form | None = None


@dataclass(frozen=True)
class HttpReply:
    """A response packet with a content type of its own (speech audio) or response headers:
    its bytes, their content type, and headers for the client. A plain `bytes` packet is a
    JSON body, or SSE frames when the request streams; in a stream, only the first packet's
    headers can reach the client (they go out before its first frames)."""

    body: bytes
    content_type: str
    headers: Mapping[str, str] = field(default_factory=dict)
