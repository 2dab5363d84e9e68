"""A `pipeline_config_list` entry of config.json, read with OVMS's schema (`src/schema.cpp`).

    {"name": "detect_classify", "inputs": ["image"], "demultiply_count": 2,   # optional
     "nodes": [{"name": "detect", "model_name": "detector", "type": "DL model",
                "version": 1, "demultiply_count": 3, "gather_from_node": "...",   # optional
                "inputs": [{"data": {"node_name": "request", "data_item": "image"}}],
                "outputs": [{"data_item": "boxes", "alias": "boxes"}]}],
     "outputs": [{"boxes": {"node_name": "detect", "data_item": "boxes"}}]}

A node input maps one of its model's inputs to a data item of another node (its output alias)
or of `request` (a pipeline input); a pipeline output maps a response name to a node's data
item. Anything the schema refuses (a missing or unknown key, a wrong type, a count outside
-1..10000) is a ValueError naming the key, which makes the whole file invalid, as in OVMS.
`demultiply_count: 0` means -1 (any), with OVMS's deprecation warning; `params` on a DL model
node (OVMS ignores them there) is a warning. Whether the nodes form a pipeline that can run is
checked later (graphrt.serving.dag.structure), per pipeline.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from servables.io.request_fields import is_integer

logger = logging.getLogger(__name__)

REQUEST = "request"  # the node whose data items are the pipeline's inputs
RESPONSE = "response"  # the node whose inputs are the pipeline's outputs
DL_MODEL = "DL model"
CUSTOM = "custom"
MAX_DEMULTIPLY = 10_000
PIPELINE_KEYS = {"name", "inputs", "nodes", "outputs", "demultiply_count"}
NODE_KEYS = {
    "name",
    "type",
    "model_name",
    "library_name",
    "version",
    "inputs",
    "outputs",
    "params",
    "demultiply_count",
    "gather_from_node",
}
LIBRARY_KEYS = {"name", "base_path"}


@dataclass(frozen=True)
class Source:
    """A data item of a node (`request` for the pipeline's inputs)."""

    node: str
    data_item: str


@dataclass(frozen=True)
class PipelineNode:
    name: str
    kind: str  # DL_MODEL or CUSTOM
    model_name: str = ""
    version: int | None = None  # None: the model's latest version
    library_name: str = ""  # a custom node's library (custom_node_library_config_list)
    inputs: tuple[tuple[str, Source], ...] = ()  # (model input, where its data comes from)
    outputs: tuple[tuple[str, str], ...] = ()  # (alias, model output)
    demultiply_count: int | None = None  # None: no demultiplexing; -1: any count
    gather_from_node: str | None = None

    def output(self, alias: str) -> str | None:
        """The model output an alias names (None if the node has no such alias)."""
        return next((item for name, item in self.outputs if name == alias), None)


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    inputs: tuple[str, ...]
    nodes: tuple[PipelineNode, ...]
    outputs: tuple[tuple[str, Source], ...]  # (response name, data item)
    demultiply_count: int | None = None  # the request node's own demultiplexing

    def node(self, name: str) -> PipelineNode | None:
        return next((node for node in self.nodes if node.name == name), None)


def _object(value: Any, where: str, allowed: set[str], required: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be an object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in {where}")
    for key in required:
        if key not in value:
            raise ValueError(f"{where}.{key} is required")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a string")
    return value


def _array(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{where} must be an array")
    return value


def _demultiply_count(entry: dict[str, Any], where: str) -> int | None:
    if "demultiply_count" not in entry:
        return None
    count = entry["demultiply_count"]
    if not is_integer(count) or not -1 <= count <= MAX_DEMULTIPLY:
        raise ValueError(f"{where}.demultiply_count must be an integer from -1 to {MAX_DEMULTIPLY}")
    if count == 0:
        logger.warning(
            "%s: demultiply_count 0 will be deprecated; for a dynamic count use -1", where
        )
        return -1
    return count


def _sources(value: Any, where: str) -> tuple[tuple[str, Source], ...]:
    """`[{"<name>": {"node_name": ..., "data_item": ...}}, ...]`, one name per object."""
    sources = []
    for index, item in enumerate(_array(value, where)):
        at = f"{where}[{index}]"
        if not isinstance(item, dict) or len(item) != 1:
            raise ValueError(f'{at} must be an object with one key: {{"<name>": {{...}}}}')
        name, source = next(iter(item.items()))
        source = _object(
            source, f"{at}.{name}", {"node_name", "data_item"}, ("node_name", "data_item")
        )
        node = _string(source["node_name"], f"{at}.{name}.node_name")
        data_item = _string(source["data_item"], f"{at}.{name}.data_item")
        sources.append((name, Source(node, data_item)))
    return tuple(sources)


def _aliases(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    aliases = []
    for index, item in enumerate(_array(value, where)):
        at = f"{where}[{index}]"
        item = _object(item, at, {"data_item", "alias"}, ("data_item", "alias"))
        aliases.append(
            (_string(item["alias"], f"{at}.alias"), _string(item["data_item"], f"{at}.data_item"))
        )
    return tuple(aliases)


def _node(value: Any, where: str) -> PipelineNode:
    entry = _object(value, where, NODE_KEYS, ("name", "type", "inputs", "outputs"))
    kind = entry["type"]
    if kind not in (DL_MODEL, CUSTOM):
        raise ValueError(f'{where}.type must be "{DL_MODEL}" or "{CUSTOM}", not {kind!r}')
    needs, refuses = (
        ("model_name", "library_name") if kind == DL_MODEL else ("library_name", "model_name")
    )
    if needs not in entry:
        raise ValueError(f'{where}.{needs} is required for a node of type "{kind}"')
    if refuses in entry:
        raise ValueError(f'{where}.{refuses} does not belong to a node of type "{kind}"')
    version = entry.get("version")
    if version is not None and (not is_integer(version) or version < 1):
        raise ValueError(f"{where}.version must be an integer of at least 1")
    params = entry.get("params", {})
    if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
        raise ValueError(f"{where}.params must be an object of strings")
    if params and kind == DL_MODEL:
        logger.warning("%s.params is ignored: parameters are for custom nodes", where)
    gather = entry.get("gather_from_node")
    return PipelineNode(
        name=_string(entry["name"], f"{where}.name"),
        kind=kind,
        model_name=_string(entry.get("model_name", ""), f"{where}.model_name"),
        version=version,
        library_name=_string(entry.get("library_name", ""), f"{where}.library_name"),
        inputs=_sources(entry["inputs"], f"{where}.inputs"),
        outputs=_aliases(entry["outputs"], f"{where}.outputs"),
        demultiply_count=_demultiply_count(entry, where),
        gather_from_node=None if gather is None else _string(gather, f"{where}.gather_from_node"),
    )


def parse_pipeline(value: Any, where: str) -> PipelineConfig:
    """One `pipeline_config_list` entry; raises ValueError naming the key (prefixed by `where`)."""
    entry = _object(value, where, PIPELINE_KEYS, ("name", "nodes", "inputs", "outputs"))
    inputs = _array(entry["inputs"], f"{where}.inputs")
    return PipelineConfig(
        name=_string(entry["name"], f"{where}.name"),
        inputs=tuple(_string(item, f"{where}.inputs[{i}]") for i, item in enumerate(inputs)),
        nodes=tuple(
            _node(node, f"{where}.nodes[{i}]")
            for i, node in enumerate(_array(entry["nodes"], f"{where}.nodes"))
        ),
        outputs=_sources(entry["outputs"], f"{where}.outputs"),
        demultiply_count=_demultiply_count(entry, where),
    )


def parse_libraries(value: Any, where: str) -> dict[str, str]:
    """`custom_node_library_config_list`: library name -> base_path (the .so file)."""
    libraries = {}
    for index, item in enumerate(_array(value, where)):
        at = f"{where}[{index}]"
        item = _object(item, at, LIBRARY_KEYS, ("name", "base_path"))
        libraries[_string(item["name"], f"{at}.name")] = _string(
            item["base_path"], f"{at}.base_path"
        )
    return libraries
