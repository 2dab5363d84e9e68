"""Port specs ("TAG:INDEX:name") and tag maps, with MediaPipe's rules and messages."""

from __future__ import annotations

import pytest

from graphruntime.tags import (
    PortSpec,
    TagError,
    TagMap,
    parse_tag_index,
    parse_tag_index_name,
)

NAME_REGEX = "([A-Z_][A-Z0-9_]*:((0|[1-9][0-9]*):)?)?[a-z_][a-z0-9_]*"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("in", PortSpec("", -1, "in")),
        ("_x9", PortSpec("", -1, "_x9")),
        ("VIDEO:frames", PortSpec("VIDEO", 0, "frames")),
        ("VIDEO:2:frames", PortSpec("VIDEO", 2, "frames")),
        ("LOOPBACK:0:loopback", PortSpec("LOOPBACK", 0, "loopback")),
        ("_T1:10000:n", PortSpec("_T1", 10000, "n")),
    ],
)
def test_parse_tag_index_name(spec: str, expected: PortSpec) -> None:
    assert parse_tag_index_name(spec) == expected


@pytest.mark.parametrize(
    "spec",
    ["In", "video:frames", "VIDEO:", ":frames", "VIDEO:01:frames", "A:1:2:x", "", "a-b", "A:x:y"],
)
def test_bad_spec_gets_mediapipes_message(spec: str) -> None:
    with pytest.raises(TagError) as caught:
        parse_tag_index_name(spec)
    assert str(caught.value) == (
        f'TAG:index:name is invalid, "{spec}" does not match "{NAME_REGEX}" '
        '(examples: "TAG:name" "VIDEO:2:name_b", "longer_name").'
    )


def test_index_above_mediapipes_maximum_is_refused() -> None:
    with pytest.raises(TagError, match="10001"):
        parse_tag_index_name("TAG:10001:x")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("TAG", ("TAG", 0)), ("TAG:2", ("TAG", 2)), (":3", ("", 3)), ("", ("", 0))],
)
def test_parse_tag_index(spec: str, expected: tuple[str, int]) -> None:
    assert parse_tag_index(spec) == expected


@pytest.mark.parametrize("spec", ["tag", "TAG:x", "TAG:1:2", "TAG:01"])
def test_bad_tag_index_gets_mediapipes_message(spec: str) -> None:
    with pytest.raises(TagError) as caught:
        parse_tag_index(spec)
    assert str(caught.value) == (
        f'TAG:index is invalid, "{spec}" does not match "([A-Z_][A-Z0-9_]*)?(:(0|[1-9][0-9]*))?" '
        '(examples: "TAG" "VIDEO:2").'
    )


def test_flat_ids_put_untagged_first_then_tags_sorted() -> None:
    tag_map = TagMap.from_specs(["ZED:z", "b", "ALPHA:1:a1", "a", "ALPHA:0:a0"])
    assert tag_map.names == ("b", "a", "a0", "a1", "z")
    assert tag_map.tags() == ("", "ALPHA", "ZED")
    assert tag_map.id("", 0) == 0
    assert tag_map.id("", 1) == 1
    assert tag_map.id("ALPHA", 0) == 2
    assert tag_map.id("ALPHA", 1) == 3
    assert tag_map.id("ZED") == 4
    assert tag_map.tag_index(3) == ("ALPHA", 1)
    assert list(tag_map.items()) == [
        ("", 0, "b"),
        ("", 1, "a"),
        ("ALPHA", 0, "a0"),
        ("ALPHA", 1, "a1"),
        ("ZED", 0, "z"),
    ]


def test_ovms_ports_get_the_same_ids_whatever_the_file_order() -> None:
    one = TagMap.from_specs(["LOOPBACK:loopback", "HTTP_REQUEST_PAYLOAD:input"])
    other = TagMap.from_specs(["HTTP_REQUEST_PAYLOAD:input", "LOOPBACK:loopback"])
    for tag_map in (one, other):
        assert tag_map.id("HTTP_REQUEST_PAYLOAD") == 0
        assert tag_map.id("LOOPBACK") == 1
    assert one.names == other.names


def test_lookups_of_missing_ports() -> None:
    tag_map = TagMap.from_specs(["A:x"])
    assert tag_map.find("A", 1) is None
    assert tag_map.find("B") is None
    assert tag_map.count("B") == 0
    assert not tag_map.has_tag("B")
    with pytest.raises(KeyError):
        tag_map.id("A", 1)
    with pytest.raises(IndexError):
        tag_map.tag_index(5)


def test_tagged_name_without_index_is_index_zero_so_repeating_it_is_a_duplicate() -> None:
    # tag_map.cc: only untagged entries count up; "TAG:name" is always index 0.
    with pytest.raises(TagError) as caught:
        TagMap.from_specs(["TAG:a", "TAG:b"])
    assert str(caught.value) == (
        'tag "TAG" index 0 already had a name "a" but is being reassigned a name "b"'
    )


def test_explicit_duplicate_index_is_reported() -> None:
    with pytest.raises(TagError) as caught:
        TagMap.from_specs(["V:1:a", "V:0:b", "V:1:c"])
    assert str(caught.value) == (
        'tag "V" index 1 already had a name "a" but is being reassigned a name "c"'
    )


def test_untagged_entries_count_up() -> None:
    tag_map = TagMap.from_specs(["a", "b", "c"])
    assert [tag_map.id("", i) for i in range(3)] == [0, 1, 2]
    assert tag_map.count("") == 3


def test_index_gap_is_reported_with_every_index() -> None:
    with pytest.raises(TagError) as caught:
        TagMap.from_specs(["V:0:a", "V:2:c"])
    message = str(caught.value)
    assert message.startswith("Not all indexes were assigned names.")
    assert 'Tag "V" has the following:' in message
    assert 'index 0 name "a"' in message
    assert "index 1 name <missing>" in message
    assert 'index 2 name "c"' in message


def test_same_name_on_two_ports_is_allowed() -> None:
    assert TagMap.from_specs(["A:x", "B:x"]).names == ("x", "x")


def test_canonical_specs() -> None:
    tag_map = TagMap.from_specs(["V:1:b", "in", "V:0:a", "ONE:o"])
    assert tag_map.canonical_specs() == ["in", "ONE:o", "V:0:a", "V:1:b"]


def test_same_layout_compares_tags_and_counts_not_names() -> None:
    assert TagMap.from_specs(["a", "T:x"]).same_layout(TagMap.from_specs(["b", "T:y"]))
    assert not TagMap.from_specs(["a"]).same_layout(TagMap.from_specs(["T:a"]))
    assert not TagMap.from_specs(["a"]).same_layout(TagMap.from_specs(["a", "b"]))
    assert TagMap.empty().same_layout(TagMap.from_specs([]))
    assert len(TagMap.empty()) == 0
