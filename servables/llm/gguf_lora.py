"""A GGUF model that LoRA adapters can find their layers in.

openvino-genai builds a GGUF's graph itself, and its quantized layers come out with generated
names (`MatMul_46`), so a PEFT adapter's `model.layers.0.self_attn.q_proj` matches nothing:
genai 2026.4 prints "Unused LoRA tensor" for every tensor and generates the base model's text.
The graph does have Hugging Face's layout (genai un-permutes llama's q/k rows back to HF order),
so an adapter trained on the HF checkpoint applies once the layers carry HF's names.

This module has genai save the graph it builds from the GGUF (once per file, into the cache:
servables/llm/gguf_graph.py) and names each decoder layer's
projections by their place in the graph rather than by creation order:

- per attention block (a ScaledDotProductAttention node, in graph order = layer index), the
  MatMuls its query, key and value inputs come from are q/k/v_proj and the first one its output
  reaches is o_proj;
- the next Swish (SiLU) after o_proj is fed by gate_proj; the Multiply it feeds takes up_proj as
  its other input and feeds down_proj.

A graph that does not have that shape is refused with an error instead of guessed at.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from servables.errors import ServableLoadError
from servables.llm.gguf_graph import (
    MODEL_XML,
    cached_model_dir,
    constant_only,
    save_genai_graph,
    save_model,
)
from servables.llm.model_files import is_gguf

logger = logging.getLogger(__name__)

ATTENTION = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
MODULES = (*ATTENTION, "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def _is_weight_matmul(node: Any, memo: dict[str, bool]) -> bool:
    """A MatMul whose second input is computed from constants only (a layer's weights)."""
    if node.get_type_name() != "MatMul":
        return False
    return constant_only(node.input_value(1).get_node(), memo)


def _search(
    start: Iterable[Any], step: Callable[[Any], Iterable[Any]], found: Callable[[Any], bool]
) -> Any:
    """The nearest node (breadth first from `start`) that satisfies `found`, or None."""
    queue, seen = deque(start), set()
    while queue:
        node = queue.popleft()
        if node.get_name() in seen:
            continue
        seen.add(node.get_name())
        if found(node):
            return node
        queue.extend(step(node))
    return None


def _inputs(node: Any) -> list[Any]:
    return [value.get_node() for value in node.input_values()]


def _consumers(node: Any) -> list[Any]:
    return [target.get_node() for output in node.outputs() for target in output.get_target_inputs()]


def hf_layer_names(model: Any) -> dict[str, Any]:
    """{Hugging Face module path: MatMul node} for every decoder layer of a genai GGUF graph."""
    memo: dict[str, bool] = {}

    def weight(node: Any) -> bool:
        return _is_weight_matmul(node, memo)

    def kind(name: str) -> Callable[[Any], bool]:
        return lambda node: node.get_type_name() == name

    names: dict[str, Any] = {}
    attentions = [
        op for op in model.get_ordered_ops() if op.get_type_name() == "ScaledDotProductAttention"
    ]
    for layer, attention in enumerate(attentions):
        found: dict[str, Any] = {}
        for index, module in enumerate(ATTENTION):
            found[module] = _search([attention.input_value(index).get_node()], _inputs, weight)
        output = found["self_attn.o_proj"] = _search(_consumers(attention), _consumers, weight)
        swish = _search(_consumers(output), _consumers, kind("Swish")) if output else None
        if swish is not None:
            found["mlp.gate_proj"] = _search(_inputs(swish), _inputs, weight)
            product = _search(_consumers(swish), _consumers, kind("Multiply"))
            if product is not None:
                others = [node for node in _inputs(product) if node is not swish]
                found["mlp.up_proj"] = _search(others, _inputs, weight)
                found["mlp.down_proj"] = _search(_consumers(product), _consumers, weight)
        nodes = {node.get_name() for node in found.values() if node is not None}
        if len(nodes) != len(MODULES):
            missing = [module for module in MODULES if found.get(module) is None]
            raise ServableLoadError(
                f"cannot find the projections of decoder layer {layer} in the GGUF's graph "
                f"(missing {', '.join(missing) or 'distinct layers'}); LoRA adapters need a "
                "model directory for this architecture",
                param="lora_adapters",
            )
        names.update((f"model.layers.{layer}.{module}", node) for module, node in found.items())
    if not names:
        raise ServableLoadError(
            "the GGUF's graph has no attention layers to apply LoRA adapters to",
            param="lora_adapters",
        )
    return names


def named_model_dir(models_path: Path) -> Path:
    """A directory genai loads with LoRA adapters: a model directory as is, and for a GGUF its
    graph saved once into the cache with its layers under Hugging Face's names."""
    if not is_gguf(models_path):
        return models_path
    return cached_model_dir(models_path, "gguf-lora", _save_named)


def _save_named(models_path: Path, directory: Path) -> None:
    logger.info("naming the layers of %s for LoRA adapters (once per file)", models_path)
    model = save_genai_graph(models_path, directory)
    for name, node in hf_layer_names(model).items():
        node.set_friendly_name(name)
    save_model(model, directory)


def layer_names(model_dir: Path) -> list[str]:
    """The names of the model's MatMul and Convolution nodes: what genai matches adapters to."""
    import openvino as ov

    model = ov.Core().read_model(str(model_dir / MODEL_XML))
    return [
        op.get_friendly_name()
        for op in model.get_ordered_ops()
        if op.get_type_name() in ("MatMul", "Convolution")
    ]
