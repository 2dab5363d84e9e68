"""Graph services: lent by the application, declared in contracts, checked at start_run."""

from __future__ import annotations

import pytest

from graphruntime import (
    Calculator,
    CalculatorContext,
    CalculatorContract,
    Graph,
    GraphService,
    GraphUsageError,
    Packet,
    register_calculator,
)

GREETER = GraphService("test_services.greeter", str)
COUNTER = GraphService("test_services.counter", list)


@register_calculator
class TestServicesGreetCalculator(Calculator):
    blocking = False

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare("")
        cc.outputs.declare("")
        cc.use_service(GREETER)
        cc.use_service(COUNTER, optional=True)

    def process(self, cc: CalculatorContext) -> None:
        if cc.has_service(COUNTER):
            cc.service(COUNTER).append(cc.input_timestamp)
        cc.outputs[0].add(f"{cc.service(GREETER)} {cc.inputs[0].payload}")


GRAPH = """
input_stream: "in"
output_stream: "out"
node {
  name: "greet" calculator: "TestServicesGreetCalculator" input_stream: "in" output_stream: "out"
}
"""


async def run(services: dict[GraphService[object], object]) -> list[str]:
    graph = Graph(GRAPH, services=services)
    out: list[str] = []
    graph.observe_output_stream("out", lambda _, packet: out.append(packet.payload))
    await graph.start_run()
    await graph.add_packet("in", Packet("world", 1))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    return out


async def test_calculator_reads_the_service_it_declared() -> None:
    counter: list[int] = []
    assert await run({GREETER: "hello", COUNTER: counter}) == ["hello world"]
    assert counter == [1]


async def test_optional_service_may_be_absent() -> None:
    assert await run({GREETER: "hi"}) == ["hi world"]


async def test_missing_required_service_fails_start_naming_the_node() -> None:
    with pytest.raises(GraphUsageError) as error:
        await run({})
    assert str(error.value) == (
        'Service "test_services.greeter" is required by node "greet" but was not provided.'
    )
