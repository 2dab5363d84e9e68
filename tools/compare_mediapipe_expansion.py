"""Check graphrt's subgraph expansion against MediaPipe's own, on MediaPipe's module graphs.

    bash benchmarks/mediapipe_venv.sh            # MediaPipe 0.10.21 in a venv of its own
    git clone --branch v0.10.21 --depth 1 https://github.com/google-ai-edge/mediapipe /tmp/mp
    python tools/compare_mediapipe_expansion.py --checkout /tmp/mp [GRAPH ...]

For each graph (default: the CPU graphs MediaPipe's Python solutions run), graphrt expands the
checkout's `.pbtxt` with every `mediapipe/modules/*` directory as its subgraph path, and
MediaPipe's ValidatedGraphConfig expands the same text with the subgraphs compiled into its
wheel. The nodes are compared one by one, in order: name, calculator, streams, side packets,
handlers, executor and options (fields compared by name and value, since MediaPipe prints fields
in field-number order and graphrt in the order written). MediaPipe's C++ subgraphs
(InferenceCalculator, SwitchContainer) come from tools/mediapipe_subgraphs.py, written in Python.
Exit status 0 when every graph matches.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import mediapipe_subgraphs  # noqa: F401  (registers MediaPipe's C++ subgraphs)

from graphruntime.config import GraphConfig, load_graph_config, parse_graph_config
from graphruntime.config_print import mediapipe_order
from graphruntime.options_text import TextMessage, entry_message, entry_message_type
from graphruntime.subgraph_expansion import expand_subgraphs
from graphruntime.subgraphs import SubgraphLibrary

GRAPHS = (
    "face_detection/face_detection_short_range_cpu",
    "face_detection/face_detection_full_range_cpu",
    "face_landmark/face_landmark_front_cpu",
    "hand_landmark/hand_landmark_tracking_cpu",
    "holistic_landmark/holistic_landmark_cpu",
    "pose_landmark/pose_landmark_cpu",
    "objectron/objectron_cpu",
    "selfie_segmentation/selfie_segmentation_cpu",
)
# Objectron's CPU and GPU files declare the same types; MediaPipe's CPU build links the CPU ones.
CHOSEN_FILES = "objectron/*_cpu.pbtxt"
DEFAULT_VENV = Path.home() / ".cache/graphrt-bench/mediapipe-venv/bin/python"
_MEDIAPIPE_EXPAND = """
import sys
from mediapipe.python._framework_bindings import validated_graph_config
graph = validated_graph_config.ValidatedGraphConfig()
graph.initialize(graph_config=sys.stdin.read())
sys.stdout.write(graph.text_config)
"""


def _number(text: str) -> str:
    try:
        return repr(float(text))
    except ValueError:
        return text


def _normal(message: TextMessage) -> list[tuple[str, Any]]:
    """Fields sorted by name (a repeated field keeps its order), numbers as floats."""
    fields = sorted(message.fields, key=lambda f: f.name)
    return [
        (f.name, _normal(f.value) if isinstance(f.value, TextMessage) else _number(f.value))
        for f in fields
    ]


def describe_nodes(config: GraphConfig, order: list[int]) -> list[dict[str, Any]]:
    nodes = []
    for i in order:
        node = config.proto.node[i]
        options = sorted(
            (entry.kind, entry_message_type(entry), repr(_normal(entry_message(entry))))
            for entry in config.option_entries("node", i)
        )
        nodes.append(
            {
                "name": node.name,
                "calculator": node.calculator,
                "input_stream": list(node.input_stream),
                "output_stream": list(node.output_stream),
                "input_side_packet": list(node.input_side_packet),
                "output_side_packet": list(node.output_side_packet),
                "input_stream_handler": str(node.input_stream_handler),
                "input_stream_info": [str(info) for info in node.input_stream_info],
                "executor": node.executor,
                "options": options,
            }
        )
    return nodes


def compare(graph: Path, modules: Path, python: str) -> tuple[int, list[str]]:
    """graphrt's node count, and the differences between its and MediaPipe's expansion."""
    directories = sorted(str(d) for d in modules.iterdir() if d.is_dir())
    chosen = sorted(str(f) for f in modules.glob(CHOSEN_FILES))
    library = SubgraphLibrary([*chosen, *directories])
    ours = expand_subgraphs(load_graph_config(graph), library)
    result = subprocess.run(
        [python, "-c", _MEDIAPIPE_EXPAND],
        input=graph.read_text(),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return len(ours.proto.node), [f"MediaPipe failed: {result.stderr.strip()[-2000:]}"]
    theirs = parse_graph_config(result.stdout, "<mediapipe>")
    mine = describe_nodes(ours, mediapipe_order(ours.proto))
    reference = describe_nodes(theirs, list(range(len(theirs.proto.node))))
    problems = []
    if len(mine) != len(reference):
        problems.append(f"{len(mine)} nodes, MediaPipe has {len(reference)}")
    for index, (a, b) in enumerate(zip(mine, reference, strict=False)):
        for key in a:
            if a[key] != b[key]:
                problems.append(
                    f"node {index} ({b['name']}) {key}:\n  graphrt   {a[key]}\n  mediapipe {b[key]}"
                )
    return len(mine), problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", required=True, type=Path, help="a MediaPipe source tree")
    parser.add_argument("--mediapipe-python", default=str(DEFAULT_VENV))
    parser.add_argument("graphs", nargs="*", default=list(GRAPHS), metavar="GRAPH")
    args = parser.parse_args()
    modules = args.checkout / "mediapipe" / "modules"
    failed = False
    for name in args.graphs:
        graph = modules / f"{name}.pbtxt"
        count, problems = compare(graph, modules, args.mediapipe_python)
        failed = failed or bool(problems)
        print(f"{count:>5} nodes    {'same' if not problems else 'DIFFERENT'}  {name}")
        for problem in problems:
            print("    " + problem.replace("\n", "\n    "))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
