"""Stream and side-packet specs ("TAG:INDEX:name") and the tag maps built from them.

A node lists its ports as specs; a `TagMap` turns that list into flat ids ordered by tag (untagged
first, then tags in sorted order) and index, exactly as MediaPipe orders them. Flat ids are what the
scheduler uses; tags and indexes are what calculators and error messages use. Messages keep
MediaPipe's wording so existing users recognise them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

MAX_INDEX = 10000

NAME_PATTERN = "[a-z_][a-z0-9_]*"
NUMBER_PATTERN = "(0|[1-9][0-9]*)"
TAG_PATTERN = "[A-Z_][A-Z0-9_]*"
TAG_INDEX_NAME_PATTERN = f"({TAG_PATTERN}:({NUMBER_PATTERN}:)?)?{NAME_PATTERN}"
TAG_INDEX_PATTERN = f"({TAG_PATTERN})?(:{NUMBER_PATTERN})?"

_NAME = re.compile(NAME_PATTERN)
_NUMBER = re.compile(NUMBER_PATTERN)
_TAG = re.compile(TAG_PATTERN)


class TagError(ValueError):
    """A spec or a set of specs breaks the naming rules."""


@dataclass(frozen=True)
class PortSpec:
    """One parsed "TAG:INDEX:name" entry; `index` is -1 when the spec gave none and no tag."""

    tag: str
    index: int
    name: str


def parse_tag_index_name(spec: str) -> PortSpec:
    """Parse "name", "TAG:name" or "TAG:INDEX:name"."""
    parts = spec.split(":")
    ok = False
    tag, index, name = "", -1, parts[-1]
    if len(parts) == 1:
        ok = _NAME.fullmatch(parts[0]) is not None
    elif len(parts) == 2:
        tag, index = parts[0], 0
        ok = _TAG.fullmatch(tag) is not None and _NAME.fullmatch(name) is not None
    elif len(parts) == 3:
        tag = parts[0]
        ok = (
            _TAG.fullmatch(tag) is not None
            and _NUMBER.fullmatch(parts[1]) is not None
            and _NAME.fullmatch(name) is not None
        )
        if ok:
            index = int(parts[1])
            if index > MAX_INDEX:
                raise TagError(f'index {index} in "{spec}" is larger than {MAX_INDEX}')
    if not ok:
        raise TagError(
            f'TAG:index:name is invalid, "{spec}" does not match "{TAG_INDEX_NAME_PATTERN}" '
            '(examples: "TAG:name" "VIDEO:2:name_b", "longer_name").'
        )
    return PortSpec(tag, index, name)


def parse_tag_index(spec: str) -> tuple[str, int]:
    """Parse "TAG", "TAG:2", ":3" or "" (as used by input_stream_info and sync sets)."""
    parts = spec.split(":")
    ok = len(parts) <= 2 and (parts[0] == "" or _TAG.fullmatch(parts[0]) is not None)
    index = 0
    if ok and len(parts) == 2:
        ok = _NUMBER.fullmatch(parts[1]) is not None
        index = int(parts[1]) if ok else 0
    if not ok:
        raise TagError(
            f'TAG:index is invalid, "{spec}" does not match "{TAG_INDEX_PATTERN}" '
            '(examples: "TAG" "VIDEO:2").'
        )
    return parts[0], index


def format_tag_index(tag: str, index: int) -> str:
    return f"{tag}:{index}"


class TagMap:
    """The ports of one kind (input streams, output side packets, ...) of one node or graph.

    Flat ids run over tags in sorted order ("" first) and, within a tag, over indexes, so two
    configs that list the same ports in different orders get the same ids.
    """

    __slots__ = ("_names", "_ranges")

    def __init__(self, names_by_tag: dict[str, list[str]]) -> None:
        self._ranges: dict[str, tuple[int, int]] = {}
        names: list[str] = []
        for tag in sorted(names_by_tag):
            self._ranges[tag] = (len(names), len(names_by_tag[tag]))
            names.extend(names_by_tag[tag])
        self._names = tuple(names)

    @classmethod
    def from_specs(cls, specs: Iterable[str]) -> TagMap:
        """Build from config entries; raises `TagError` with the problem MediaPipe would report."""
        counts: dict[str, int] = {}
        names_by_tag: dict[str, list[str | None]] = {}
        for spec in specs:
            port = parse_tag_index_name(spec)
            index = counts.get(port.tag, 0) if port.index == -1 else port.index
            counts[port.tag] = counts.get(port.tag, 0) + 1
            names = names_by_tag.setdefault(port.tag, [])
            if len(names) <= index:
                names.extend([None] * (index + 1 - len(names)))
            previous = names[index]
            if previous is not None:
                raise TagError(
                    f'tag "{port.tag}" index {index} already had a name "{previous}" '
                    f'but is being reassigned a name "{port.name}"'
                )
            names[index] = port.name
        complete: dict[str, list[str]] = {}
        for tag, names in names_by_tag.items():
            if counts[tag] != len(names):
                listing = ", ".join(
                    f'index {i} name "{n}"' if n is not None else f"index {i} name <missing>"
                    for i, n in enumerate(names)
                )
                raise TagError(
                    f'Not all indexes were assigned names. Tag "{tag}" has the following: {listing}'
                )
            complete[tag] = [n for n in names if n is not None]
        return cls(complete)

    @classmethod
    def empty(cls) -> TagMap:
        return cls({})

    def __len__(self) -> int:
        return len(self._names)

    @property
    def names(self) -> tuple[str, ...]:
        """Stream or side-packet names by flat id."""
        return self._names

    def tags(self) -> tuple[str, ...]:
        return tuple(self._ranges)

    def has_tag(self, tag: str) -> bool:
        return tag in self._ranges

    def count(self, tag: str) -> int:
        return self._ranges[tag][1] if tag in self._ranges else 0

    def id(self, tag: str, index: int = 0) -> int:
        """Flat id of TAG:INDEX; `KeyError` when the config has no such port."""
        first, count = self._ranges.get(tag, (0, 0))
        if not 0 <= index < count:
            raise KeyError(f'tag "{tag}" index {index}')
        return first + index

    def find(self, tag: str, index: int = 0) -> int | None:
        first, count = self._ranges.get(tag, (0, 0))
        return first + index if 0 <= index < count else None

    def tag_index(self, flat_id: int) -> tuple[str, int]:
        for tag, (first, count) in self._ranges.items():
            if first <= flat_id < first + count:
                return tag, flat_id - first
        raise IndexError(flat_id)

    def items(self) -> Iterator[tuple[str, int, str]]:
        """(tag, index, name) in flat-id order."""
        for tag, (first, count) in self._ranges.items():
            for index in range(count):
                yield tag, index, self._names[first + index]

    def canonical_specs(self) -> list[str]:
        """Specs as MediaPipe writes them back: "name", "TAG:name" or "TAG:i:name"."""
        specs: list[str] = []
        for tag, (first, count) in self._ranges.items():
            for index in range(count):
                name = self._names[first + index]
                if not tag:
                    specs.append(name)
                elif count == 1:
                    specs.append(f"{tag}:{name}")
                else:
                    specs.append(f"{tag}:{index}:{name}")
        return specs

    def same_layout(self, other: TagMap) -> bool:
        """True when both maps have the same tags with the same number of indexes."""
        return {t: c for t, (_, c) in self._ranges.items()} == {
            t: c for t, (_, c) in other._ranges.items()
        }

    def __repr__(self) -> str:
        return f"TagMap({self.canonical_specs()!r})"


def describe_port(tag: str, index: int) -> str:
    return f'tag "{tag}" index {index}'


def names_of(specs: Sequence[str]) -> list[str]:
    """Stream names of specs, skipping malformed ones (validation reports those separately)."""
    names = []
    for spec in specs:
        try:
            names.append(parse_tag_index_name(spec).name)
        except TagError:
            continue
    return names
