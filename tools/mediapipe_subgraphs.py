"""MediaPipe's subgraphs that are C++ code rather than .pbtxt files, written as Python subgraphs.

MediaPipe's module graphs use two of them. They let graphrt expand those graphs exactly as
MediaPipe does (tools/compare_mediapipe_expansion.py checks it), and show how a Python subgraph
builds its config from the node that uses it:

    graphrt graph expand mediapipe/modules/hand_landmark/hand_landmark_tracking_cpu.pbtxt \\
        --python_path tools --import mediapipe_subgraphs --subgraph_path mediapipe/modules/...

graphrt has none of the calculators these expand to; they are for reading MediaPipe's graphs.
"""

from __future__ import annotations

from typing import Any

from graphruntime import register_subgraph
from graphruntime.config import GraphConfig
from graphruntime.options_text import TextField, TextMessage, entry_message, entry_message_type
from graphruntime.subgraphs import SubgraphContext
from graphruntime.tags import parse_tag_index_name

PORT_FIELDS = ("input_stream", "output_stream", "input_side_packet", "output_side_packet")


@register_subgraph(name="InferenceCalculator")
def inference_calculator(context: SubgraphContext) -> GraphConfig:
    """MediaPipe's InferenceCalculator picks its implementation; a CPU build runs this one."""
    return context.single_node_graph("InferenceCalculatorCpu")


TagIndex = tuple[str, int]
SWITCH_OPTIONS = "mediapipe.SwitchContainerOptions"


def _tags(specs: list[str]) -> dict[TagIndex, str]:
    """MediaPipe's ParseTags: (tag, index) → name, names made unique with _2, _3..."""
    result: dict[TagIndex, str] = {}
    used: set[str] = set()
    untagged = -1
    for spec in specs:
        port = parse_tag_index_name(spec)
        name, suffix = port.name, 2
        while name in used:
            name, suffix = f"{port.name}_{suffix}", suffix + 1
        used.add(name)
        index = port.index
        if index == -1:
            untagged += 1
            index = untagged
        result.setdefault((port.tag, index), name)
    return dict(sorted(result.items()))


def _stream(tag: str, index: int, name: str) -> str:
    """MediaPipe's CatStream: an untagged stream or index 0 loses its index."""
    if not tag:
        return name
    return f"{tag}:{index}:{name}" if index > 0 else f"{tag}:{name}"


def _without(specs: Any, *tags: str) -> list[str]:
    return [s for s in specs if parse_tag_index_name(s).tag not in tags or ":" not in s]


def _lines(field: str, specs: list[str], indent: str = "  ") -> str:
    return "".join(f'{indent}{field}: "{spec}"\n' for spec in specs)


