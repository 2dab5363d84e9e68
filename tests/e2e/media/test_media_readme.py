"""The image and speech example of docs/images-and-speech.md runs as written against a real
server (documentation that cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import ExactServer

PAGE = Path(__file__).resolve().parents[3] / "docs" / "images-and-speech.md"
README = PAGE.read_text(encoding="utf-8")
# The page's model names, and the media server's: the speech model as the page exports it, with
# no voices (its `voice="alloy"` must work as written).
MODELS = {
    '"sd"': '"tiny-sd"',
    '"whisper"': '"tiny-whisper"',
    '"speecht5"': '"tiny-speecht5-plain"',
}


def test_the_readme_example_runs(
    media_server: ExactServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (block,) = [
        b for b in re.findall(r"```python\n(.*?)```", README, re.DOTALL) if "images.generate(" in b
    ]
    code = block.replace("http://127.0.0.1:8000", media_server.base_url)
    for readme_name, served in MODELS.items():
        code = code.replace(f"model={readme_name}", f"model={served}")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(PAGE), "exec"), {"__name__": "readme_example"})
    assert (tmp_path / "lighthouse.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "hello.wav").read_bytes().startswith(b"RIFF")
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].strip() and printed[-1].startswith("transcript.text.done")
