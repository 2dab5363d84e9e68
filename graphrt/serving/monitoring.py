"""config.json's `monitoring` section: OVMS's switch for /metrics, read when the server starts.

    "monitoring": {"metrics": {"enable": true,
                               "metrics_list": ["ovms_requests_success", "ovms_streams"]}}

As in OVMS: `metrics.enable` is required, `metrics_list` picks families (every name must be one
of OVMS's; none: the default families), nothing else is allowed, and the section is read once
per server start, so a reload that changes it is told to restart (a warning) rather than
applied. Giving it together with --metrics_enable or --metrics_list is an error, OVMS's
"Metrics configuration duplicated in configuration file and CLI parameters".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphrt.observability.metrics import OVMS_METRICS


@dataclass(frozen=True)
class Monitoring:
    enable: bool
    metrics_list: tuple[str, ...] = ()


def parse_monitoring(value: Any) -> Monitoring:
    """The section's value; raises ValueError naming the key."""
    if not isinstance(value, dict) or set(value) != {"metrics"}:
        raise ValueError("'monitoring' must be an object with exactly the key 'metrics'")
    metrics = value["metrics"]
    if not isinstance(metrics, dict):
        raise ValueError("monitoring.metrics must be an object")
    unknown = sorted(set(metrics) - {"enable", "metrics_list"})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in monitoring.metrics")
    enable = metrics.get("enable")
    if not isinstance(enable, bool):
        raise ValueError("monitoring.metrics.enable is required and must be true or false")
    names = metrics.get("metrics_list", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("monitoring.metrics.metrics_list must be an array of strings")
    wrong = [name for name in names if name not in OVMS_METRICS]
    if wrong:
        raise ValueError(
            f"monitoring.metrics.metrics_list: {wrong[0]!r} is not a metric family "
            f"({', '.join(OVMS_METRICS)})"
        )
    return Monitoring(enable, tuple(names))
