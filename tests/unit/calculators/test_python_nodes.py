"""OVMS's Python nodes in a graph: PythonExecutorCalculator's modes and rules, the handler's
life (load, initialize, finalize, errors) and PyTensorOvTensorConverterCalculator."""

from __future__ import annotations

import logging
import struct
import textwrap
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphrt.error_map import root_cause
from graphruntime import Graph, GraphRunError, GraphValidationError, Packet, ValidatedGraph
from graphruntime.resources import GraphResources
from servables.errors import InvalidRequest, ServableError, ServableLoadError
from servables.python_model.handler import PythonNodeError
from servables.python_model.tensor import Tensor

Outputs = dict[str, list[tuple[Any, int]]]


def node(name: str, script: str, streams: str, extra: str = "") -> str:
    """A Python node of `script` (beside the graph) with `streams` (input/output lines)."""
    return f"""
    node {{
      name: "{name}"
      calculator: "PythonExecutorCalculator"
      input_side_packet: "PYTHON_NODE_RESOURCES:py"
      {streams}
      {extra}
      node_options: {{
        [type.googleapis.com / mediapipe.PythonExecutorCalculatorOptions]: {{
          handler_path: "{script}"
        }}
      }}
    }}"""


class PythonGraph:
    """A graph file and its scripts in a folder; `load` builds its resources as the server does."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.resources: GraphResources | None = None

    def script(self, name: str, text: str) -> None:
        (self.folder / name).write_text(textwrap.dedent(text))

    async def load(self, text: str) -> ValidatedGraph:
        path = self.folder / "graph.pbtxt"
        path.write_text(text)
        graph = ValidatedGraph.from_file(path)
        self.resources = GraphResources(graph, "test_graph")
        await self.resources.start()
        return graph

    async def run(
        self,
        text: str,
        feeds: Sequence[tuple[str, Any, int]],
        outputs: Sequence[str],
    ) -> Outputs:
        graph = Graph(await self.load(text))
        got: Outputs = {name: [] for name in outputs}
        for name in outputs:
            graph.observe_output_stream(
                name, lambda n, p: got[n].append((p.payload, int(p.timestamp)))
            )
        assert self.resources is not None
        await graph.start_run(self.resources.side_packets)
        try:
            for stream, payload, timestamp in feeds:
                await graph.add_packet(stream, Packet(payload, timestamp))
            graph.close_all_packet_sources()
            await graph.wait_until_done()
        finally:
            if graph.running:
                graph.cancel()
        return got

    async def failure(
        self,
        text: str,
        feeds: Sequence[tuple[str, Any, int]],
        kind: type[ServableError] = PythonNodeError,
    ) -> str:
        """The message a request gets when the run fails (the error the server maps)."""
        with pytest.raises(GraphRunError) as caught:
            await self.run(text, feeds, [])
        cause = root_cause(caught.value)
        assert isinstance(cause, kind), caught.value
        return cause.message


@pytest.fixture
async def pygraph(tmp_path: Path) -> AsyncIterator[PythonGraph]:
    graph = PythonGraph(tmp_path)
    yield graph
    if graph.resources is not None:
        await graph.resources.stop()


def f32(value: float, name: str = "in") -> Tensor:
    return Tensor(name, struct.pack("f", value), shape=(), datatype="FP32")


ECHO_NAMES = """
from pyovms import Tensor

class OvmsPythonModel:
    def initialize(self, kwargs):
        self.kwargs = kwargs

    def execute(self, inputs):
        names = ",".join(t.name for t in inputs).encode()
        kwargs = repr(sorted(self.kwargs.items())).encode()
        return [Tensor("names", names), Tensor("kwargs", kwargs)]
"""


async def test_inputs_arrive_sorted_by_tag_and_outputs_keep_the_timestamp(
    pygraph: PythonGraph,
) -> None:
    pygraph.script("echo.py", ECHO_NAMES)
    text = """
    input_stream: "OVMS_PY_TENSOR_B:b"
    input_stream: "OVMS_PY_TENSOR_A:a"
    input_stream: "OVMS_PY_TENSOR_C:c"
    output_stream: "OVMS_PY_TENSOR:names"
    output_stream: "OVMS_PY_TENSOR1:kwargs"
    """ + node(
        "echo",
        "echo.py",
        'input_stream: "B:b" input_stream: "A:a" input_stream: "C:c" '
        'output_stream: "NAMES:names" output_stream: "KWARGS:kwargs"',
    )
    feeds = [(name, f32(1.0, name), 7) for name in ("b", "c", "a")]
    got = await pygraph.run(text, feeds, ["names", "kwargs"])
    [(names, timestamp)] = got["names"]
    assert (bytes(names), timestamp) == (b"a,b,c", 7)
    kwargs = eval(bytes(got["kwargs"][0][0]).decode())  # the repr of a sorted list of items
    assert kwargs == [
        ("base_path", str(pygraph.folder)),
        ("input_names", ["b", "a", "c"]),  # the file's order, as OVMS passes them
        ("node_name", "echo"),
        ("output_names", ["names", "kwargs"]),
    ]


GENERATOR = """
from pyovms import Tensor

