"""A pipeline as a graph.pbtxt of OVMS's model calculators, so the graph runtime runs it.

Each DL model node becomes an OpenVINOModelServerSessionCalculator (the model from the
repository, latest version unless the node names one) and an OpenVINOInferenceCalculator named
after the node, its streams tagged INPUT_i/OUTPUT_i and mapped to the model's tensor names.
The request's data items are the graph's input streams, the response's its output streams.

Demultiplexing is MediaPipe's loop idiom (calculators/dag): a DemultiplexCalculator after a
node with `demultiply_count` (after the inputs, for the pipeline's own) sends each slice at a
timestamp of its own, so the nodes downstream run once per branch, their calls overlapping
(`max_in_flight`: how many run at once is bounded by the model's pool of infer requests, nireq,
as in OVMS); a GatherCalculator before a node with `gather_from_node`, and before the response
for every level still open, stacks the branches again. Stream names are the data items'
(lowercased, other characters as `_`, made unique), and KServe's tensor names are mapped to
them, since OVMS's names need not be valid stream names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from graphrt.export.graph_text import quote
from graphrt.serving.dag.config import REQUEST, RESPONSE, PipelineConfig, PipelineNode, Source
from graphrt.serving.dag.structure import PipelineLayout

# Calls of one node in flight at once in a branch; the model's infer requests bound the rest.
BRANCHES_IN_FLIGHT = 64
INVALID_NAME_CHARACTERS = re.compile("[^a-z0-9_]")


@dataclass(frozen=True)
class PipelineGraph:
    """The graph's text, and the graph streams KServe's tensor names map to."""

    text: str
    input_streams: dict[str, str]  # pipeline input -> graph input stream
    output_streams: dict[str, str]  # pipeline output -> graph output stream


class _Names:
    """Valid, unique stream names."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def new(self, *parts: str) -> str:
        base = INVALID_NAME_CHARACTERS.sub("_", "__".join(parts).lower())
        if not base or base[0].isdigit():
            base = "_" + base
        name, suffix = base, 2
        while name in self.used:
            name, suffix = f"{base}_{suffix}", suffix + 1
        self.used.add(name)
        return name


def _node(name: str, calculator: str, lines: Iterable[str], options: str = "") -> str:
    body = "".join(f"  {line}\n" for line in lines)
    if options:
        body += f"  node_options: {{\n    {options}\n  }}\n"
    return f"node {{\n  name: {quote(name)}\n  calculator: {quote(calculator)}\n{body}}}\n"


def _map_entry(field: str, key: str, value: str) -> str:
    return f"{field} {{ key: {quote(key)} value: {quote(value)} }}"


