"""Structural tags that make the engine write tool calls in a family's own format.

XGrammar's triggered tags (openvino-genai `StructuredOutputConfig.structural_tags_config`, given
as JSON text): generation is free until a trigger string appears, then the matching tag's begin
text, a body constrained by the tool's JSON schema and the end text are enforced. This is what
OVMS's `enable_tool_guided_generation` and `tool_choice: "required"` do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["tool_call_structural_tag"]


def tool_call_structural_tag(
    tool_parser: str, tools: Sequence[Mapping[str, Any]], *, require_call: bool
) -> dict[str, Any] | None:
    """The structural-tag document for `tools` in `tool_parser`'s format, or None.

    Returns `{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": [...],
    "tags": [...], "at_least_one": require_call, "stop_after_first": False}}`; pass
    `json.dumps(...)` as `StructuredOutputConfig.structural_tags_config`. `require_call` forces
    at least one call (tool_choice "required" or a named function: pass only that tool). None for
    families without a grammar. Output generated under it parses with the same family's parser.
    """
    raise NotImplementedError