class OvmsPythonModel:
    def execute(self, inputs):
        text = bytes(inputs[0]).decode()
        for i in range(len(text)):
            yield [Tensor("out", (text[:i] + text[i].upper() + text[i + 1:]).encode())]
"""

GENERATIVE_STREAMS = """
      input_stream: "INPUT:in"
      input_stream: "LOOPBACK:loopback"
      input_stream_info: { tag_index: "LOOPBACK:0" back_edge: true }
      output_stream: "OUTPUT:out"
      output_stream: "LOOPBACK:loopback"
"""


async def test_a_generator_emits_one_set_per_cycle_at_rising_timestamps(
    pygraph: PythonGraph,
) -> None:
    """No input stream handler named: a LOOPBACK node gets OVMS's SyncSet sets anyway."""
    pygraph.script("gen.py", GENERATOR)
    text = """
    input_stream: "OVMS_PY_TENSOR:in"
    output_stream: "OVMS_PY_TENSOR:out"
    """ + node("gen", "gen.py", GENERATIVE_STREAMS)
    got = await pygraph.run(text, [("in", Tensor("in", b"abc"), 10)], ["out"])
    assert [(bytes(t), ts) for t, ts in got["out"]] == [(b"Abc", 10), (b"aBc", 11), (b"abC", 12)]


async def test_new_data_while_generating_fails_the_run(pygraph: PythonGraph) -> None:
    pygraph.script("gen.py", GENERATOR)
    text = """
    input_stream: "OVMS_PY_TENSOR:in"
    output_stream: "OVMS_PY_TENSOR:out"
    """ + node("gen", "gen.py", GENERATIVE_STREAMS)
    feeds = [("in", Tensor("in", b"a long text"), 0), ("in", Tensor("in", b"x"), 1)]
    message = await pygraph.failure(text, feeds, InvalidRequest)  # 400, INVALID_ARGUMENT
    assert "already generating" in message


async def test_incomplete_inputs_with_the_immediate_handler(pygraph: PythonGraph) -> None:
    pygraph.script(
        "labels.py",
        """
        from pyovms import Tensor

        class OvmsPythonModel:
            def initialize(self, kwargs):
                self.labels = b""

            def execute(self, inputs):
                for tensor in inputs:
                    if tensor.name == "labels":
                        self.labels = bytes(tensor)
                    else:
                        return [Tensor("result", self.labels + b":" + bytes(tensor))]
                return []
        """,
    )
    text = """
    input_stream: "OVMS_PY_TENSOR_LABELS:labels"
    input_stream: "OVMS_PY_TENSOR_IMAGE:image"
    output_stream: "OVMS_PY_TENSOR:result"
    """ + node(
        "labeler",
        "labels.py",
        'input_stream: "INPUT1:labels" input_stream: "INPUT2:image" output_stream: "OUTPUT:result"',
        'input_stream_handler { input_stream_handler: "ImmediateInputStreamHandler" }',
    )
    feeds = [
        ("labels", Tensor("labels", b"cat"), 0),
        ("image", Tensor("image", b"img1"), 1),
        ("image", Tensor("image", b"img2"), 2),
    ]
    got = await pygraph.run(text, feeds, ["result"])
    assert [(bytes(t), ts) for t, ts in got["result"]] == [(b"cat:img1", 1), (b"cat:img2", 2)]


async def test_chained_nodes_each_have_their_own_instance(pygraph: PythonGraph) -> None:
    pygraph.script(
        "counter.py",
        """
        import numpy as np
        from pyovms import Tensor

        class OvmsPythonModel:
            def initialize(self, kwargs):
                self.output = kwargs["output_names"][0]
                self.calls = 0

            def execute(self, inputs):
                self.calls += 1
                return [Tensor(self.output, np.array(inputs[0]) + self.calls)]
        """,
    )
    text = (
        """
    input_stream: "OVMS_PY_TENSOR:first"
    output_stream: "OVMS_PY_TENSOR:third"
    """
        + node("one", "counter.py", 'input_stream: "first" output_stream: "second"')
        + node("two", "counter.py", 'input_stream: "second" output_stream: "third"')
    )
    values = Tensor("first", np.zeros(2, np.float32))
    got = await pygraph.run(text, [("first", values, 0), ("first", values, 1)], ["third"])
    # each node counts its own calls: 1+1 for the first packet, 2+2 for the second
    assert [np.array(t).tolist() for t, _ in got["third"]] == [[2.0, 2.0], [4.0, 4.0]]
    assert got["third"][0][0].datatype == "FP32"


