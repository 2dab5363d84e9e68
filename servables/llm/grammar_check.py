"""Check JSON schemas, regexes and EBNF grammars before they reach the engine's grammar backend.

openvino-genai compiles a request's grammar (XGrammar 0.1.x) lazily, inside the engine step that
first samples the request, and a grammar that fails to compile there leaves the whole
continuous-batching pipeline broken: that step and every later one raise, for every request
(measured with openvino-genai 2026.4.1: "Internal error: this function cannot be called when we are
already in scheduling phase"). The compiler is not reachable from Python, so what it would refuse is
refused here first, with a message naming the request field, and the engine only ever sees grammars
that compile. (Should one slip through, the engine worker fails only its request and rebuilds its
pipeline, and the frontend remembers the grammar: servables/llm/engine/batching.py.)

The checks are conservative: what they cannot vouch for is refused. Each kind of grammar has a
module of its own, following the XGrammar converter it stands in for: JSON schemas in
_grammar_schema.py (json_schema_converter.cc), regexes in _grammar_regex.py
(regex_converter.cc), EBNF in _grammar_ebnf.py (grammar_parser.cc). This module is the one
door the rest of the code uses, so that where a check lives can change without its callers.
"""

from __future__ import annotations

from servables.llm._grammar_ebnf import check_ebnf
from servables.llm._grammar_regex import check_regex
from servables.llm._grammar_schema import check_json_schema, json_schema_text

__all__ = ["check_ebnf", "check_json_schema", "check_regex", "json_schema_text"]
