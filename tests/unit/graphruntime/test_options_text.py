"""Options as text fields: MediaPipe's option paths, and merges with and without a descriptor."""

from __future__ import annotations

import pytest

from graphruntime._proto import calculator_pb2
from graphruntime.options_text import (
    PathEntry,
    get_values,
    merge,
    merge_values,
    parse_field_path,
    parse_text_message,
)


def test_paths_as_mediapipe_writes_them() -> None:
    assert parse_field_path("OPTIONS") == (None, [])
    assert parse_field_path("options/tensor_width") == (None, [PathEntry("tensor_width")])
    assert parse_field_path("strides/2") == (None, [PathEntry("strides", 2)])
    assert parse_field_path("Ext::acme.Opts/size/width") == (
        "acme.Opts",
        [PathEntry("size"), PathEntry("width")],
    )
    with pytest.raises(ValueError, match="can only start"):
        parse_field_path("size/Ext::acme.Opts")


def test_list_syntax_and_adjacent_strings_read_as_fields() -> None:
    message = parse_text_message('a: [1, 2] b: "x" "y" c { d: 3 } [pkg.ext] < e: 4 >')
    assert get_values(message, [PathEntry("a")]) == ["1", "2"]
    assert get_values(message, [PathEntry("a", 1)]) == ["2"]
    assert get_values(message, [PathEntry("b")]) == ['"x" "y"']
    assert get_values(message, [PathEntry("c"), PathEntry("d")]) == ["3"]
    with pytest.raises(IndexError):
        get_values(message, [PathEntry("a", 5), PathEntry("x")])


def test_merge_without_a_descriptor_guesses_singular_unless_written_twice() -> None:
    base = parse_text_message("x: 1 list: 1 list: 2 sub { a: 1 b: 2 }")
    over = parse_text_message("x: 9 list: 3 list: 4 sub { b: 5 }")
    merged = merge(base, over, None)
    assert merged.to_text().split() == (
        ["x:", "9", "list:", "3", "list:", "4", "sub", "{", "a:", "1", "b:", "5", "}"]
    )


def test_merge_with_a_descriptor_appends_repeated_fields() -> None:
    desc = calculator_pb2.CalculatorGraphConfig.Node.DESCRIPTOR
    base = parse_text_message('name: "a" input_stream: "x"')
    over = parse_text_message('name: "b" input_stream: "y"')
    assert merge(base, over, desc).to_text().split() == (
        ["name:", '"b"', "input_stream:", '"x"', "input_stream:", '"y"']
    )


def test_merge_values_replaces_a_field_in_place_and_creates_a_missing_message() -> None:
    node = parse_text_message("first: 1 scale: 2 last: 3")
    updated = merge_values(node, [PathEntry("scale")], ["7", "8"], None)
    assert updated.to_text().split() == ["first:", "1", "scale:", "7", "scale:", "8", "last:", "3"]
    nested = merge_values(node, [PathEntry("size"), PathEntry("w")], ["4"], None)
    assert nested.to_text().split()[-5:] == ["size", "{", "w:", "4", "}"]
    assert node.to_text().split() == ["first:", "1", "scale:", "2", "last:", "3"]  # not modified