class _Writer:
    def __init__(self, config: PipelineConfig, layout: PipelineLayout) -> None:
        self.config = config
        self.layout = layout
        self.names = _Names()
        self.nodes: list[str] = []
        self.streams: dict[Source, str] = {}  # a data item -> the stream carrying it
        self.batch_ends: dict[str, str] = {}  # demultiplexer -> its BATCH_END stream
        self.used = self._used_items()

    def _used_items(self) -> list[Source]:
        """Every data item some node or the response reads, once, in config order."""
        used: list[Source] = []
        for links in (*(node.inputs for node in self.config.nodes), self.config.outputs):
            for _, source in links:
                if source not in used:
                    used.append(source)
        return used

    def _items_of(self, node: str) -> list[Source]:
        return [source for source in self.used if source.node == node]

    def demultiply(self, node: str, raw: dict[Source, str], count: int) -> None:
        """Split `raw` streams into the streams that carry the data items (one per branch)."""
        lines = []
        for index, (source, stream) in enumerate(raw.items()):
            item = self.names.new(stream, "item")
            lines += [f"input_stream: {quote(f'TENSOR:{index}:{stream}')}"]
            lines += [f"output_stream: {quote(f'TENSOR:{index}:{item}')}"]
            self.streams[source] = item
        end = self.batch_ends[node] = self.names.new(node, "batch_end")
        lines.append(f"output_stream: {quote(f'BATCH_END:{end}')}")
        options = (
            "[type.googleapis.com/graphrt.DemultiplexCalculatorOptions]: { "
            f"demultiply_count: {count} }}"
        )
        self.nodes.append(_node(f"{node}:demultiply", "DemultiplexCalculator", lines, options))

    def gather(self, name: str, streams: list[str], demultiplexer: str) -> list[str]:
        """Stack the branches of `demultiplexer` in `streams`; the stacked streams."""
        lines, gathered = [], []
        for index, stream in enumerate(streams):
            stacked = self.names.new(stream, "gathered")
            lines += [f"input_stream: {quote(f'TENSOR:{index}:{stream}')}"]
            lines += [f"output_stream: {quote(f'TENSOR:{index}:{stacked}')}"]
            gathered.append(stacked)
        lines.append(f"input_stream: {quote('BATCH_END:' + self.batch_ends[demultiplexer])}")
        self.nodes.append(_node(name, "GatherCalculator", lines))
        return gathered

    def request(self) -> dict[str, str]:
        items = self._items_of(REQUEST)
        inputs = {source.data_item: self.names.new(source.data_item) for source in items}
        raw = {source: inputs[source.data_item] for source in items}
        if self.config.demultiply_count is not None and raw:
            self.demultiply(REQUEST, raw, self.config.demultiply_count)
        else:
            self.streams.update(raw)
        return inputs

    def model_node(self, node: PipelineNode) -> None:
        session = self.names.new(node.name, "session")
        version = "" if node.version is None else f" servable_version: {quote(str(node.version))}"
        self.nodes.append(
            _node(
                f"{node.name}:session",
                "OpenVINOModelServerSessionCalculator",
                [f"output_side_packet: {quote('SESSION:' + session)}"],
                "[type.googleapis.com/mediapipe.OpenVINOModelServerSessionCalculatorOptions]: "
                f"{{ servable_name: {quote(node.model_name)}{version} }}",
            )
        )
        streams = [self.streams[source] for _, source in node.inputs]
        if node.gather_from_node is not None:
            streams = self.gather(f"{node.name}:gather", streams, node.gather_from_node)
        lines = [f"input_side_packet: {quote('SESSION:' + session)}"]
        maps = []
        for index, ((model_input, _), stream) in enumerate(zip(node.inputs, streams, strict=True)):
            lines.append(f"input_stream: {quote(f'INPUT_{index}:{stream}')}")
            maps.append(_map_entry("tag_to_input_tensor_names", f"INPUT_{index}", model_input))
        raw = {}
        for index, source in enumerate(self._items_of(node.name)):
            stream = raw[source] = self.names.new(node.name, source.data_item)
            lines.append(f"output_stream: {quote(f'OUTPUT_{index}:{stream}')}")
            model_output = node.output(source.data_item)
            assert model_output is not None
            maps.append(_map_entry("tag_to_output_tensor_names", f"OUTPUT_{index}", model_output))
        if self.layout.run_levels[node.name]:
            lines.append(f"max_in_flight: {BRANCHES_IN_FLIGHT}")
        options = (
            "[type.googleapis.com/mediapipe.OpenVINOInferenceCalculatorOptions]: {\n      "
            + "\n      ".join(maps)
            + "\n    }"
        )
        self.nodes.append(_node(node.name, "OpenVINOInferenceCalculator", lines, options))
        if node.demultiply_count is not None:
            self.demultiply(node.name, raw, node.demultiply_count)
        else:
            self.streams.update(raw)

    def response(self) -> dict[str, str]:
        sources = [source for _, source in self.config.outputs]
        streams = list(dict.fromkeys(self.streams[source] for source in sources))
        for demultiplexer in reversed(self.layout.response_level):
            streams = self.gather(f"{RESPONSE}:gather:{demultiplexer}", streams, demultiplexer)
        final = dict(zip(dict.fromkeys(self.streams[s] for s in sources), streams, strict=True))
        return {name: final[self.streams[source]] for name, source in self.config.outputs}


def pipeline_graph(config: PipelineConfig, layout: PipelineLayout, origin: str) -> PipelineGraph:
    """The pipeline's graph (module docstring); `origin` names the config file in its header."""
    writer = _Writer(config, layout)
    inputs = writer.request()
    for name in layout.order:
        node = config.node(name)
        assert node is not None
        writer.model_node(node)
    outputs = writer.response()
    header = [f"# Pipeline {config.name} of {origin}, as graphrt runs it"]
    header += [f"input_stream: {quote(stream)}" for stream in inputs.values()]
    header += [f"output_stream: {quote(stream)}" for stream in dict.fromkeys(outputs.values())]
    text = "\n".join(header) + "\n" + "".join(writer.nodes)
    return PipelineGraph(text, inputs, outputs)
