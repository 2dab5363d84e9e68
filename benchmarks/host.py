"""What a benchmark ran on: the CPU and its features, the load, and OpenVINO's CPU settings.

Single-stream LLM speed depends on the CPU family more than on anything graphrt sets: OpenVINO's
int4 kernels quantize activations to int8 on the fly only with AVX-512 VNNI or AVX-VNNI, bf16
inference needs AVX-512 BF16 or AMX, and llama.cpp picks its kernels by the same flags. So every
benchmark prints this header, and the load average before each run (the machine may be shared,
and llama.cpp's spinning threads slow several times when anything else runs).

    python benchmarks/host.py        # prints the header
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

# /proc/cpuinfo flag → the name benchmarks print.
FEATURES = {
    "avx2": "AVX2",
    "avx512f": "AVX-512F",
    "avx512_vnni": "AVX-512 VNNI",
    "avx512_bf16": "AVX-512 BF16",
    "avx_vnni": "AVX-VNNI",
    "amx_tile": "AMX",
    "amx_int8": "AMX-INT8",
    "amx_bf16": "AMX-BF16",
}
# The CPU plugin's properties that change an LLM's decode speed (their defaults depend on the CPU).
OPENVINO_SETTINGS = (
    "INFERENCE_PRECISION_HINT",
    "DYNAMIC_QUANTIZATION_GROUP_SIZE",
    "KV_CACHE_PRECISION",
    "PERFORMANCE_HINT",
    "INFERENCE_NUM_THREADS",
)


def cpu() -> dict[str, Any]:
    """Model name, core count and the features above (Linux /proc/cpuinfo)."""
    model, flags = platform.processor() or "?", set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    return {
        "model": model,
        "cores": os.cpu_count(),
        "features": [name for flag, name in FEATURES.items() if flag in flags],
        "missing": [name for flag, name in FEATURES.items() if flag not in flags],
    }


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text(encoding="ascii").split()[:3])
    except OSError:
        return "?"


def openvino_settings(given: dict[str, Any] | None = None) -> dict[str, str]:
    """The CPU plugin's defaults for OPENVINO_SETTINGS on this CPU, with `given` over them:
    what a pipeline compiled with those properties runs with."""
    import openvino as ov

    core = ov.Core()
    settings: dict[str, str] = {
        "OPTIMIZATION_CAPABILITIES": " ".join(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    }
    for name in OPENVINO_SETTINGS:
        settings[name] = _text(core.get_property("CPU", name))
    settings.update((name, _text(value)) for name, value in (given or {}).items())
    return settings


def _text(value: Any) -> str:
    """An OpenVINO property value as it is written in plugin_config (f32, LATENCY, 32)."""
    if hasattr(value, "get_type_name"):  # ov.Type
        return str(value.get_type_name())
    return str(getattr(value, "name", value))  # enums: their name


def dynamic_quantization_applies() -> bool:
    """Whether OpenVINO can quantize activations for int4/int8 matrix products on this CPU."""
    features = set(cpu()["features"])
    return bool(features & {"AVX-512 VNNI", "AVX-VNNI", "AMX-INT8"})


def describe(given: dict[str, Any] | None = None) -> str:
    """The header every benchmark prints."""
    info = cpu()
    import openvino as ov

    lines = [
        f"CPU: {info['model']}, {info['cores']} cores; has {', '.join(info['features']) or '-'}; "
        f"lacks {', '.join(info['missing']) or '-'}",
        f"OpenVINO {ov.__version__}, CPU plugin settings in force: "
        + json.dumps(openvino_settings(given)),
    ]
    if not dynamic_quantization_applies():
        lines.append(
            "NOTE: no AVX-512 VNNI / AVX-VNNI / AMX here: OpenVINO multiplies int4 and int8 "
            "weights in f32 (no dynamic quantization of activations); int4 layouts cannot show "
            "their speed on this CPU"
        )
    lines.append(f"load average: {load()} (1/5/15 min)")
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
    sys.exit(0)
