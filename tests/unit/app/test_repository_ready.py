"""Readiness before and after the first load: the server listens before its servables are even
registered, and a probe in that window must not see an empty, vacuously ready repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrt.serving.graph_servable import GraphDefinition, GraphServable
from graphrt.serving.model_repository import ModelRepository
from servables.errors import ModelNotFound, ServableNotReady

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


LORA_GRAPH = """
input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"
node {
  calculator: "HttpLLMCalculator"
  node_options: {
    [type.googleapis.com / mediapipe.LLMCalculatorOptions]: {
      models_path: "model.gguf"
      lora_adapters { alias: "pirate" path: "pirate" }
      lora_adapters { alias: "poet" path: "poet" alpha: 0.5 }
    }
  }
}
"""


async def test_an_adapter_of_a_graph_still_loading_is_not_available_rather_than_unknown() -> None:
    """Clients retry a 503 and give up on a 404: an adapter's name must not be 'unknown' just
    because its graph has not finished loading (or failed to)."""
    repository = ModelRepository()
    servable = GraphServable(GraphDefinition("llm", Path("."), graph_text=LORA_GRAPH))
    repository.servables["llm"] = servable  # registered, not loaded yet
    assert servable.declared_aliases == ["pirate", "poet"]
    assert repository.get("poet") is servable
    with pytest.raises(ServableNotReady, match="not available"):
        servable.check_ready()
    with pytest.raises(ModelNotFound):
        repository.get("parrot")


def test_a_model_still_being_fetched_is_not_available_rather_than_unknown() -> None:
    """A model pulled at start is a 503 that names what is happening, not a 404."""
    repository = ModelRepository()
    repository.pending["org/model"] = "pulling org/model"
    with pytest.raises(ServableNotReady, match="LOADING: pulling org/model") as raised:
        repository.get("org/model")
    assert raised.value.retry_after
    with pytest.raises(ModelNotFound):
        repository.get("other")
    assert not repository.ready
