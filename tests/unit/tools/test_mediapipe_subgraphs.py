"""tools/mediapipe_subgraphs.py against MediaPipe itself.

MediaPipe's InferenceCalculator and SwitchContainer subgraphs are C++; the tool writes them in
Python so that graphrt expands MediaPipe's module graphs as MediaPipe does. The fixture
switch_container.expanded.pbtxt is MediaPipe 0.10.21's own expansion of switch_container.pbtxt
(ValidatedGraphConfig.text_config, in benchmarks/mediapipe_venv.sh's venv); the comparison is
the one tools/compare_mediapipe_expansion.py makes for the module graphs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from graphruntime.config import load_graph_config
from graphruntime.config_print import mediapipe_order
from graphruntime.subgraph_expansion import expand_subgraphs
from graphruntime.subgraphs import SubgraphLibrary, subgraph_registry

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "mediapipe"


@pytest.fixture
def compare() -> Iterator[ModuleType]:
    """The comparison tool, which registers the C++ subgraphs' Python versions on import."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        yield importlib.import_module("compare_mediapipe_expansion")
    finally:
        sys.path.remove(str(ROOT / "tools"))
        subgraph_registry.unregister("SwitchContainer")
        subgraph_registry.unregister("InferenceCalculator")
        sys.modules.pop("mediapipe_subgraphs", None)
        sys.modules.pop("compare_mediapipe_expansion", None)


def test_switch_container_and_inference_expand_as_in_mediapipe(compare: ModuleType) -> None:
    ours = expand_subgraphs(
        load_graph_config(FIXTURES / "switch_container.pbtxt"), SubgraphLibrary()
    )
    theirs = load_graph_config(FIXTURES / "switch_container.expanded.pbtxt")
    mine = compare.describe_nodes(ours, mediapipe_order(ours.proto))
    reference = compare.describe_nodes(theirs, list(range(len(theirs.proto.node))))
    assert [n["name"] for n in mine] == [n["name"] for n in reference]
    assert mine == reference
