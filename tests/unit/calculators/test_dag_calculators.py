"""DemultiplexCalculator and GatherCalculator: OVMS's branches as MediaPipe loops in a graph.

A branch node that takes a random time per call, with several calls in flight, shows that the
gathered result is in branch order whatever order the branches finish in; nested levels and
OVMS's run-time refusals (dimensions, counts, no results, shards of different shapes) are
checked through real graph runs.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
import pytest

from graphruntime import (
    Calculator,
    CalculatorContext,
    CalculatorContract,
    Graph,
    GraphRunError,
    Packet,
    register_calculator,
)
from servables.errors import InvalidRequest


@register_calculator
class DagTestSlowDouble(Calculator):
    """Doubles its input after a random delay (branches finish out of order)."""

    blocking = False

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare_all()
        cc.outputs.declare_all()
        cc.set_timestamp_offset(0)

    async def process(self, cc: CalculatorContext) -> None:
        await asyncio.sleep(random.random() * 0.005)
        cc.outputs[0].add(np.asarray(cc.inputs[0].payload) * 2)


def demultiply(node: str, inputs: list[str], outputs: list[str], count: int = -1) -> str:
    ports = "".join(
        f'input_stream: "TENSOR:{i}:{a}" output_stream: "TENSOR:{i}:{b}" '
        for i, (a, b) in enumerate(zip(inputs, outputs, strict=True))
    )
    return f"""
    node {{
      name: "{node}:demultiply" calculator: "DemultiplexCalculator"
      {ports} output_stream: "BATCH_END:{node}_end"
      node_options: {{
        [type.googleapis.com/graphrt.DemultiplexCalculatorOptions]: {{ demultiply_count: {count} }}
      }}
    }}"""


def gather(node: str, source: str, inputs: list[str], outputs: list[str]) -> str:
    ports = "".join(
        f'input_stream: "TENSOR:{i}:{a}" output_stream: "TENSOR:{i}:{b}" '
        for i, (a, b) in enumerate(zip(inputs, outputs, strict=True))
    )
    return f"""
    node {{
      name: "{node}:gather" calculator: "GatherCalculator"
      {ports} input_stream: "BATCH_END:{source}_end"
    }}"""


async def run(text: str, inputs: dict[str, Any], outputs: list[str]) -> dict[str, Packet[Any]]:
    graph = Graph(text)
    got: dict[str, Packet[Any]] = {}
    for name in outputs:
        graph.observe_output_stream(name, lambda n, p: got.setdefault(n, p))
    await graph.start_run({})
    for stream, payload in inputs.items():
        await graph.add_packet(stream, Packet(payload, 7))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    return got


def header(inputs: list[str], outputs: list[str]) -> str:
    return "".join(f'input_stream: "{n}"\n' for n in inputs) + "".join(
        f'output_stream: "{n}"\n' for n in outputs
    )


SLOW = (
    'node { calculator: "DagTestSlowDouble" input_stream: "%s" output_stream: "%s" '
    "max_in_flight: 8 }"
)


async def test_branches_run_per_slice_and_gather_in_order() -> None:
    x = np.arange(5 * 1 * 2 * 3, dtype=np.float32).reshape(5, 1, 2, 3)
    text = (
        header(["x"], ["out"])
        + demultiply("a", ["x"], ["xi"], count=5)
        + SLOW % ("xi", "yi")
        + gather("out", "a", ["yi"], ["out"])
    )
    got = await run(text, {"x": x}, ["out"])
    np.testing.assert_array_equal(got["out"].payload, x * 2)
    assert int(got["out"].timestamp) == 7  # the request's timestamp again


async def test_nested_levels_gather_innermost_first_and_split_several_tensors() -> None:
    x = np.random.default_rng(0).standard_normal((3, 4, 1, 2)).astype(np.float32)
    z = np.arange(3 * 2 * 2, dtype=np.int64).reshape(3, 2, 2)
    text = (
        header(["x", "z"], ["x_out", "z_out"])
        + demultiply("a", ["x", "z"], ["xa", "za"])
        + demultiply("b", ["xa"], ["xb"])
        + SLOW % ("xb", "yb")
        + gather("inner", "b", ["yb"], ["ya"])
        + gather("outer", "a", ["ya", "za"], ["x_out", "z_out"])
    )
    got = await run(text, {"x": x, "z": z}, ["x_out", "z_out"])
    np.testing.assert_array_equal(got["x_out"].payload, x * 2)
    np.testing.assert_array_equal(got["z_out"].payload, z)


@pytest.mark.parametrize(
    ("shape", "count", "message"),
    [
        ((4, 3), -1, "wrong number of dimensions 2 of a tensor to demultiply"),
        ((4, 1, 3), 3, "wrong dim[0] size 4"),
        ((0, 1, 3), -1, "produced no results to demultiply"),
        ((10_001, 1, 1), -1, "too large dim[0] size 10001"),
    ],
)
async def test_demultiplexer_refuses_what_ovms_refuses(
    shape: tuple[int, ...], count: int, message: str
) -> None:
    text = (
        header(["x"], ["out"])
        + demultiply("split", ["x"], ["xi"], count=count)
        + gather("out", "split", ["xi"], ["out"])
    )
    with pytest.raises(GraphRunError) as info:
        await run(text, {"x": np.zeros(shape, np.float32)}, ["out"])
    cause = info.value.errors[0].cause
    assert isinstance(cause, InvalidRequest)
    assert cause.message.startswith("Node split: ") or "node split" in cause.message
    assert message in cause.message


async def test_tensors_split_together_must_share_their_first_dimension() -> None:
    text = (
        header(["x", "z"], ["out"])
        + demultiply("split", ["x", "z"], ["xi", "zi"])
        + gather("out", "split", ["xi"], ["out"])
    )
    with pytest.raises(GraphRunError, match="differ in their first dimension"):
        await run(text, {"x": np.zeros((2, 1, 1)), "z": np.zeros((3, 1, 1))}, ["out"])


@register_calculator
class DagTestRagged(Calculator):
    """Makes each branch's tensor a different length (shards that cannot be stacked)."""

    blocking = False

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare_all()
        cc.outputs.declare_all()

    def process(self, cc: CalculatorContext) -> None:
        cc.outputs[0].add(np.zeros(int(cc.input_timestamp) + 1))


async def test_gathered_shards_of_different_shapes_are_an_error_naming_the_node() -> None:
    text = (
        header(["x"], ["out"])
        + demultiply("split", ["x"], ["xi"])
        + 'node { calculator: "DagTestRagged" input_stream: "xi" output_stream: "ragged" }'
        + gather("collect", "split", ["ragged"], ["out"])
    )
    with pytest.raises(GraphRunError) as info:
        await run(text, {"x": np.zeros((2, 1, 1))}, ["out"])
    cause = info.value.errors[0].cause
    assert isinstance(cause, InvalidRequest)
    assert (
        cause.message == "Node collect: gathered tensor shards dimensions are different: [1], [2]"
    )


async def test_string_tensors_are_not_demultiplied() -> None:
    text = (
        header(["x"], ["out"])
        + demultiply("split", ["x"], ["xi"])
        + gather("out", "split", ["xi"], ["out"])
    )
    strings = np.array([[[b"a"]], [[b"b"]]], dtype=object)
    with pytest.raises(GraphRunError, match="not supported for string precision"):
        await run(text, {"x": strings}, ["out"])
