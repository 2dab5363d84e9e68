"""Errors of the application layer itself (requests that never reach a graph)."""

from __future__ import annotations

from servables.errors import ServableError


class RequestTooLarge(ServableError):
    """The request body exceeds --max_request_size (413)."""


class Unauthorized(ServableError):
    """Missing or wrong API key (401)."""


class NotFound(ServableError):
    """No such endpoint (404)."""
