"""Samples-per-insert pacing (after Reverb's rate limiter), so neither learner nor collectors run away.

With `diff = (inserted - min_size) * spi - sampled`, a sample of n transitions is allowed while
`diff - n >= -spi * tolerance` and collectors are told to pause while `diff > spi * tolerance`. The ratio
therefore stays within a band whatever the number of collectors, which is what keeps an off-policy learner's
replay ratio (and so its sample efficiency) the same when the fleet scales.
"""

from __future__ import annotations


class RateLimiter:
    def __init__(self, min_size: int, samples_per_insert: float, tolerance: int) -> None:
        self.min_size = min_size
        self.spi = samples_per_insert
        self.tolerance = tolerance
        self.inserted = 0
        self.sampled = 0

    @property
    def _diff(self) -> float:
        return (self.inserted - self.min_size) * self.spi - self.sampled

    def can_sample(self, n: int) -> bool:
        return self.inserted >= self.min_size and self._diff - n >= -self.spi * self.tolerance

    def collectors_ahead(self) -> bool:
        return self.inserted >= self.min_size and self._diff > self.spi * self.tolerance

    def achieved_ratio(self) -> float:
        warm = self.inserted - self.min_size
        return self.sampled / warm if warm > 0 else 0.0
