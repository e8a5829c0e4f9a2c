"""Policy-version lag of the data: how many versions behind the latest policy each chunk and each sampled
item is. The numbers behind `max_policy_lag`, visible in /v1/status."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from rlfleet.shared.wire import PolicyLagStatus

TAIL = 8  # the histogram lumps lags of TAIL and more together


class LagStats:
    def __init__(self) -> None:
        self.ingest: Counter[int] = Counter()
        self.ingest_max = 0
        self.ingest_sum = 0
        self.sampled_count = 0
        self.sampled_sum = 0
        self.sampled_max = 0

    def ingested(self, lag: int) -> None:
        self.ingest[min(max(lag, 0), TAIL)] += 1
        self.ingest_max = max(self.ingest_max, lag)
        self.ingest_sum += max(lag, 0)

    def sampled(self, lags: np.ndarray) -> None:
        if len(lags):
            self.sampled_count += len(lags)
            self.sampled_sum += int(lags.sum())
            self.sampled_max = max(self.sampled_max, int(lags.max()))

    def status(self) -> PolicyLagStatus:
        chunks = sum(self.ingest.values())
        return PolicyLagStatus(
            ingest_mean=self.ingest_sum / chunks if chunks else 0.0,
            ingest_max=self.ingest_max,
            sampled_mean=self.sampled_sum / self.sampled_count if self.sampled_count else 0.0,
            sampled_max=self.sampled_max,
            ingest_histogram={(f"{k}+" if k == TAIL else str(k)): n for k, n in sorted(self.ingest.items())},
        )

    def state(self) -> dict[str, Any]:
        return {"ingest": {str(k): n for k, n in self.ingest.items()}, "ingest_max": self.ingest_max,
                "ingest_sum": self.ingest_sum,
                "sampled": [self.sampled_count, self.sampled_sum, self.sampled_max]}

    def restore(self, state: dict[str, Any]) -> None:
        self.ingest = Counter({int(k): int(n) for k, n in state["ingest"].items()})
        self.ingest_max = int(state["ingest_max"])
        self.ingest_sum = int(state["ingest_sum"])
        self.sampled_count, self.sampled_sum, self.sampled_max = (int(x) for x in state["sampled"])
