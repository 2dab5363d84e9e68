"""A pipeline checked against the models it runs, and its inputs and outputs as KServe shows them.

OVMS's checks that need the models (`src/dags/pipelinedefinition.cpp`): every node's model (and
version) is loaded and has neither `batch_size` nor `shape` "auto"; a node connects each of
its model's inputs exactly once and only those; a data item a node reads is an output of the
model behind it; connected tensors have the same datatype and fitting shapes (-1 fits
anything), a demultiplexer's output losing its first dimension and a gathering node's input
too; strings are not passed between models. The pipeline's inputs take the metadata of the
model inputs they feed (the intersection when several; a conflict is an error), prefixed by the
request's demultiply_count; its outputs take their models' outputs' metadata, prefixed by the
branch counts the response gathers. An input or output that only passes from request to
response has no known metadata ("INVALID", as OVMS reports an unspecified tensor).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from graphrt.serving.dag.config import REQUEST, PipelineConfig, PipelineNode, Source
from graphrt.serving.dag.structure import PipelineError, PipelineLayout
from servables.errors import ServableError
from servables.ov_model.model import OpenVINOModel, TensorSpec

UNSPECIFIED = "INVALID"
MIN_DEMULTIPLY_DIMENSIONS = 3
Shape = tuple[int, ...]


class Models(Protocol):
    def model(self, name: str, version: int | None = None) -> OpenVINOModel: ...


@dataclass(frozen=True)
class PipelineSignature:
    """What KServe's metadata shows of the pipeline, in the config's order."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def input(self, name: str) -> TensorSpec | None:
        return next((spec for spec in self.inputs if spec.name == name), None)


