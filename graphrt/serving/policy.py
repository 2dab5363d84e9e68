"""The operator's serving settings, applied to every servable the repository loads.

Servables with a worker process expose a `supervisor` (servables.runtime.supervision) and servables
with an engine queue an `admission` (servables.runtime.admission); the server finds them by those
attributes, so it applies the restart policy and queue bound to any kind of servable without knowing
it.

The queue bound comes from `--max_queued_requests`, unless a graph sets its own with a comment
line in graph.pbtxt:

    # GRAPHRT_MAX_QUEUED_REQUESTS: 16

A comment, because graph files must stay readable by OVMS and MediaPipe, and OVMS's own LLM
options (LLMCalculatorOptions) are a wire format graphrt must not extend; OVMS configures its
graph pool the same way (`# OVMS_GRAPH_QUEUE_MAX_SIZE`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from servables.errors import ServableLoadError
from servables.io.audio.codec import AudioLimits
from servables.runtime.admission import DEFAULT_MAX_QUEUED, HasAdmission
from servables.runtime.supervision import (
    HasMoreSupervisors,
    HasSupervisor,
    RestartPolicy,
    Supervisor,
)

QUEUE_DIRECTIVE = "GRAPHRT_MAX_QUEUED_REQUESTS"
_DIRECTIVE = re.compile(rf"^\s*#\s*{QUEUE_DIRECTIVE}\s*:\s*(\S*)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class ServingPolicy:
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    max_queued_requests: int = DEFAULT_MAX_QUEUED
    audio: AudioLimits = field(default_factory=AudioLimits)
    # Where every graph looks for subgraph files, after its own directory and config.json's
    # subgraph_paths (--subgraph_path).
    subgraph_paths: tuple[str, ...] = ()
    verbose_response: bool = False  # --verbose_response: LLM answers carry OVMS's __verbose


def queue_bound(graph_text: str, default: int) -> int:
    """The graph's own bound (its GRAPHRT_MAX_QUEUED_REQUESTS line), else `default`."""
    found = _DIRECTIVE.findall(graph_text)
    if not found:
        return default
    value = found[-1]
    if not (value.isascii() and value.isdigit()):
        raise ServableLoadError(
            f"# {QUEUE_DIRECTIVE}: expects a non-negative integer, got {value!r}"
        )
    return int(value)


@runtime_checkable
class HasVerboseResponse(Protocol):
    """An LLM servable: with --verbose_response its answers carry the prompt and raw output."""

    verbose_response: bool


@runtime_checkable
class HasAudioLimits(Protocol):
    """A servable that takes audio uploads (speech to text): the server's limits apply."""

    audio_limits: AudioLimits


def supervisors(resources: Iterable[Any]) -> list[Supervisor]:
    found: list[Supervisor] = []
    for resource in resources:
        if isinstance(resource, HasSupervisor):
            found.append(resource.supervisor)
        if isinstance(resource, HasMoreSupervisors):
            found.extend(resource.more_supervisors())
    return found


def apply(policy: ServingPolicy, resources: Iterable[Any], max_queued: int) -> None:
    """Give every resource the restart policy and queue bound (before they start)."""
    for resource in resources:
        if isinstance(resource, HasSupervisor):
            resource.supervisor.policy = policy.restart
        if isinstance(resource, HasMoreSupervisors):
            for supervisor in resource.more_supervisors():
                supervisor.policy = policy.restart
        if isinstance(resource, HasAdmission):
            resource.admission.max_queued = max_queued
        if isinstance(resource, HasAudioLimits):
            resource.audio_limits = policy.audio
        if isinstance(resource, HasVerboseResponse):
            resource.verbose_response = policy.verbose_response
