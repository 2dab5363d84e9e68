"""Tensor element types: KServe v2 names, numpy dtypes and OpenVINO types, mapped once here."""

from __future__ import annotations

import numpy as np

# KServe v2 datatype name -> numpy dtype (BYTES carries Python bytes objects).
KSERVE_TO_NUMPY: dict[str, np.dtype[np.generic]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(np.object_),
}
NUMPY_TO_KSERVE = {dtype: name for name, dtype in KSERVE_TO_NUMPY.items()}

# OpenVINO element type name (ov.Type.get_type_name()) -> KServe name.
OPENVINO_TO_KSERVE = {
    "boolean": "BOOL",
    "u8": "UINT8",
    "u16": "UINT16",
    "u32": "UINT32",
    "u64": "UINT64",
    "i8": "INT8",
    "i16": "INT16",
    "i32": "INT32",
    "i64": "INT64",
    "f16": "FP16",
    "f32": "FP32",
    "f64": "FP64",
    "string": "BYTES",
}


def kserve_name(dtype: np.dtype[np.generic]) -> str:
    """KServe name of a numpy dtype; strings and bytes arrays are BYTES."""
    if dtype.kind in ("S", "U", "O"):
        return "BYTES"
    try:
        return NUMPY_TO_KSERVE[dtype]
    except KeyError:
        raise ValueError(f"numpy dtype {dtype} has no KServe datatype") from None
