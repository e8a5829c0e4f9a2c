"""The data plane asks the sampler's traits (shared/config/samplers.py), never its name: queue pacing, whether
priority updates apply, whether draws are importance-weighted."""

from __future__ import annotations

import pytest

from rlfleet.coordinator.errors import Conflict
from rlfleet.coordinator.state.dataplane import DataPlane
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.config.samplers import SAMPLERS, SamplerKind
from tests.support.configs import small_run_config


def config_with(sampler: SamplerKind) -> RunConfig:
    data = small_run_config().model_dump()
    data["replay"]["sampler"] = sampler
    if SAMPLERS[sampler].queue:  # an on-policy queue: whole chunks, each consumed once
        data.update(algo={"name": "ppo"}, sampling={**data["sampling"], "unit": "chunk"})
        data["replay"]["max_use"] = 1
    return RunConfig.model_validate(data)


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_the_data_plane_follows_the_sampler_traits(sampler: SamplerKind) -> None:
    traits = SAMPLERS[sampler]
    data = DataPlane(config_with(sampler), idempotency_seconds=60.0, max_ids=1000)
    assert data.queue is traits.queue
    if traits.priorities:
        data.check_priorities_apply()
    else:
        with pytest.raises(Conflict, match=f"uses the {sampler} sampler; priorities apply only to "
                                           "replay.sampler=prioritized") as err:
            data.check_priorities_apply()
        assert err.value.status == 409
    data.limiter.sampled = 500_000  # half-way through beta's horizon: beta is 0.7 where draws are weighted
    assert data.status().beta == (pytest.approx(0.7) if traits.weighted else 1.0)
