"""A GGUF's weights requantized to OpenVINO's channel-wise layouts (opt-in, not exact).

openvino-genai builds a GGUF's graph with the file's own blocks: 4-bit weights in groups of 32
with a scale and a zero point each (Q4_0, Q4_1, Q4_K), 8-bit ones for Q8_0 and Q6_K (groups of
16), which the lm_head of most files is. OpenVINO's CPU kernels are fastest on the layout its
own exporter writes with `--sym --group-size -1 --all-layers`: signed 4-bit weights with one
scale per output channel, the embedding and the lm_head included. The issue measured, on a
1B-class model on a Zen 4 with AVX-512 VNNI, 22.4 ms per token on that layout against
30.2 ms (Q4_0) and 35.8 ms (Q4_K_M) on genai's graph of the same model's GGUFs.

This module rewrites genai's graph into such a layout (`gguf_weights`): every weight of a
MatMul or of the embedding's Gather that the file quantized is decoded as the engine would
decode it (OpenVINO computes the weight's own subgraph), then rounded to the nearest of 16
(INT4_CHANNELWISE) or 256 (INT8_CHANNELWISE) signed levels per output channel, the largest
magnitude landing on the lowest level (the data-free rounding optimum-intel's exporter does).
Rounding weights that were already rounded to another grid changes the model's numbers, by a
lot for int4 (measured on SmolLM2-135M Q4_1: KL divergence of the next-token distributions
1.78 nats a token, the same most likely token at 24% of the positions) and by little for int8
(0.004 nats, 94%): so it is opt-in, and docs/performance.md gives the measured costs. The
result is cached beside the file's other derived graphs (servables/llm/gguf_graph.py), once per
file and layout.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from servables.llm.gguf_graph import cached_model_dir, constant_only, save_genai_graph, save_model

logger = logging.getLogger(__name__)

# gguf_weights layout → bits per weight, and OpenVINO's element type for the codes.
LAYOUTS = {"int4_channelwise": 4, "int8_channelwise": 8}
CODE_TYPES = frozenset({"u4", "i4", "u8", "i8"})
# Weights decoded per compiled model: few compilations, bounded memory (256 MB of float32).
FOLD_ELEMENTS = 64 * 1024 * 1024


def channelwise(weights: npt.NDArray[np.float32], bits: int) -> tuple[Any, Any]:
    """(signed codes as int8, float16 scales of shape (rows, 1)) for a (rows, columns) matrix:
    one scale per row, chosen so that the row's largest magnitude is the lowest code exactly."""
    levels = 1 << (bits - 1)
    extreme = np.take_along_axis(weights, np.abs(weights).argmax(axis=1)[:, None], axis=1)
    scales = (extreme / -levels).astype(np.float16)
    safe = np.where(scales == 0, np.float16(1), scales).astype(np.float32)
    codes = np.clip(np.rint(weights / safe), -levels, levels - 1).astype(np.int8)
    return codes, scales


def pack_int4(codes: npt.NDArray[np.int8]) -> npt.NDArray[np.uint8]:
    """Two codes per byte, the first in the low nibble (OpenVINO's i4 element order)."""
    flat = codes.reshape(-1).astype(np.uint8) & 0x0F
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


def _weight_node(weights: npt.NDArray[np.float32], bits: int) -> Any:
    """The decompression subgraph optimum-intel writes: i4/i8 → f16, times the scale → f32."""
    import openvino as ov
    from openvino import opset13 as ops

    codes, scales = channelwise(weights, bits)
    if bits == 4:
        tensor = ov.Tensor(ov.Type.i4, ov.Shape(list(codes.shape)))
        np.copyto(tensor.data.reshape(-1), pack_int4(codes))
        packed = ov.op.Constant(tensor)
    else:
        packed = ops.constant(codes)
    scaled = ops.multiply(ops.convert(packed, ov.Type.f16), ops.constant(scales))
    return ops.convert(scaled, ov.Type.f32)


def _weight_inputs(model: Any) -> list[tuple[Any, int, bool]]:
    """(node, input port, rows are output channels) of every weight a MatMul multiplies by
    and of every table a Gather (the embedding) reads, where the file quantized it (its
    subgraph starts from integer codes); float weights (norms, an f16 file's) stay as they are."""
    memo: dict[str, bool] = {}
    found = []
    for node in model.get_ordered_ops():
        kind = node.get_type_name()
        if kind == "MatMul":
            transposed, port = bool(node.get_attributes().get("transpose_b")), 1
        elif kind == "Gather":
            transposed, port = True, 0
        else:
            continue
        source = node.input_value(port).get_node()
        if (
            len(node.get_input_partial_shape(port)) == 2
            and constant_only(source, memo)
            and _from_codes(source)
        ):
            found.append((node, port, transposed))
    return found


def _from_codes(node: Any) -> bool:
    """Whether a constant-only subgraph decodes integer codes of at most 8 bits."""
    if node.get_type_name() == "Constant":
        return node.get_output_element_type(0).get_type_name() in CODE_TYPES
    return any(_from_codes(value.get_node()) for value in node.input_values())


def requantize(model: Any, bits: int) -> int:
    """Rewrite `model`'s weights in place (see the module docstring); returns how many."""
    import openvino as ov

    sources: dict[str, Any] = {}  # a weight two layers share (tied embeddings) is done once
    consumers: list[tuple[Any, int, bool, str]] = []
    for node, port, transposed in _weight_inputs(model):
        source = node.input_value(port)
        key = source.get_node().get_name()
        sources.setdefault(key, source)
        consumers.append((node, port, transposed, key))
    orientation = {key: transposed for _, _, transposed, key in consumers}
    replaced: dict[str, Any] = {}
    for key, weights in _decoded(list(sources.items())):
        matrix = weights if orientation[key] else weights.T
        new = _weight_node(np.ascontiguousarray(matrix), bits)
        replaced[key] = new if orientation[key] else ov.opset13.transpose(new, [1, 0])
    for node, port, _, key in consumers:
        node.input(port).replace_source_output(replaced[key].output(0))
    return len(replaced)


def _decoded(sources: list[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """Each weight as float32, as the engine decodes it: OpenVINO computes the weights'
    subgraphs, a batch of about FOLD_ELEMENTS values per compiled model."""
    import openvino as ov

    core = ov.Core()
    batch: list[tuple[str, Any]] = []
    size = 0
    for index, (key, source) in enumerate(sources):
        batch.append((key, source))
        size += math.prod(source.get_shape())
        if size < FOLD_ELEMENTS and index + 1 < len(sources):
            continue
        folded = core.compile_model(ov.Model([s for _, s in batch], [], "weights"), "CPU")
        request = folded.create_infer_request()
        request.infer()
        for position, (name, _) in enumerate(batch):
            yield name, np.array(request.get_output_tensor(position).data, dtype=np.float32)
        batch, size = [], 0


def requantized_model_dir(models_path: Path, layout: str) -> Path:
    """The GGUF's graph with its weights in `layout` (LAYOUTS), made once per file."""
    bits = LAYOUTS[layout]

    def make(source: Path, directory: Path) -> None:
        logger.info(
            "requantizing the weights of %s to %s (gguf_weights, once per file)", source, layout
        )
        model = save_genai_graph(source, directory)
        count = requantize(model, bits)
        logger.info("requantized %d weight matrices of %s", count, source)
        save_model(model, directory)

    return cached_model_dir(models_path, f"gguf-{layout.replace('_', '-')}", make)