def _shape(dims: Iterable[int]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _fits(want: Shape, got: Shape) -> bool:
    return len(want) == len(got) and all(
        a == b or -1 in (a, b) for a, b in zip(want, got, strict=True)
    )


def _intersection(first: Shape, second: Shape) -> Shape | None:
    if not _fits(first, second):
        return None
    return tuple(b if a == -1 else a for a, b in zip(first, second, strict=True))


class _Checker:
    def __init__(self, config: PipelineConfig, layout: PipelineLayout, models: Models) -> None:
        self.config = config
        self.layout = layout
        self.models: dict[str, OpenVINOModel] = {}
        for name in layout.order:
            node = config.node(name)
            assert node is not None
            self.models[name] = self._model(node, models)

    def fail(self, message: str) -> PipelineError:
        return PipelineError(self.config.name, message)

    def _model(self, node: PipelineNode, models: Models) -> OpenVINOModel:
        version = "" if node.version is None else f" version {node.version}"
        try:
            model = models.model(node.model_name, node.version)
        except ServableError as error:
            raise self.fail(
                f"node {node.name!r} refers to model {node.model_name!r}{version}, which is not "
                f"available: {error.message}"
            ) from None
        shapes = model.shape.values() if isinstance(model.shape, Mapping) else [model.shape]
        if model.batch_size == "auto" or "auto" in shapes:
            raise self.fail(
                f"node {node.name!r} uses model {node.model_name!r} with batch_size or shape "
                '"auto", which pipelines forbid; use a dynamic shape (-1) instead'
            )
        return model

    def count(self, demultiplexer: str) -> int:
        if demultiplexer == REQUEST:
            count = self.config.demultiply_count
        else:
            node = self.config.node(demultiplexer)
            assert node is not None
            count = node.demultiply_count
        assert count is not None
        return count

    def split(self, shape: Shape, demultiplexer: str, what: str) -> Shape:
        """`shape` of a tensor `demultiplexer` splits, without its first dimension."""
        count = self.count(demultiplexer)
        if len(shape) < MIN_DEMULTIPLY_DIMENSIONS:
            raise self.fail(
                f"{what} of shape {_shape(shape)} cannot be demultiplied by {demultiplexer!r}: "
                f"it needs at least {MIN_DEMULTIPLY_DIMENSIONS} dimensions"
            )
        if count != -1 and shape[0] not in (-1, count):
            raise self.fail(
                f"demultiply_count {count} of node {demultiplexer!r} does not match the first "
                f"dimension of {what} of shape {_shape(shape)}"
            )
        return shape[1:]

    def output(self, source: Source, consumer: str) -> TensorSpec:
        """The model output behind a node's data item, as the node's consumers see it."""
        node = self.config.node(source.node)
        assert node is not None
        name = node.output(source.data_item)
        assert name is not None  # structure.layout checked the data item
        model = self.models[node.name]
        spec = next((s for s in model.outputs if s.name == name), None)
        if spec is None:
            produced = ", ".join(s.name for s in model.outputs)
            raise self.fail(
                f"node {consumer!r} reads output {name!r} of node {node.name!r}, which model "
                f"{node.model_name!r} does not produce (outputs: {produced})"
            )
        shape = spec.shape
        if node.demultiply_count is not None:
            shape = self.split(shape, node.name, f"output {name!r} of node {node.name!r}")
        return TensorSpec(name, spec.datatype, shape)

    def node_inputs(self, node: PipelineNode) -> list[tuple[TensorSpec, Source]]:
        """Each connected model input (as its sources must supply it), with its source."""
        model = self.models[node.name]
        specs = {spec.name: spec for spec in model.inputs}
        connected = []
        for name, source in node.inputs:
            spec = specs.get(name)
            if spec is None:
                raise self.fail(
                    f"node {node.name!r} has no input with name {name!r} (model "
                    f"{node.model_name!r} takes {', '.join(specs)})"
                )
            shape = spec.shape
            if node.gather_from_node is not None:
                what = f"input {name!r} of node {node.name!r}"
                shape = self.split(shape, node.gather_from_node, what)
            connected.append((TensorSpec(name, spec.datatype, shape), source))
        missing = [name for name in specs if name not in dict(node.inputs)]
        if missing:
            raise self.fail(
                f"node {node.name!r} has inputs {', '.join(missing)} not connected to any source"
            )
        return connected

    def check_connection(self, node: str, wanted: TensorSpec, source: Source) -> None:
        given = self.output(source, node)
        where = f"node {node!r} input {wanted.name!r} and node {source.node!r} output"
        if wanted.datatype != given.datatype:
            raise self.fail(
                f"precision mismatch between {where} {given.name!r}: {wanted.datatype} vs "
                f"{given.datatype}"
            )
        if wanted.datatype == "BYTES":
            raise self.fail(f"connecting models with string precision is unsupported ({where})")
        if not _fits(wanted.shape, given.shape):
            raise self.fail(
                f"shape mismatch between {where} {given.name!r}: {_shape(wanted.shape)} vs "
                f"{_shape(given.shape)}"
            )

    def prefix(self, level: tuple[str, ...]) -> Shape:
        return tuple(self.count(demultiplexer) for demultiplexer in level)

    def signature(self) -> PipelineSignature:
        requested: dict[str, TensorSpec] = {}
        for name in self.layout.order:
            node = self.config.node(name)
            assert node is not None
            for spec, source in self.node_inputs(node):
                if source.node != REQUEST:
                    self.check_connection(name, spec, source)
                    continue
                known = requested.get(source.data_item)
                shape = spec.shape
                if known is not None:
                    merged = _intersection(known.shape, shape)
                    if known.datatype != spec.datatype or merged is None:
                        raise self.fail(
                            f"input {source.data_item!r} feeds model inputs with different "
                            f"metadata: {known.datatype} {_shape(known.shape)} and "
                            f"{spec.datatype} {_shape(shape)}"
                        )
                    shape = merged
                requested[source.data_item] = TensorSpec(source.data_item, spec.datatype, shape)
        request_level = self.layout.output_levels[REQUEST]
        inputs = tuple(
            TensorSpec(n, requested[n].datatype, self.prefix(request_level) + requested[n].shape)
            if n in requested
            else TensorSpec(n, UNSPECIFIED, ())
            for n in self.config.inputs
        )
        gathered = self.prefix(self.layout.response_level)
        outputs = []
        for name, source in self.config.outputs:
            if source.node == REQUEST:
                outputs.append(TensorSpec(name, UNSPECIFIED, ()))
                continue
            spec = self.output(source, "response")
            outputs.append(TensorSpec(name, spec.datatype, gathered + spec.shape))
        return PipelineSignature(inputs, tuple(outputs))


def signature(config: PipelineConfig, layout: PipelineLayout, models: Models) -> PipelineSignature:
    """Check the pipeline against its models (module docstring); raises PipelineError."""
    return _Checker(config, layout, models).signature()
