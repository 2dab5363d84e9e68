"""Exceptions of the graph runtime.

Every error carries the message a user should read; callers convert them at the edge (CLI, HTTP,
gRPC) and never need to parse text. Errors about the graph file carry a `SourceLocation` so the
CLI can print `FILE:LINE: message`, the form editors and CI logs understand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """A place in a graph file; lines and columns count from 1."""

    path: str | None
    line: int
    column: int = 1
    via: str = ""  # for a node expanded from a subgraph: which one, used where

    def __str__(self) -> str:
        return f"{self.path or '<graph>'}:{self.line}"

    def describe(self, message: str) -> str:
        """`FILE:LINE: message`, plus the subgraph use that brought the line in."""
        return f"{self}: {message}" + (f" (in {self.via})" if self.via else "")


class GraphError(Exception):
    """Root of all graph runtime errors."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class GraphConfigError(GraphError):
    """The text of a graph is not a valid CalculatorGraphConfig."""

    def __init__(self, message: str, location: SourceLocation | None = None) -> None:
        super().__init__(message)
        self.location = location

    def __str__(self) -> str:
        return self.location.describe(self.message) if self.location else self.message


@dataclass(frozen=True)
class ValidationIssue:
    """One problem found while validating a graph."""

    message: str
    location: SourceLocation | None = None

    def __str__(self) -> str:
        return self.location.describe(self.message) if self.location else self.message


class GraphValidationError(GraphError):
    """The graph parses but breaks rules; `issues` lists every problem found, not just the first."""

    def __init__(self, issues: Sequence[ValidationIssue]) -> None:
        self.issues = tuple(issues)
        super().__init__("\n".join(str(issue) for issue in self.issues))


class GraphUsageError(GraphError):
    """The graph API was called at the wrong time or with a name the graph does not have."""


class PacketError(GraphError, ValueError):
    """A packet offered to a graph input stream breaks the stream's timestamp rules."""


class CalculatorError(GraphError):
    """A calculator's open, process or close failed; `cause` is what it raised."""

    def __init__(self, node: str, phase: str, cause: BaseException) -> None:
        detail = getattr(cause, "message", None) or str(cause) or type(cause).__name__
        super().__init__(f'Calculator::{phase}() for node "{node}" failed: {detail}')
        self.node = node
        self.phase = phase
        self.cause = cause
        self.__cause__ = cause


class GraphRunError(GraphError):
    """A graph run failed; `errors` holds every failure recorded during the run, in order."""

    def __init__(
        self, errors: Sequence[GraphError], prefix: str = "CalculatorGraph::Run() failed:"
    ) -> None:
        self.errors = tuple(errors)
        super().__init__(prefix + " \n" + "\n".join(error.message for error in self.errors))
        if self.errors:
            self.__cause__ = self.errors[0]

    @property
    def cause(self) -> BaseException | None:
        """The first underlying exception, for mapping the failure to an API status."""
        first = self.errors[0] if self.errors else None
        return first.cause if isinstance(first, CalculatorError) else first


class GraphCancelledError(GraphError):
    """The run was cancelled through `cancel()`."""
