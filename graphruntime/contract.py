"""What a calculator promises about its ports, checked against the node config before anything runs.

`Calculator.get_contract(cc)` receives a `CalculatorContract` describing the ports the node config
lists and declares which of them the calculator uses, with payload types. The validator then
reports ports the config has but the calculator did not declare, and declared ports the config
lacks, in MediaPipe's words. The contract also carries the calculator's scheduling preferences
(input stream handler, timestamp offset, processing of timestamp bounds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.message import Message

from graphruntime.services import GraphService
from graphruntime.tags import TagMap

M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class PortDeclaration:
    type: Any
    optional: bool


class PortCollection:
    """The ports of one kind (e.g. input streams) of a node: configured ones and declared ones."""

    def __init__(self, kind: str, tag_map: TagMap) -> None:
        self.kind = kind
        self.tag_map = tag_map
        self._declared: dict[tuple[str, int], PortDeclaration] = {}

    def __len__(self) -> int:
        return len(self.tag_map)

    def tags(self) -> tuple[str, ...]:
        return self.tag_map.tags()

    def has_tag(self, tag: str) -> bool:
        return self.tag_map.has_tag(tag)

    def count(self, tag: str) -> int:
        return self.tag_map.count(tag)

    def declare(
        self, tag: str, payload_type: Any = object, *, index: int = 0, optional: bool = False
    ) -> None:
        """The calculator uses TAG:INDEX with payloads of `payload_type`."""
        self._declared[(tag, index)] = PortDeclaration(payload_type, optional)

    def declare_all(self, payload_type: Any = object, *, tag: str | None = None) -> None:
        """Declare every configured port (of `tag` only, when given): for pass-through shapes."""
        for port_tag, index, _ in self.tag_map.items():
            if tag is None or port_tag == tag:
                self.declare(port_tag, payload_type, index=index, optional=True)

    def declared_type(self, flat_id: int) -> Any:
        declaration = self._declared.get(self.tag_map.tag_index(flat_id))
        return declaration.type if declaration else object

    def is_optional(self, flat_id: int) -> bool:
        declaration = self._declared.get(self.tag_map.tag_index(flat_id))
        return declaration is not None and declaration.optional

    def problems(self) -> list[str]:
        """Mismatches of config and declarations, in MediaPipe's ValidatePacketTypeSet words."""
        found: list[str] = []
        for (tag, index), declaration in self._declared.items():
            if not declaration.optional and self.tag_map.find(tag, index) is None:
                found.append(f'Failed to get tag "{tag}" index {index}')
        for tag, index, _ in self.tag_map.items():
            if (tag, index) not in self._declared:
                found.append(f'Tag "{tag}" index {index} was not expected.')
        return found


class CalculatorContract:
    """Handed to `Calculator.get_contract`; see the module docstring."""

    def __init__(
        self,
        node_name: str,
        inputs: TagMap,
        outputs: TagMap,
        input_side_packets: TagMap,
        output_side_packets: TagMap,
        options_decoder: Callable[[type[Message]], Message | None],
    ) -> None:
        self.node_name = node_name
        self.inputs = PortCollection("input streams", inputs)
        self.outputs = PortCollection("output streams", outputs)
        self.input_side_packets = PortCollection("input side packets", input_side_packets)
        self.output_side_packets = PortCollection("output side packets", output_side_packets)
        self._options_decoder = options_decoder
        self.input_stream_handler: str | None = None
        self.input_stream_handler_options: Message | None = None
        self.timestamp_offset: int | None = None
        self.process_timestamp_bounds = False
        self.services: dict[GraphService[Any], bool] = {}  # service -> required

    def options(self, message_type: type[M]) -> M | None:
        """The node's options of that type, or None when the node gives none."""
        decoded = self._options_decoder(message_type)
        assert decoded is None or isinstance(decoded, message_type)
        return decoded

    def set_input_stream_handler(self, name: str, options: Message | None = None) -> None:
        """Preferred handler; a handler named in the node or graph config still wins."""
        self.input_stream_handler = name
        self.input_stream_handler_options = options

    def use_service(self, service: GraphService[Any], *, optional: bool = False) -> None:
        """The calculator reads `service` (see graphruntime.services) during the run."""
        self.services[service] = not optional

    def set_timestamp_offset(self, offset: int) -> None:
        """Promise that outputs for input timestamp t are at t + offset or later.

        This lets the runtime advance downstream timestamp bounds without waiting for packets, so
        nodes downstream of one that skips a timestamp are not stalled.
        """
        self.timestamp_offset = offset

    def set_process_timestamp_bounds(self, enabled: bool = True) -> None:
        """Call process() also when only a timestamp bound moved (inputs then are empty)."""
        self.process_timestamp_bounds = enabled

    def problems(self) -> list[str]:
        found: list[str] = []
        for ports in (self.inputs, self.outputs, self.input_side_packets, self.output_side_packets):
            issues = ports.problems()
            if issues:
                found.append(f"For {ports.kind}: " + "; ".join(issues))
        return found
