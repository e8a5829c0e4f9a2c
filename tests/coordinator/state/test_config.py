"""coordinator.state.config.LiveConfig: the run's config as it stands, its plan derived again on a live change,
and the config journalled so a resumed run trains with what it last had."""

from __future__ import annotations

from pathlib import Path

from rlfleet.coordinator.state.config import LiveConfig
from rlfleet.shared.config.run_config import RunConfig
from tests.support.components import JournalFor
from tests.support.configs import make_config


def test_a_live_change_derives_the_behaviour_again_and_marks_the_config(run_config: RunConfig) -> None:
    live = LiveConfig(run_config)
    spaces, spec = live.plan.spaces, live.plan.spec
    assert not live.pending.dirty
    changed = make_config(run_config, collector={"epsilon": {**run_config.collector.epsilon.model_dump(), "end": 0.2}})
    live.apply(changed)
    assert live.config == changed and live.plan.config == changed and live.pending.dirty
    assert live.plan.behaviour == spec.behaviour(changed, spaces)
    assert live.plan.spaces is spaces  # the env is not built again


def test_the_config_survives_a_round_trip(run_config: RunConfig, tmp_path: Path) -> None:
    live = LiveConfig(run_config)
    journal = JournalFor(tmp_path / "journal.sqlite", live)
    changed = make_config(run_config, replay={"samples_per_insert": 2.0})
    live.apply(changed)
    journal.commit()
    stored = journal.stored()
    # the run context reads the config first (it decides what is built); loading then has nothing left to restore
    restored = LiveConfig(RunConfig.model_validate(stored.meta))
    restored.load_state_dict(stored, now=0.0)
    assert restored.config == changed and restored.plan.config == changed
