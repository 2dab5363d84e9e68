"""The HTTP request as a graph packet, the connection it came on, and the streams' tag names.

The application fills these in; calculators only see this module, so they never depend on the
HTTP framework. `ClientConnection` is how a disconnect reaches a calculator.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from servables.errors import InvalidRequest
from servables.io.request_fields import Form

REQUEST = "HTTP_REQUEST_PAYLOAD"
RESPONSE = "HTTP_RESPONSE_PAYLOAD"
# The graph's (input, output) tags an HTTP request runs through, in the order they are looked
# for: OVMS's embeddings and rerank graphs name them without the HTTP_ prefix.
PAYLOAD_TAGS = ((REQUEST, RESPONSE), ("REQUEST_PAYLOAD", "RESPONSE_PAYLOAD"))


class ClientConnection(Protocol):
    def is_disconnected(self) -> bool: ...

    def on_disconnect(self, callback: Callable[[], None]) -> None: ...


@dataclass(frozen=True)
class HttpPayload:
    """One HTTP request: what OVMS's HttpPayload carries (uri, headers, body, parsed JSON, the
    client's connection), the method, and the parts of a multipart form (`body` is then empty)."""

    uri: str
    headers: Mapping[str, str]
    body: bytes
    parsed_json: Any = None
    client: ClientConnection | None = None
    form: Form | None = None
    method: str = "POST"

    @property
    def path(self) -> str:
        """The URI without its query string and trailing slash."""
        return self.uri.split("?", 1)[0].rstrip("/")


def request_body(payload: HttpPayload) -> Any:
    """The request's JSON: parsed once by the application, or here for a payload made by hand."""
    if payload.parsed_json is not None:
        return payload.parsed_json
    try:
        return json.loads(payload.body)
    except ValueError as error:
        raise InvalidRequest(f"The request body is not valid JSON: {error}") from error