@register_subgraph(name="SwitchContainer")
def switch_container(context: SubgraphContext) -> str:
    """MediaPipe's C++ SwitchContainer subgraph (framework/tool/switch_container.cc), as text."""
    node = context.node
    entries = context.config.option_entries("node", 0)
    options_text, contained, tick, async_selection = "", [], [], False
    for entry in entries:
        message = entry_message(entry)
        if entry_message_type(entry) == SWITCH_OPTIONS:
            contained = [v for v in message.values("contained_node") if isinstance(v, TextMessage)]
            tick = [str(v).strip('"') for v in message.values("tick_input_stream")]
            async_selection = message.values("async_selection")[-1:] == ["true"]
            message = TextMessage([f for f in message.fields if f.name != "contained_node"])
        if entry.kind == "extension":
            block = TextMessage([TextField(f"[{entry.type_name}]", message)])
            options_text += "  options {\n" + block.to_text(2) + "  }\n"
        else:
            block = TextMessage([TextField(f"[type.googleapis.com/{entry.type_name}]", message)])
            options_text += "  node_options {\n" + block.to_text(2) + "  }\n"
    inputs = _tags(_without(node.input_stream, "ENABLE", "SELECT"))
    outputs = _tags(list(node.output_stream))
    side_inputs = _tags(_without(node.input_side_packet, "ENABLE", "SELECT"))
    side_outputs = _tags(list(node.output_side_packet))
    selectors = {p.tag for p in map(parse_tag_index_name, node.input_stream)}
    graph = {"input_stream": ["SELECT:gate_select", "ENABLE:gate_enable"]}
    graph["input_side_packet"] = ["SELECT:gate_select", "ENABLE:gate_enable"]
    text, timed = "", {"SELECT": "SELECT:gate_select", "ENABLE": "ENABLE:gate_enable"}
    ticks = [
        _stream("TICK", i, name)
        for i, name in enumerate(n for (t, _), n in inputs.items() if not tick or t in tick)
    ]
    for tag in ("SELECT", "ENABLE"):
        if tag in selectors:
            gate = f"gate_{tag.lower()}"
            default = '{ input_stream_handler: "DefaultInputStreamHandler" }'
            handler = "" if async_selection else f"  input_stream_handler {default}\n"
            text += (
                'node {\n  calculator: "PacketSequencerCalculator"\n'
                + _lines("input_stream", [f"INPUT:{gate}", *ticks])
                + f'  output_stream: "OUTPUT:{gate}_timed"\n{handler}}}\n'
            )
            timed[tag] = f"{tag}:{gate}_timed"
    gates = [timed["SELECT"], timed["ENABLE"]]
    gate_sides = ["SELECT:gate_select", "ENABLE:gate_enable"]
    demux_in = [*gates, *(_stream(t, i, n) for (t, i), n in inputs.items())]
    demux_side_in = [*gate_sides, *(_stream(t, i, n) for (t, i), n in side_inputs.items())]
    mux_out = [_stream(t, i, n) for (t, i), n in outputs.items()]
    mux_side_out = [_stream(t, i, n) for (t, i), n in side_outputs.items()]
    demux_out: list[str] = []
    demux_side_out: list[str] = []
    mux_in, mux_side_in = list(gates), list(gate_sides)
    channels = ""
    wiring = (  # the container's ports, the contained node's field, the switch's ports
        (inputs, "input_stream", demux_out),
        (outputs, "output_stream", mux_in),
        (side_inputs, "input_side_packet", demux_side_out),
        (side_outputs, "output_side_packet", mux_side_in),
    )
    for channel, inner in enumerate(contained):
        ports: dict[str, list[str]] = {f: [] for f in PORT_FIELDS}
        for tags, field, switch_ports in wiring:
            for (tag, index), name in tags.items():
                named = f"c{channel}__{name}"
                switch_ports.append(_stream(f"C{channel}__{tag}", index, named))
                ports[field].append(_stream(tag, index, named))
        channels += (
            "node {\n"
            + inner.to_text(1)
            + "".join(_lines(field, specs) for field, specs in ports.items())
            + "}\n"
        )
    text += (
        'node {\n  calculator: "SwitchDemuxCalculator"\n'
        + _lines("input_stream", demux_in)
        + _lines("output_stream", demux_out)
        + _lines("input_side_packet", demux_side_in)
        + _lines("output_side_packet", demux_side_out)
        + options_text
        + "}\n"
    )
    text += (
        'node {\n  calculator: "SwitchMuxCalculator"\n'
        + _lines("input_stream", mux_in)
        + _lines("output_stream", mux_out)
        + _lines("input_side_packet", mux_side_in)
        + _lines("output_side_packet", mux_side_out)
        + options_text
        + "}\n"
    )
    declared = (
        _lines("input_stream", [*graph["input_stream"], *demux_in[2:]], "")
        + _lines("output_stream", mux_out, "")
        + _lines("input_side_packet", [*graph["input_side_packet"], *demux_side_in[2:]], "")
        + _lines("output_side_packet", mux_side_out, "")
    )
    return declared + text + channels
