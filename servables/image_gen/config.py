"""What an image generation servable is configured with (OVMS's ImageGenCalculatorOptions, read).

Plain settings, free of protobuf: calculators/image_gen/resources.py reads the node's options
into these, applying OVMS's load-time rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from servables.errors import ServableLoadError

_SIZE = re.compile(r"^(\d+)x(\d+)$")
AdapterMode = Literal["DYNAMIC", "STATIC", "FUSE"]


@dataclass(frozen=True, order=True)
class Resolution:
    width: int
    height: int

    def __str__(self) -> str:
        return f"{self.width}x{self.height}"

    @classmethod
    def parse(cls, text: str, what: str) -> Resolution:
        """`WxH` with positive integers (a graph option; requests have their own messages)."""
        match = _SIZE.match(text.strip())
        if match is None or int(match[1]) <= 0 or int(match[2]) <= 0:
            raise ServableLoadError(f"{what} must be WxH with positive integers, got {text!r}")
        return cls(int(match[1]), int(match[2]))

    def fits(self, limit: Resolution) -> bool:
        return self.width <= limit.width and self.height <= limit.height


@dataclass(frozen=True)
class LoraAdapter:
    alias: str
    path: Path
    alpha: float = 1.0
    mode: AdapterMode = "DYNAMIC"


@dataclass(frozen=True)
class CompositeAdapter:
    """A named blend: (adapter alias, alpha or None for the adapter's own) per component."""

    alias: str
    components: tuple[tuple[str, float | None], ...]


@dataclass
class ImageGenConfig:
    name: str
    models_path: Path
    # One device for all models, or three: text encoders, denoiser (UNet/transformer), VAE.
    devices: tuple[str, ...] = ("CPU",)
    properties: dict[str, Any] = field(default_factory=dict)
    max_resolution: Resolution = Resolution(4096, 4096)
    default_resolution: Resolution | None = None
    max_images: int = 10
    default_steps: int = 50
    max_steps: int = 100
    # Static shapes: the sizes the models are compiled for (one: reshaped to it).
    static_resolutions: tuple[Resolution, ...] = ()
    static_images: int | None = None
    static_guidance_scale: float | None = None
    adapters: tuple[LoraAdapter, ...] = ()
    composites: tuple[CompositeAdapter, ...] = ()

    @property
    def dynamic_adapters(self) -> tuple[LoraAdapter, ...]:
        return tuple(a for a in self.adapters if a.mode != "FUSE")

    @property
    def static_adapters(self) -> bool:
        """Adapters compiled in with fixed alphas: requests cannot change them, and the base
        model is not served alone (OVMS's "static mode")."""
        return any(a.mode == "STATIC" for a in self.adapters)

    def aliases(self) -> list[str]:
        """The extra model names requests may use to select adapters (not FUSE ones)."""
        return [a.alias for a in self.dynamic_adapters] + [c.alias for c in self.composites]
