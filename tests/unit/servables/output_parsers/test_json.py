"""The incremental JSON checker behind streamed arguments: every prefix it releases can be
completed into valid JSON, and the complete text comes out as the same value."""

from __future__ import annotations

import json

import pytest

from servables.llm.output_parsers._json import JsonScanner, complete_json

DOCUMENTS = [
    '{"city": "Paris", "n": [1, 2.5e-3, -0, true, false, null], "o": {"a": {}}, "e": []}',
    '{"s": "q\\"uo\\\\te \\u00e9\\ud83d\\ude00 \\/ \\b\\f\\n\\r\\t", "k\\"ey": 1}',
    '[1, 2, {"x": "}"}, [[]], "]"]',
    '{ "spaced" : [ 1 , { } ] , "b" : { "c" : -12.5E+3 } }',
    '"just a string"',
    "-0.5e-7",
    "true",
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_prefix_completes_to_valid_json(document: str) -> None:
    for cut in range(1, len(document) + 1):
        scanner = JsonScanner()
        released = ""
        for char in document[:cut]:
            out = scanner.feed(char)
            assert out is not None, (document[:cut], char)
            released += out
        safe = released[: len(released) - scanner.held]
        if safe.strip():
            json.loads(safe + scanner.completion())
    assert json.loads(complete_json(document) or "") == json.loads(document)


@pytest.mark.parametrize(
    ("prefix", "completed"),
    [
        ('{"a": "Par', '{"a": "Par"}'),
        ('{"a": tr', '{"a": true}'),
        ('{"a": 1.', '{"a": 1.0}'),
        ('{"a": -', '{"a": -0}'),
        ('{"a": 1e+', '{"a": 1e+0}'),
        ('{"a": "\\u00', '{"a": "\\u0000"}'),
        ('{"a": "x\\', '{"a": "x"}'),
        ('{"a": ', '{"a":null}'),  # trailing blanks are stripped first
        ('{"a": 1, "b', '{"a": 1}'),  # a key cut in half is dropped, not invented
        ('{"a": 1, "b": ', '{"a": 1, "b":null}'),
        ('{"a": 1,', '{"a": 1}'),
        ("[1, ", "[1]"),
        ('{"a": [{"b": [', '{"a": [{"b": []}]}'),
    ],
)
def test_cut_off_values_are_completed_without_inventing_members(
    prefix: str, completed: str
) -> None:
    assert complete_json(prefix) == completed


@pytest.mark.parametrize(
    ("text", "repaired"),
    [
        ('{"code": "line1\nline2\tx"}', '{"code": "line1\\nline2\\tx"}'),
        ('{"a": "it\\\'s"}', '{"a": "it\\\\\'s"}'),
    ],
)
def test_near_json_slips_are_repaired(text: str, repaired: str) -> None:
    assert complete_json(text) == repaired
    json.loads(repaired)


@pytest.mark.parametrize("text", ["{'a': 1}", '{"a": 01}', "[1,]", '{"a" 1}', "{a: 1}", "nul1"])
def test_invalid_json_is_refused(text: str) -> None:
    assert complete_json(text) is None


def test_a_member_is_released_only_once_its_colon_is_seen() -> None:
    scanner = JsonScanner()
    released = "".join(scanner.feed(char) or "" for char in '{"a": 1, "lon')
    assert released[: len(released) - scanner.held] == '{"a": 1'
    released += "".join(scanner.feed(char) or "" for char in 'g":')
    assert released[: len(released) - scanner.held] == '{"a": 1, "long":'
