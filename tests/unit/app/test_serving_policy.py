"""The queue bound directive of graph.pbtxt, and how the policy reaches servables."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from graphrt.serving.policy import ServingPolicy, apply, queue_bound, supervisors
from servables.errors import ServableLoadError
from servables.runtime.admission import Admission
from servables.runtime.supervision import RestartPolicy, Supervisor


async def nothing() -> None:
    return None


@dataclass
class WithBoth:
    supervisor: Supervisor = field(default_factory=lambda: Supervisor("w", nothing))
    admission: Admission = field(default_factory=lambda: Admission("w", 4))


def test_the_directive_overrides_the_default() -> None:
    text = 'node { calculator: "X" }\n  #  GRAPHRT_MAX_QUEUED_REQUESTS:  7 \n'
    assert queue_bound(text, 1024) == 7
    assert queue_bound('node { calculator: "X" }  # GRAPHRT_MAX_QUEUED_REQUESTS: 7', 9) == 9
    assert queue_bound("# OVMS_GRAPH_QUEUE_MAX_SIZE: 4\n", 1024) == 1024


@pytest.mark.parametrize("value", ["-1", "many", ""])
def test_a_bad_directive_fails_the_load(value: str) -> None:
    with pytest.raises(ServableLoadError, match="GRAPHRT_MAX_QUEUED_REQUESTS"):
        queue_bound(f"# GRAPHRT_MAX_QUEUED_REQUESTS: {value}\n", 1024)


def test_apply_reaches_any_resource_with_a_supervisor_or_an_admission() -> None:
    both, plain = WithBoth(), object()
    restart = RestartPolicy(max_restarts=2, window=9.0)
    apply(ServingPolicy(restart, 5), [both, plain], max_queued=3)
    assert both.supervisor.policy == restart
    assert both.admission.max_queued == 3
    assert supervisors([both, plain]) == [both.supervisor]


@dataclass
class WithAdapters(WithBoth):
    """An LLM with LoRA adapter engines: worker processes besides its main one."""

    adapters: list[Supervisor] = field(
        default_factory=lambda: [Supervisor("a", nothing), Supervisor("b", nothing)]
    )

    def more_supervisors(self) -> list[Supervisor]:
        return self.adapters


def test_adapter_engines_get_the_policy_and_are_counted() -> None:
    llm = WithAdapters()
    restart = RestartPolicy(max_restarts=1, window=4.0)
    apply(ServingPolicy(restart, 5), [llm], max_queued=3)
    assert all(s.policy == restart for s in llm.adapters)
    assert supervisors([llm]) == [llm.supervisor, *llm.adapters]
