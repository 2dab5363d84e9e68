"""Graph services: objects the application lends to every run (MediaPipe's GraphService).

A calculator that needs something from its host — the server's model repository, a connection
pool — declares the service in its contract (`cc.use_service(SERVICE)`) and reads it with
`cc.service(SERVICE)`. The application provides it once per `Graph`
(`Graph(..., services={SERVICE: obj})`). A required service that was not provided fails
`start_run` with a message naming the node, instead of failing deep inside a calculator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class GraphService(Generic[T]):
    """A typed key; `name` appears in error messages."""

    name: str
    kind: type[T]

    def __repr__(self) -> str:
        return f"GraphService({self.name!r})"
