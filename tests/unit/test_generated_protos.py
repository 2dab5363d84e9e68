"""The committed *_pb2 modules must be exactly what tools/gen_proto.py makes from proto/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_modules_match_proto_sources(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_proto.py"), "--out", str(tmp_path)], check=True
    )
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*_pb2*.py*"))
    assert generated, "protoc produced nothing"
    for relative in generated:
        committed = ROOT / relative
        assert committed.exists(), f"{relative} is generated but not committed"
        assert committed.read_text() == (tmp_path / relative).read_text(), (
            f"{relative} differs from its .proto; run `python tools/gen_proto.py`"
        )
    committed_all = {
        p.relative_to(ROOT)
        for package in ("graphruntime", "calculators", "servables", "graphrt")
        for p in (ROOT / package).rglob("*_pb2*.py*")
    }
    assert committed_all == set(generated), "committed *_pb2 modules without a .proto source"
