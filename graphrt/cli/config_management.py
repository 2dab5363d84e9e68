"""OVMS's config management mode: `--list_models`, `--add_to_config`, `--remove_from_config`.

They work as OVMS's do (docs/starting_server.md, "Config management"): `--list_models` prints
the servables of a model repository, one path per line (a directory holding graph.pbtxt, or
numbered version directories holding a model); `--add_to_config` adds `{"config": {"name",
"base_path", ...}}` to config.json's `model_config_list`, creating the file if needed, and
refuses a name already there; `--remove_from_config` takes the entry out and refuses a name
that is not there. `OVMS_MODEL_REPOSITORY_PATH` gives the default repository and, as
`<repository>/config.json`, the default config file. A running server picks the change up
through its config.json reload. One difference: with `--model_repository_path` and no
`--model_path`, base_path is written relative to the config file (OVMS writes the repository path
as given, which its reader then takes relative to the config file).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servables.ov_model.model_files import holds_model_files

REPOSITORY_ENV = "OVMS_MODEL_REPOSITORY_PATH"


class ConfigManagementError(Exception):
    """The config file cannot be changed as asked; the message says why."""


def default_repository(given: str | None) -> Path | None:
    value = given or os.environ.get(REPOSITORY_ENV) or None
    return Path(value) if value else None


def config_file(given: str | None) -> Path:
    """`--config_path` (a directory means its config.json), else the repository's config.json."""
    if given:
        path = Path(given)
        return path / "config.json" if path.is_dir() else path
    repository = os.environ.get(REPOSITORY_ENV)
    if repository:
        return Path(repository) / "config.json"
    raise ConfigManagementError(
        f"--config_path is needed (or {REPOSITORY_ENV}, whose config.json is then used)"
    )


def _is_version_dir(path: Path) -> bool:
    return path.is_dir() and path.name.isdigit() and not path.name.startswith("0")


def list_models(repository: Path) -> list[str]:
    """Servable paths under `repository`, relative to it; see the module docstring."""
    found: list[str] = []

    def visit(directory: Path) -> None:
        if (directory / "graph.pbtxt").is_file() or any(
            _is_version_dir(v) and holds_model_files(v) for v in directory.iterdir()
        ):
            found.append(directory.relative_to(repository).as_posix())
            return
        for child in sorted(directory.iterdir()):
            if child.is_dir() and not child.name.startswith("."):
                visit(child)

    if not repository.is_dir():
        raise ConfigManagementError(f"model repository {repository} is not a directory")
    for child in sorted(repository.iterdir()):
        if child.is_dir() and not child.name.startswith("."):
            visit(child)
    return found


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ConfigManagementError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(data, dict) or not isinstance(data.get("model_config_list"), list):
        raise ConfigManagementError(f"{path} has no model_config_list array")
    return data


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(json.dumps(data, indent=4) + "\n", encoding="utf-8")
    staging.replace(path)  # a reloading server never reads half a file


def _entry_name(entry: Any) -> str | None:
    """The name of a model_config_list entry ({"config": {...}}) or a mediapipe_config_list one."""
    holder = entry.get("config", entry) if isinstance(entry, dict) else None
    name = holder.get("name") if isinstance(holder, dict) else None
    return name if isinstance(name, str) else None


def _names(data: dict[str, Any]) -> list[str | None]:
    sections = (data.get("model_config_list") or [], data.get("mediapipe_config_list") or [])
    return [_entry_name(entry) for section in sections for entry in section]


def model_base_path(
    config_path: Path, name: str, model_path: str | None, repository: Path | None
) -> str:
    """What base_path to write: `--model_path` as given, else the repository's `name` directory,
    relative to the config file where it can be."""
    if model_path:
        return model_path
    if repository is None:
        raise ConfigManagementError("--add_to_config needs --model_path or --model_repository_path")
    target = (repository / name).resolve()
    try:
        return target.relative_to(config_path.parent.resolve()).as_posix()
    except ValueError:
        return str(target)


def add_to_config(
    config_path: Path, name: str, base_path: str, options: Mapping[str, Any] | None = None
) -> None:
    data = _load(config_path) if config_path.exists() else {"model_config_list": []}
    if name in _names(data):
        raise ConfigManagementError(
            f"could not add {name!r} to {config_path}: a model with the same name already exists"
        )
    entry = {"name": name, "base_path": base_path, **(options or {})}
    data["model_config_list"].append({"config": entry})
    _save(config_path, data)


def remove_from_config(config_path: Path, name: str) -> None:
    if not config_path.exists():
        raise ConfigManagementError(f"config file {config_path} does not exist")
    data = _load(config_path)
    entries = data["model_config_list"]
    kept = [e for e in entries if not (isinstance(e, dict) and _entry_name(e) == name)]
    if len(kept) == len(entries):
        raise ConfigManagementError(f"{config_path} has no model named {name!r}")
    data["model_config_list"] = kept
    _save(config_path, data)
