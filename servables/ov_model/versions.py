"""A model_config_list entry: the versions its policy selects, loaded, swapped and reported.

Versions are numeric folders under `base_path` (OVMS's layout), or `base_path` is one model
file, served as version 1 (model_files.py). The version policy picks which
to serve: the latest N (default 1), all, or specific numbers. `refresh()` rescans the folders, so
versions that appear are loaded and versions that disappear are unloaded; the reload machinery
calls it on every poll. A request without a version gets the highest loaded one.

A version that fails to load is tried again at a later refresh, after 1 s, then 2, 4, ... at most
60 s (files still being copied, a device busy a moment ago), while the versions that were serving
go on serving; it replaces them once it loads.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servables.errors import ModelNotFound, ServableNotReady
from servables.ov_model.batching_config import DynamicBatchingConfig
from servables.ov_model.model import OpenVINOModel
from servables.ov_model.model_files import version_folders, version_path
from servables.ov_model.preprocessing import Preprocessing

logger = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0
clock = time.monotonic  # for retry times (tests replace it)

MODEL_KEYS = {
    "name",
    "base_path",
    "target_device",
    "nireq",
    "plugin_config",
    "model_version_policy",
    "batch_size",
    "shape",
    "layout",
    "mean",
    "scale",
    "color_format",
    "precision",
    "stateful",
    "idle_sequence_cleanup",
    "max_sequence_number",
    "low_latency_transformation",
    "allow_cache",
    "dynamic_batching",  # ours, in Triton's names (batching_config.py)
}


# OVMS's preprocessing parameters (preprocessing.py), as from_options names them.
PREPROCESSING_KEYS = ("layout", "mean", "scale", "color_format", "precision")


class VersionState(enum.Enum):
    LOADING = "LOADING"
    AVAILABLE = "AVAILABLE"
    UNAVAILABLE = "UNAVAILABLE"
    END = "END"


@dataclass(frozen=True)
class VersionPolicy:
    """OVMS's model_version_policy: {"latest": {"num_versions": N}}, {"all": {}}, or
    {"specific": {"versions": [..]}}."""

    kind: str = "latest"
    count: int = 1
    versions: tuple[int, ...] = ()

    def select(self, available: list[int]) -> list[int]:
        ordered = sorted(available)
        if self.kind == "all":
            return ordered
        if self.kind == "specific":
            return [version for version in ordered if version in self.versions]
        return ordered[-self.count :] if self.count > 0 else []

    @classmethod
    def from_json(cls, value: Any) -> VersionPolicy:
        if value is None:
            return cls()
        if isinstance(value, str):  # OVMS takes the JSON as a string too (the CLI's form)
            try:
                value = json.loads(value)
            except ValueError as error:
                raise ValueError(f"model_version_policy is not valid JSON: {error}") from error
        if not isinstance(value, dict) or len(value) != 1:
            raise ValueError('model_version_policy must be {"latest"|"all"|"specific": {...}}')
        kind, settings = next(iter(value.items()))
        if not isinstance(settings, dict):
            raise ValueError(f"model_version_policy.{kind} must be an object")
        if kind == "latest":
            count = settings.get("num_versions", 1)
            if not isinstance(count, int) or count < 1:
                raise ValueError("model_version_policy.latest.num_versions must be >= 1")
            return cls("latest", count)
        if kind == "all":
            return cls("all")
        if kind == "specific":
            versions = settings.get("versions")
            if not isinstance(versions, list) or not all(isinstance(v, int) for v in versions):
                raise ValueError("model_version_policy.specific.versions must be integers")
            return cls("specific", versions=tuple(versions))
        raise ValueError(f"unknown model_version_policy {kind!r}")


@dataclass(frozen=True)
class ModelConfig:
    """One model_config_list entry ({"config": {...}}), paths resolved."""

    name: str
    base_path: Path
    target_device: str = "CPU"
    nireq: int = 0
    plugin_config: Mapping[str, Any] = field(default_factory=dict)
    version_policy: VersionPolicy = field(default_factory=VersionPolicy)
    batch_size: str | None = None
    shape: str | Mapping[str, str] | None = None
    preprocessing: Preprocessing = field(default_factory=Preprocessing)
    dynamic_batching: DynamicBatchingConfig | None = None

    @classmethod
    def from_json(cls, entry: Any, root: Path, where: str) -> ModelConfig:
        """Parse `{"config": {...}}`; raises ValueError naming the key (`where` prefixes it)."""
        config = entry.get("config") if isinstance(entry, dict) else None
        if not isinstance(config, dict):
            raise ValueError(f"{where} must be an object with a 'config' object")
        unknown = sorted(set(config) - MODEL_KEYS)
        if unknown:
            raise ValueError(f"unknown key {unknown[0]!r} in {where}.config")
        return cls.from_settings(config, root, f"{where}.config.")

    @classmethod
    def from_settings(cls, config: Mapping[str, Any], root: Path, prefix: str) -> ModelConfig:
        """The settings of one model, from config.json or the command line; ValueError names
        the setting as `prefix` + its name (`model_config_list[0].config.` or `--`)."""
        name, base = config.get("name"), config.get("base_path")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{prefix}name is required")
        if not isinstance(base, str) or not base:
            raise ValueError(f"{prefix}base_path is required")
        plugin = config.get("plugin_config", {})
        if isinstance(plugin, str):
            try:
                plugin = json.loads(plugin)
            except ValueError as error:
                raise ValueError(f"{prefix}plugin_config is not valid JSON") from error
        if not isinstance(plugin, dict):
            raise ValueError(f"{prefix}plugin_config must be an object")
        nireq = config.get("nireq", 0)
        if not isinstance(nireq, int) or nireq < 0:
            raise ValueError(f"{prefix}nireq must be a non-negative integer")
        try:
            policy = VersionPolicy.from_json(config.get("model_version_policy"))
            preprocessing = Preprocessing.from_options(
                **{key: config.get(key) for key in PREPROCESSING_KEYS}
            )
        except ValueError as error:
            raise ValueError(f"{prefix}{error}") from error
        batch, shape = config.get("batch_size"), config.get("shape")
        if batch is not None and shape is not None:
            logger.warning(
                "model %s: both shape and batch_size are set; batch_size is ignored (as in OVMS)",
                name,
            )
        batching = DynamicBatchingConfig.from_json(
            config.get("dynamic_batching"), f"{prefix}dynamic_batching"
        )
        return cls(
            name=name,
            base_path=(root / base).resolve(),
            target_device=str(config.get("target_device") or "CPU"),
            nireq=nireq,
            plugin_config=plugin,
            version_policy=policy,
            batch_size=None if batch is None else str(batch),
            shape=shape,
            preprocessing=preprocessing,
            dynamic_batching=batching,
        )


@dataclass
class Version:
    number: int
    state: VersionState
    model: OpenVINOModel | None = None
    error: str | None = None
    failures: int = 0  # failed loads in a row
    retry_at: float = 0.0  # clock() after which a failed load is tried again

    def due_for_retry(self, now: float) -> bool:
        return self.state is VersionState.UNAVAILABLE and now >= self.retry_at


class VersionedModel:
    """See the module docstring."""

    def __init__(self, config: ModelConfig, count_inferences: bool = False) -> None:
        self.config = config
        self.count_inferences = count_inferences  # OVMS's inference metrics (model.py)
        self.name = config.name
        self.versions: dict[int, Version] = {}
        self._lock = asyncio.Lock()

    def available_versions(self) -> list[int]:
        return sorted(n for n, v in self.versions.items() if v.state is VersionState.AVAILABLE)

    @property
    def available(self) -> bool:
        return any(v.state is VersionState.AVAILABLE for v in self.versions.values())

    def on_disk(self) -> list[int]:
        return version_folders(self.config.base_path)

    async def refresh(self) -> bool:
        """Load newly selected versions, unload dropped ones; True if anything changed."""
        async with self._lock:
            wanted = set(self.config.version_policy.select(self.on_disk()))
            loaded = {n for n, v in self.versions.items() if v.state is not VersionState.END}
            added, removed = sorted(wanted - loaded), sorted(loaded - wanted)
            now = clock()
            retried = sorted(n for n in wanted & loaded if self.versions[n].due_for_retry(now))
            # New versions load first, so the model keeps answering meanwhile; the dropped ones
            # go only if a selected version works (a broken new folder leaves the old serving).
            if added or retried:
                await asyncio.gather(*(self._load(number) for number in added + retried))
            if removed and not any(
                self.versions[n].state is VersionState.AVAILABLE for n in wanted
            ):
                logger.error(
                    "model %s: no selected version loaded; version(s) %s keep serving",
                    self.name,
                    ", ".join(map(str, removed)),
                )
                removed = []
            for number in removed:
                self.versions[number] = Version(number, VersionState.END)
                logger.info("model %s version %d unloaded", self.name, number)
            if not wanted and not self.on_disk():
                logger.error(
                    "model %s: no version folders under %s", self.name, self.config.base_path
                )
            return bool(added or removed or retried)

    async def _load(self, number: int) -> None:
        config = self.config
        previous = self.versions.get(number)
        failures = previous.failures if previous is not None else 0
        self.versions[number] = Version(number, VersionState.LOADING, failures=failures)
        model = OpenVINOModel(
            config.name,
            number,
            version_path(config.base_path, number),
            device=config.target_device,
            properties=config.plugin_config,
            nireq=config.nireq,
            batch_size=config.batch_size,
            shape=config.shape,
            preprocessing=config.preprocessing,
            dynamic_batching=config.dynamic_batching,
            count_inferences=self.count_inferences,
        )
        started = time.perf_counter()
        try:
            await asyncio.to_thread(model.load)
        except Exception as error:  # typed load errors, and whatever else the files cause
            message = getattr(error, "message", None) or str(error) or type(error).__name__
            delay = min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2**failures)
            self.versions[number] = Version(
                number,
                VersionState.UNAVAILABLE,
                error=message,
                failures=failures + 1,
                retry_at=clock() + delay,
            )
            logger.error(
                "model %s version %d failed to load (attempt %d; trying again in %.0f s): %s",
                self.name,
                number,
                failures + 1,
                delay,
                message,
            )
            return
        model.start()
        self.versions[number] = Version(number, VersionState.AVAILABLE, model)
        logger.info(
            "model %s version %d loaded in %.2f s (%d infer requests on %s)",
            self.name,
            number,
            time.perf_counter() - started,
            model.nireq,
            config.target_device,
        )

    def get(self, version: int | None = None) -> OpenVINOModel:
        """The version asked for, or the highest loaded one."""
        if version is None:
            latest = max(
                (n for n, v in self.versions.items() if v.state is VersionState.AVAILABLE),
                default=None,
            )
            if latest is None:
                raise ServableNotReady(f"Model {self.name} has no version available")
            version = latest
        entry = self.versions.get(version)
        if entry is None or entry.state is VersionState.END:
            raise ModelNotFound(f"Model {self.name} version {version} is not found")
        if entry.model is None or entry.state is not VersionState.AVAILABLE:
            raise ServableNotReady(
                f"Model {self.name} version {version} is {entry.state.value}"
                + (f": {entry.error}" if entry.error else "")
            )
        return entry.model

    async def stop(self) -> None:
        for version in self.versions.values():
            version.state = VersionState.END
            version.model = None