BAD_EXECUTE = {
    "raise ValueError('bad input')": "execute raised ValueError: bad input (bad.py, line 6",
    "return 1": "execute returned int; it must return a list of pyovms.Tensor",
    "return [3]": "execute returned a list holding int at position 0",
    "return [Tensor('nope', b'x')]": "execute returned a tensor named 'nope', which is not an "
    "output stream of the node (outputs: out)",
    "return [Tensor('out', b'x'), Tensor('out', b'y')]": "execute returned two tensors named 'out'",
    "yield [Tensor('out', b'x')]": "execute yielded, but the node has no LOOPBACK",
}


@pytest.mark.parametrize("body", list(BAD_EXECUTE))
async def test_a_bad_execute_fails_the_run_with_a_message(pygraph: PythonGraph, body: str) -> None:
    pygraph.script(
        "bad.py",
        f"""
        from pyovms import Tensor

        class OvmsPythonModel:
            def execute(self, inputs):
                {body}
        """,
    )
    text = """
    input_stream: "OVMS_PY_TENSOR:in"
    output_stream: "OVMS_PY_TENSOR:out"
    """ + node("bad", "bad.py", 'input_stream: "in" output_stream: "out"')
    message = await pygraph.failure(text, [("in", f32(1.0), 0)])
    assert message.startswith(f'Python node "bad" ({pygraph.folder / "bad.py"}): ')
    assert BAD_EXECUTE[body] in message


async def test_a_python_node_needs_pyovms_tensors(pygraph: PythonGraph) -> None:
    pygraph.script("echo.py", ECHO_NAMES)
    text = """
    input_stream: "in"
    output_stream: "OVMS_PY_TENSOR:names"
    """ + node("echo", "echo.py", 'input_stream: "in" output_stream: "names" output_stream: "K:k"')
    message = await pygraph.failure(text, [("in", np.zeros(2), 0)])
    assert "input stream in carries a ndarray, not a pyovms.Tensor" in message
    assert "OVMS_PY_TENSOR" in message


LOAD_FAILURES = {
    "import no_such_module_here\n": [
        "failed to load:",
        'broken.py", line 1, in <module>',
        "ModuleNotFoundError: No module named 'no_such_module_here'",
    ],
    "class OvmsPythonModel:\n    def execute(self, inputs):\n        return [\n": [
        "failed to load:",
        "SyntaxError",
    ],
    "def f(): pass\n": ["the script defines no class OvmsPythonModel"],
    "class OvmsPythonModel:\n    pass\n": ["OvmsPythonModel does not implement execute"],
    (
        "class OvmsPythonModel:\n"
        "    def initialize(self, kwargs):\n"
        "        raise RuntimeError('no weights')\n"
        "    def execute(self, inputs):\n"
        "        return []\n"
    ): ["failed to load:", "line 3, in initialize", "RuntimeError: no weights"],
}


@pytest.mark.parametrize("script", list(LOAD_FAILURES))
async def test_a_script_that_fails_to_load_says_where(pygraph: PythonGraph, script: str) -> None:
    (pygraph.folder / "broken.py").write_text(script)
    text = node("broken", "broken.py", 'input_stream: "in" output_stream: "out"')
    with pytest.raises(ServableLoadError) as caught:
        await pygraph.load('input_stream: "OVMS_PY_TENSOR:in"\n' + text)
    message = caught.value.message
    assert message.startswith(f'Python node "broken" ({pygraph.folder / "broken.py"})')
    for part in LOAD_FAILURES[script]:
        assert part in message
    assert "importlib" not in message and "handler.py" not in message  # the user's frames only


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        (
            node("", "echo.py", 'input_stream: "in" output_stream: "out"'),
            "A PythonExecutorCalculator node of graph test_graph has no name",
        ),
        (
            node("twin", "echo.py", 'input_stream: "in" output_stream: "a"')
            + node("twin", "echo.py", 'input_stream: "in" output_stream: "b"'),
            'Python node name "twin" is used by more than one node',
        ),
        (
            node("lost", "missing.py", 'input_stream: "in" output_stream: "out"'),
            "handler_path does not exist",
        ),
        (
            node("empty", "", 'input_stream: "in" output_stream: "out"'),
            "needs PythonExecutorCalculatorOptions with a handler_path",
        ),
    ],
)
async def test_node_rules_checked_at_load(pygraph: PythonGraph, nodes: str, message: str) -> None:
    pygraph.script("echo.py", ECHO_NAMES)
    with pytest.raises(ServableLoadError, match=message):
        await pygraph.load('input_stream: "OVMS_PY_TENSOR:in"\n' + nodes)


