#!/usr/bin/env bash
# A virtualenv with MediaPipe 0.10.21 for benchmarks/graph_passthrough.py (benchmark only: that
# wheel needs protobuf < 5 and numpy < 2, so it cannot share graphrt's environment).
#
#     bash benchmarks/mediapipe_venv.sh [DIR]      (default: ~/.cache/graphrt-bench/mediapipe-venv)
#
# graph_passthrough.py finds it there, or takes --mediapipe-python DIR/bin/python.
set -euo pipefail
dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/graphrt-bench/mediapipe-venv}"
python3 -m venv "$dir"
"$dir/bin/pip" install -q 'mediapipe==0.10.21'
"$dir/bin/python" -c 'from mediapipe.python._framework_bindings import calculator_graph'
echo "$dir/bin/python"
