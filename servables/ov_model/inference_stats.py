"""What one model version's inferences cost, counted as plain numbers for OVMS's model metrics.

OVMS reports, per model version: the requests being inferred (`ovms_current_requests`), the
infer requests taken from the model's pool (`ovms_infer_req_active`), the time a request waits
for one (`ovms_wait_for_infer_req_time_us`) and the inference time in OpenVINO
(`ovms_inference_time_us`). The model counts them here without knowing Prometheus (servables
never import the server); graphrt/observability/model_metrics.py reports them when scraped.
Times are kept in microseconds in OVMS's own 33 buckets (floor(10 * 1.8^i)), so dashboards
made for OVMS read the same histograms. Every inference is counted, whether it came from a
KServe request, a pipeline node or a graph's OpenVINOInferenceCalculator, as in OVMS.
"""

from __future__ import annotations

import math

from servables.runtime.histogram import Tally

OVMS_US_BUCKETS = tuple(float(math.floor(10 * 1.8**i)) for i in range(33))


class InferenceStats:
    """See the module docstring; times are observed in seconds and kept in microseconds."""

    __slots__ = ("active", "current_requests", "inference_us", "waiting_us")

    def __init__(self) -> None:
        self.current_requests = 0  # calls of infer() not finished
        self.active = 0  # infer requests taken from the pool (or the inline one) and running
        self.waiting_us = Tally(OVMS_US_BUCKETS)
        self.inference_us = Tally(OVMS_US_BUCKETS)

    def waited(self, seconds: float) -> None:
        self.waiting_us.observe(seconds * 1e6)

    def inferred(self, seconds: float) -> None:
        self.inference_us.observe(seconds * 1e6)
