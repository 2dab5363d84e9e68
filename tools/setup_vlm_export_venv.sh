#!/usr/bin/env bash
# Create the (heavy) venv that tools/make_tiny_vlm.py needs to *build* the tiny Qwen2-VL fixture.
#
#   bash tools/setup_vlm_export_venv.sh VENV      # e.g. /work/vlmvenv  (~1.4 GB, about a minute)
#   VENV/bin/python tools/make_tiny_vlm.py tests/fixtures/models/tiny-qwen2-vl --verify
#
# Only rebuilding the fixture needs this venv. Using the committed fixture (tests, CI) needs
# nothing but openvino-genai, which the project installs anyway. Keep this venv outside the repo
# and never reuse the project's own venv for it.
#
# Why the install is split into three steps:
#   1. torch FIRST, on its own: pip then takes the CPU-only torch 2.13.0 wheel; resolving torch
#      together with the rest can pick a CUDA build (gigabytes, and not what we want).
#   2. The exporter stack with exact pins. transformers must be 5.0.0: optimum-intel's qwen2_vl
#      exporter refuses newer versions ("Maximum required is 5.0"), and openvino.genai's own test
#      suite pins the same version. requests and huggingface-hub are listed by hand because step 3
#      installs optimum-intel without its dependencies.
#   3. optimum-intel with --no-deps. Its install_requires pull in torchvision (a CUDA-linked build;
#      with CPU torch, `import transformers` then dies with "operator torchvision::nms does not
#      exist") and nncf (~200 MB, only needed for int8/int4 weight compression, not fp16 export).
#
# Re-running on an existing venv is safe: pip skips what is already installed at the pinned
# version, and any stray torchvision is removed at the end.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 VENV" >&2
    exit 2
fi
VENV=$1
PYTHON=${PYTHON:-python3}

if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check)

"${PIP[@]}" torch==2.13.0
"${PIP[@]}" \
    transformers==5.0.0 \
    optimum==2.3.0 \
    "huggingface-hub>=0.23.2,<1.22" \
    "requests>=2.33,<3" \
    openvino==2026.4.1 \
    openvino-tokenizers==2026.4.1.0 \
    openvino-genai==2026.4.1.0
"${PIP[@]}" --no-deps optimum-intel==2.2.0

# Belt and braces: a CUDA torchvision breaks `import transformers` (see step 3 above).
if "$VENV/bin/python" -m pip show torchvision >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip uninstall -y torchvision
fi

"$VENV/bin/python" - <<'PY'
import torch, transformers, optimum.intel, openvino, openvino_genai  # noqa: E401,F401
print("torch", torch.__version__, "| transformers", transformers.__version__,
      "| openvino", openvino.__version__, "| openvino-genai", openvino_genai.__version__)
PY
echo "export venv ready: $VENV"
