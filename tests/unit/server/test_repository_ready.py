"""Readiness before and after the first load: the server listens before its servables are even
registered, and a probe in that window must not see an empty, vacuously ready repository."""

from __future__ import annotations

from pathlib import Path

from graphruntime.server.graph_servable import GraphDefinition
from graphruntime.server.model_repository import ModelRepository

GRAPH = """
input_stream: "in"
output_stream: "out"
node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "out" }
"""


async def test_not_ready_until_the_first_apply_has_loaded_its_servables() -> None:
    repository = ModelRepository()
    assert not repository.ready
    await repository.apply([GraphDefinition("echo", Path("."), graph_text=GRAPH)])
    assert repository.ready
    await repository.close()


async def test_an_empty_configuration_is_ready_once_applied() -> None:
    repository = ModelRepository()
    assert not repository.ready
    await repository.apply([])
    assert repository.ready