def test_loopback_must_be_on_both_sides() -> None:
    text = """
    input_stream: "in"
    node {
      name: "half"
      calculator: "PythonExecutorCalculator"
      input_side_packet: "PYTHON_NODE_RESOURCES:py"
      input_stream: "in"
      input_stream: "LOOPBACK:loop"
      output_stream: "out"
    }
    """
    with pytest.raises(GraphValidationError, match="must be defined on both input and output"):
        ValidatedGraph.from_config(text)


async def test_finalize_runs_at_unload_and_its_errors_are_only_logged(
    pygraph: PythonGraph, caplog: pytest.LogCaptureFixture
) -> None:
    marker = pygraph.folder / "finalized"
    pygraph.script(
        "fin.py",
        f"""
        from pathlib import Path

        class OvmsPythonModel:
            def initialize(self, kwargs):
                self.name = kwargs["node_name"]

            def execute(self, inputs):
                return []

            def finalize(self):
                Path({str(marker)!r}).write_text(self.name)
                raise RuntimeError("cleanup failed")
        """,
    )
    await pygraph.load(
        'input_stream: "OVMS_PY_TENSOR:in"\n'
        + node("fin", "fin.py", 'input_stream: "in" output_stream: "out"')
    )
    assert not marker.exists()
    assert pygraph.resources is not None
    with caplog.at_level(logging.ERROR):
        await pygraph.resources.stop()
    pygraph.resources = None
    assert marker.read_text() == "fin"
    assert "finalize raised" in caplog.text and "cleanup failed" in caplog.text


# ------------------------------------------------------------ PyTensorOvTensorConverterCalculator

CONVERTERS = """
input_stream: "OVMS_PY_TENSOR:in"
output_stream: "OVMS_PY_TENSOR:back"
node {
  calculator: "PyTensorOvTensorConverterCalculator"
  input_stream: "OVMS_PY_TENSOR:in"
  output_stream: "OVTENSOR:ov"
}
node {
  calculator: "PyTensorOvTensorConverterCalculator"
  input_stream: "OVTENSOR:ov"
  output_stream: "OVMS_PY_TENSOR:back"
  node_options: {
    [type.googleapis.com / mediapipe.PyTensorOvTensorConverterCalculatorOptions]: {
      tag_to_output_tensor_names { key: "OVMS_PY_TENSOR" value: "renamed" }
    }
  }
}
"""


async def run_converters(tensor: Tensor) -> Tensor:
    graph = Graph(CONVERTERS)
    poller = graph.poll_output_stream("back")
    await graph.start_run({})
    await graph.add_packet("in", Packet(tensor, 3))
    graph.close_all_packet_sources()
    [packet] = [p async for p in poller]
    await graph.wait_until_done()
    assert int(packet.timestamp) == 3
    result: Tensor = packet.payload
    return result


async def test_converters_round_trip_a_python_tensor_through_openvino() -> None:
    values = np.arange(6, dtype=np.int64).reshape(2, 3)
    back = await run_converters(Tensor("in", values))
    assert (back.name, back.datatype, back.shape) == ("renamed", "INT64", (2, 3))
    np.testing.assert_array_equal(np.array(back), values)
    raw = struct.pack("4f", 1, 2, 3, 4)  # a flat buffer the datatype and shape describe
    back = await run_converters(Tensor("in", raw, shape=(2, 2), datatype="FP32"))
    assert np.array(back).tolist() == [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (Tensor("in", b"abc", datatype="BYTES"), "datatype 'BYTES', which has no OpenVINO"),
        (Tensor("in", b"abcdef", shape=(2,), datatype="FP32"), "holds 6 bytes, but an OpenVINO"),
    ],
)
async def test_converter_refuses_what_openvino_cannot_hold(tensor: Tensor, message: str) -> None:
    with pytest.raises(GraphRunError, match=message):
        await run_converters(tensor)


@pytest.mark.parametrize(
    ("streams", "message"),
    [
        ('input_stream: "OVTENSOR:a" output_stream: "OVTENSOR:b"', "one stream must have each"),
        (
            'input_stream: "OVTENSOR:a" output_stream: "OVMS_PY_TENSOR:b"',
            "needs the name of the Python tensor",
        ),
        (
            'input_stream: "OVMS_PY_TENSOR:a" input_stream: "OVMS_PY_TENSOR:c" '
            'output_stream: "OVTENSOR:b"',
            "exactly one input stream and one output stream",
        ),
    ],
)
def test_converter_contract(streams: str, message: str) -> None:
    text = f"""
    input_stream: "a"
    input_stream: "c"
    node {{ calculator: "PyTensorOvTensorConverterCalculator" {streams} }}
    """
    with pytest.raises(GraphValidationError, match=message):
        ValidatedGraph.from_config(text)
