"""A DAG pipeline served like a graph: its definition from config.json, checked when it loads.

`pipeline_definition` turns a `pipeline_config_list` entry into a graph definition whose text
is the pipeline translated (graphrt.serving.dag.graph); a pipeline whose structure cannot run
gets a definition with the reason instead, and is reported UNAVAILABLE with it when it loads,
while the rest of the file is served. Loading first checks the pipeline against the models it
names (graphrt.serving.dag.signature), which the repository loads before any graph, then builds
the graph like any other. The repository reloads a pipeline when a model it uses changes, so it
is checked again against the new versions (OVMS revalidates its pipelines the same way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from calculators.openvino.session import MODELS
from graphrt.serving.dag.config import PipelineConfig
from graphrt.serving.dag.graph import PipelineGraph, pipeline_graph
from graphrt.serving.dag.signature import PipelineSignature, signature
from graphrt.serving.dag.structure import PipelineError, PipelineLayout, layout
from graphrt.serving.graph_servable import GraphDefinition, GraphServable

PIPELINE_VERSION = 1  # pipelines are not versioned; OVMS reports them as version 1


@dataclass(frozen=True)
class PipelineDefinition(GraphDefinition):
    """A graph definition made from a pipeline (`graph` is None when `problem` says why)."""

    pipeline: PipelineConfig | None = None
    layout: PipelineLayout | None = None
    graph: PipelineGraph | None = None

    @property
    def models(self) -> set[str]:
        """The names of the models the pipeline's nodes run."""
        assert self.pipeline is not None
        return {node.model_name for node in self.pipeline.nodes if node.model_name}


def pipeline_definition(
    config: PipelineConfig, libraries: Mapping[str, str], config_path: Path
) -> PipelineDefinition:
    base = config_path.parent.resolve()
    try:
        structure = layout(config, libraries)
    except PipelineError as error:
        return PipelineDefinition(config.name, base, problem=error.message, pipeline=config)
    graph = pipeline_graph(config, structure, str(config_path))
    return PipelineDefinition(
        config.name,
        base,
        graph_text=graph.text,
        version=PIPELINE_VERSION,
        pipeline=config,
        layout=structure,
        graph=graph,
    )


class PipelineServable(GraphServable):
    """See the module docstring; `signature` is the KServe metadata once loaded."""

    definition: PipelineDefinition

    signature: PipelineSignature | None = None

    def check_before_load(self) -> None:
        definition = self.definition
        assert definition.pipeline is not None and definition.layout is not None
        self.signature = signature(definition.pipeline, definition.layout, self.services[MODELS])

    @property
    def declared_aliases(self) -> list[str]:
        """A pipeline answers to its name only (no adapters), even when it has no graph."""
        return []

    @property
    def graph_streams(self) -> PipelineGraph:
        assert self.definition.graph is not None
        return self.definition.graph
