"""shared.config.run_config: defaults, YAML loading with dotted overrides, strict validation, the epsilon schedule."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rlfleet.coordinator.overrides import parse_overrides
from rlfleet.shared.algorithms import DEFAULT, REGISTRY
from rlfleet.shared.config.run_config import (
    CollectorConfig,
    EpsilonSchedule,
    EvalConfig,
    RunConfig,
    chunk_rows_limit,
    dump_run_config,
    load_run_config,
)
from rlfleet.shared.wire import MAX_BODY_BYTES, ChunkReport, report_bytes_bound

REPO = Path(__file__).resolve().parents[3]


def _write(tmp_path: Path, doc: object, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


# ----- defaults and the shipped config ----------------------------------------------------------------------


def test_defaults_validate() -> None:
    cfg = RunConfig()
    assert RunConfig.model_validate(cfg.model_dump()) == cfg
    assert cfg.name == "run"
    assert cfg.evaluation.episodes % cfg.evaluation.num_envs == 0
    assert cfg.replay.min_transitions <= cfg.replay.capacity_transitions
    assert cfg.algo.net.hidden == (256, 256)


def test_empty_yaml_gives_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_run_config(path) == RunConfig()


def test_repo_config_loads() -> None:
    cfg = load_run_config(REPO / "configs" / "cartpole_dqn.yaml")
    assert cfg.name == "cartpole-dqn"
    assert cfg.env.id == "CartPole-v1"
    assert cfg.env.solve_threshold == 475
    assert cfg.collector.num_envs == 8
    assert cfg.collector.epsilon == EpsilonSchedule(start=1.0, end=0.04, decay_env_steps=10_000)
    assert cfg.replay.tolerance_transitions == 4096
    assert cfg.algo.net.hidden == (256, 256)
    assert cfg.budget.max_env_steps == 400_000
    assert cfg.budget.max_wall_seconds == 900


def test_dump_and_load_round_trip(tmp_path: Path, run_config: RunConfig) -> None:
    path = tmp_path / "dumped.yaml"
    path.write_text(dump_run_config(run_config))
    assert load_run_config(path) == run_config


def test_config_is_frozen() -> None:
    cfg = RunConfig()
    with pytest.raises(ValidationError):
        cfg.seed = 5  # type: ignore[misc]


# ----- overrides -------------------------------------------------------------------------------------------


def test_dotted_overrides_applied(tmp_path: Path) -> None:
    path = _write(tmp_path, {"seed": 1, "budget": {"max_env_steps": 5000}})
    cfg = load_run_config(
        path,
        {"seed": 3, "budget.max_env_steps": 1000, "collector.epsilon.end": 0.1, "dqn.net.hidden": [8, 4],
         "env.solve_threshold": 200},
    )
    assert cfg.seed == 3
    assert cfg.budget.max_env_steps == 1000
    assert cfg.budget.max_wall_seconds == 1_800.0  # sibling keeps its default
    assert cfg.collector.epsilon.end == 0.1
    assert cfg.collector.epsilon.start == 1.0
    assert cfg.algo.net.hidden == (8, 4)
    assert cfg.env.solve_threshold == 200


def test_an_algo_override_on_a_config_without_algo_tunes_the_default_algorithm(tmp_path: Path) -> None:
    """`--set algo.learning_rate=...` on a config with no algo section used to fail on the union's missing tag."""
    path = tmp_path / "bare.yaml"
    path.write_text("name: bare\nenv: {id: CartPole-v1}\n")
    cfg = load_run_config(path, {"algo.learning_rate": 0.01})
    assert cfg.algo.name == DEFAULT and cfg.algo.learning_rate == 0.01  # type: ignore[attr-defined]
    assert RunConfig.model_validate({"algo": {"gamma": 0.9}}).algo.name == DEFAULT


def test_overrides_on_top_of_repo_config_via_parse_overrides() -> None:
    overrides = parse_overrides("seed=7; replay.min_transitions=500\nname=my-run;algo.double_q=false")
    assert overrides == {"seed": 7, "replay.min_transitions": 500, "name": "my-run", "algo.double_q": False}
    cfg = load_run_config(REPO / "configs" / "cartpole_dqn.yaml", overrides)
    assert (cfg.seed, cfg.replay.min_transitions, cfg.name, cfg.algo.double_q) == (7, 500, "my-run", False)
    assert cfg.replay.capacity_transitions == 100_000  # untouched value from the file


@pytest.mark.parametrize("text", ["seed", "=3", "seed:3", " = 1"])
def test_parse_overrides_rejects_malformed_items(text: str) -> None:
    with pytest.raises(ValueError, match="key=value"):
        parse_overrides(text)


def test_parse_overrides_empty_and_whitespace() -> None:
    assert parse_overrides("") == {}
    assert parse_overrides(" ; ;\n") == {}


def test_override_with_invalid_value_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, {})
    with pytest.raises(ValidationError, match="max_env_steps"):
        load_run_config(path, {"budget.max_env_steps": 0})


def test_override_with_unknown_key_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, {})
    with pytest.raises(ValidationError, match="typo"):
        load_run_config(path, {"dqn.typo": 1})


@pytest.mark.parametrize(("doc", "override"), [({"seed": 0}, "seed.x"), ({"env": None}, "env.id"),
                                               ({"seed": 0}, "seed.x.y")])
def test_override_through_a_non_mapping_is_a_clear_value_error(
    tmp_path: Path, doc: dict, override: str
) -> None:
    path = _write(tmp_path, doc)
    with pytest.raises(ValueError, match=override.split(".")[0]):
        load_run_config(path, {override: 1})


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = _write(tmp_path, [1, 2])
    with pytest.raises(ValueError, match="top level must be a mapping"):
        load_run_config(path)


# ----- validation -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        {"unknown": 1},
        {"env": {"id": "CartPole-v1", "render": True}},
        {"collector": {"epsilon": {"start": 1.0, "halflife": 3}}},
        {"replay": {"capacity": 10}},
        {"budget": {"max_steps": 10}},
        {"evaluation": {"episode": 10}},
    ],
)
def test_unknown_keys_rejected(tmp_path: Path, doc: dict) -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        load_run_config(_write(tmp_path, doc))


@pytest.mark.parametrize(
    "doc",
    [
        {"name": "../escape"},
        {"name": ""},
        {"name": "a/b"},
        {"collector": {"num_envs": 0}},
        {"collector": {"num_envs": 257}},
        {"collector": {"epsilon": {"start": 1.5}}},
        {"collector": {"epsilon": {"end": -0.1}}},
        {"collector": {"epsilon": {"decay_env_steps": 0}}},
        {"replay": {"samples_per_insert": 0}},
        {"dqn": {"gamma": 0}},
        {"algo": {"name": "dqn", "gamma": 1.01}},
        {"algo": {"name": "dqn", "learning_rate": 0}},
        {"algo": {"name": "dqn", "unknown_knob": 1}},
        {"budget": {"max_wall_seconds": 0}},
        {"env": {"solve_threshold": float("nan")}},
        {"env": {"solve_threshold": float("inf")}},
        {"dqn": {"max_grad_norm": float("inf")}},
    ],
    ids=str,
)
def test_out_of_range_values_rejected(tmp_path: Path, doc: dict) -> None:
    with pytest.raises(ValidationError):
        load_run_config(_write(tmp_path, doc))


# ----- the algorithm section -----------------------------------------------------------------------------------


def test_the_algorithm_is_a_named_section_of_its_own_parameters(tmp_path: Path) -> None:
    doc = {"algo": {"name": "ppo", "epochs": 3, "net": {"hidden": [8]}}, "sampling": {"unit": "chunk"},
           "replay": {"sampler": "fifo", "max_use": 1}}
    cfg = load_run_config(_write(tmp_path, doc), {"algo.clip_range": 0.1})
    assert (cfg.algo.name, cfg.algo.epochs, cfg.algo.net.hidden, cfg.algo.clip_range) == ("ppo", 3, (8,), 0.1)
    assert load_run_config(_write(tmp_path, yaml.safe_load(dump_run_config(cfg)))) == cfg


def test_configs_of_earlier_releases_still_load(tmp_path: Path) -> None:
    """`algo: ppo` with a `ppo:` section, and run dumps that held every algorithm's section."""
    doc = {"algo": "ppo", "ppo": {"epochs": 3}, "dqn": {"gamma": 0.5}, "sampling": {"unit": "chunk"},
           "replay": {"sampler": "fifo", "max_use": 1}}
    cfg = load_run_config(_write(tmp_path, doc))
    assert cfg.algo.name == "ppo" and cfg.algo.epochs == 3
    assert load_run_config(_write(tmp_path, {"dqn": {"n_step": 5}})).algo.n_step == 5  # dqn is the default


def test_an_unknown_algorithm_lists_the_registered_ones(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=", ".join(f"'{name}'" for name in sorted(REGISTRY))):
        load_run_config(_write(tmp_path, {"algo": {"name": "a3c"}}))


@pytest.mark.parametrize(("doc", "message"), [
    ({"algo": {"name": "dqn"}, "sampling": {"unit": "chunk"}}, "dqn trains on transitions: set sampling.unit"),
    ({"algo": {"name": "ppo"}}, "ppo trains on whole chunks: set sampling.unit=chunk"),
    ({"algo": {"name": "ppo"}, "sampling": {"unit": "chunk"}}, "ppo consumes each chunk once: set replay.sampler"),
])
def test_buffer_settings_the_algorithm_cannot_train_on_are_refused(tmp_path: Path, doc: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        load_run_config(_write(tmp_path, doc))


PPO_QUEUE = {"sampling": {"unit": "chunk"}, "replay": {"sampler": "fifo", "max_use": 1}}


@pytest.mark.parametrize(("doc", "message"), [
    ({"algo": {"name": "dqn", "batch_size": 64}, "learner": {"replicas": 3}},
     r"algo.batch_size \(64\) must be a multiple of learner.replicas \(3\)"),
    ({**PPO_QUEUE, "algo": {"name": "ppo", "minibatch_size": 100}, "learner": {"replicas": 8}},
     r"algo.minibatch_size \(100\) must be a multiple of learner.replicas \(8\)"),
    ({"algo": {"name": "es"}, "learner": {"replicas": 2}},
     r"es trains in one learner process: set learner.replicas=1 \(got 2\)"),
    ({"algo": {"name": "sac", "batch_size": 255}, "learner": {"replicas": 2}},
     r"algo.batch_size \(255\) must be a multiple of learner.replicas \(2\)"),
    ({"deterministic": True, "learner": {"replicas": 2}}, "deterministic runs train in one learner process"),
    ({"learner": {"replicas": 0}}, "learner.replicas"),
    ({"learner": {"replicas": 65}}, "learner.replicas"),
])
def test_learner_groups_the_batch_cannot_be_split_for_are_refused(tmp_path: Path, doc: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        load_run_config(_write(tmp_path, doc))


@pytest.mark.parametrize("doc", [
    {"algo": {"name": "dqn", "batch_size": 64}, "learner": {"replicas": 4}},
    {**PPO_QUEUE, "algo": {"name": "ppo", "minibatch_size": 256}, "learner": {"replicas": 2}},
    {**PPO_QUEUE, "algo": {"name": "a2c"}, "learner": {"replicas": 2}},
    {**PPO_QUEUE, "algo": {"name": "impala"}, "learner": {"replicas": 2}},
    {"algo": {"name": "sac", "batch_size": 256}, "learner": {"replicas": 2}},
])
def test_learner_groups_that_split_the_batch_evenly_load(tmp_path: Path, doc: dict) -> None:
    assert load_run_config(_write(tmp_path, doc)).learner.replicas == doc["learner"]["replicas"]


def test_evaluation_episodes_must_be_multiple_of_num_envs(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as info:
        load_run_config(_write(tmp_path, {"evaluation": {"episodes": 10, "num_envs": 4}}))
    message = str(info.value)
    assert "evaluation.episodes (10)" in message
    assert "evaluation.num_envs (4)" in message
    assert "multiple" in message


@pytest.mark.parametrize(("episodes", "num_envs"), [(10, 10), (12, 4), (7, 1), (1000, 250)])
def test_evaluation_even_split_accepted(episodes: int, num_envs: int) -> None:
    cfg = EvalConfig(episodes=episodes, num_envs=num_envs)
    assert cfg.episodes // cfg.num_envs * cfg.num_envs == episodes


@pytest.mark.parametrize(("episodes", "num_envs"), [(1, 2), (9, 2), (10, 3)])
def test_evaluation_uneven_split_rejected(episodes: int, num_envs: int) -> None:
    with pytest.raises(ValidationError, match=rf"episodes \({episodes}\).*num_envs \({num_envs}\)"):
        EvalConfig(episodes=episodes, num_envs=num_envs)


def test_a_held_out_test_needs_two_episodes_to_show_a_spread() -> None:
    with pytest.raises(ValidationError, match="test_episodes"):
        EvalConfig(test_episodes=1, test_num_envs=1)
    assert EvalConfig(test_episodes=2, test_num_envs=1).test_episodes == 2


# ----- chunk size against the wire and the buffer -------------------------------------------------------------


def _le(model: type, field: str) -> int:
    return next(int(m.le) for m in model.model_fields[field].metadata if hasattr(m, "le"))


def test_chunk_rows_limit_is_the_chunk_reports_bound() -> None:
    limit = chunk_rows_limit()
    assert limit == _le(ChunkReport, "env_steps") == 1_000_000
    fields = {"chunk_id": "c", "worker_id": "w", "task_id": "t", "payload_path": "chunks/t/c.msgpack",
              "sha256": "0" * 64, "size_bytes": 1, "policy_version": 0}
    ChunkReport(env_steps=limit, **fields)
    with pytest.raises(ValidationError):
        ChunkReport(env_steps=limit + 1, **fields)


def test_num_envs_can_never_exceed_what_a_chunk_report_carries() -> None:
    """collector.num_envs is bounded tighter than ChunkReport.num_envs, so no config check is needed for it;
    this fails if someone raises the first above the second."""
    assert _le(CollectorConfig, "num_envs") <= _le(ChunkReport, "num_envs")


def test_chunk_larger_than_a_chunk_report_is_refused_at_load(tmp_path: Path) -> None:
    doc = {"collector": {"num_envs": 256, "chunk_steps": 4096}, "replay": {"capacity_transitions": 2_000_000}}
    with pytest.raises(ValidationError) as info:
        load_run_config(_write(tmp_path, doc))
    message = str(info.value)
    assert "collector.num_envs x collector.chunk_steps = 256 x 4096 = 1,048,576 rows" in message
    assert "1,000,000 rows one chunk report may carry" in message
    assert "collector.chunk_steps <= 181" in message  # within the rows (3906) and a report's bytes (181)
    fixed = load_run_config(_write(tmp_path, doc), {"collector.chunk_steps": 181})  # what the message said
    assert fixed.collector.num_envs * fixed.collector.chunk_steps <= chunk_rows_limit()


def test_chunk_whose_report_may_pass_the_request_limit_is_refused_at_load(tmp_path: Path) -> None:
    """64 envs x 1024 steps: a report may list 65,536 episode ends and episodes, above the 4 MiB body limit, so
    every batch, even every lone report of a short-episode env, would be refused (413) and its payload deleted."""
    doc = {"collector": {"num_envs": 64, "chunk_steps": 1024}, "replay": {"capacity_transitions": 1_000_000}}
    with pytest.raises(ValidationError) as info:
        load_run_config(_write(tmp_path, doc))
    message = str(info.value)
    assert "64 x 1024 = 65,536 rows: its report may take 5,900,142 bytes" in message
    assert "4,194,304-byte request limit" in message and "collector.chunk_steps <= 727" in message
    load_run_config(_write(tmp_path, doc), {"collector.chunk_steps": 727})  # what the message said
    assert report_bytes_bound(64, 64 * 727) <= MAX_BODY_BYTES < report_bytes_bound(64, 64 * 728)


def test_chunk_larger_than_the_buffer_is_refused_at_load(tmp_path: Path) -> None:
    doc = {"collector": {"num_envs": 8, "chunk_steps": 256},
           "replay": {"capacity_transitions": 2000, "min_transitions": 100}}
    with pytest.raises(ValidationError) as info:
        load_run_config(_write(tmp_path, doc))
    message = str(info.value)
    assert "8 x 256 = 2,048 rows does not fit in replay.capacity_transitions (2,000)" in message
    assert "at least 2048" in message and "collector.chunk_steps <= 250" in message
    load_run_config(_write(tmp_path, doc), {"collector.chunk_steps": 250})
    load_run_config(_write(tmp_path, doc), {"replay.capacity_transitions": 2048})  # exactly one chunk fits


def test_buffer_smaller_than_num_envs_suggests_fewer_envs(tmp_path: Path) -> None:
    doc = {"collector": {"num_envs": 8, "chunk_steps": 1}, "replay": {"capacity_transitions": 4, "min_transitions": 1}}
    with pytest.raises(ValidationError, match=r"collector.num_envs <= 4"):
        load_run_config(_write(tmp_path, doc))


# ----- epsilon schedule -------------------------------------------------------------------------------------


def test_epsilon_endpoints() -> None:
    sched = EpsilonSchedule(start=1.0, end=0.04, decay_env_steps=10_000)
    assert sched.value(0) == 1.0
    assert sched.value(-50) == 1.0  # negative step counts clamp to the start
    assert sched.value(5_000) == pytest.approx(0.52)
    assert sched.value(10_000) == pytest.approx(0.04)
    assert sched.value(10**9) == pytest.approx(0.04)


def test_epsilon_single_step_decay() -> None:
    sched = EpsilonSchedule(start=0.5, end=0.1, decay_env_steps=1)
    assert sched.value(0) == 0.5
    assert sched.value(1) == pytest.approx(0.1)
    assert sched.value(2) == pytest.approx(0.1)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    start=st.floats(0, 1),
    end=st.floats(0, 1),
    decay=st.integers(1, 100_000),
    steps=st.lists(st.integers(-1000, 300_000), min_size=2, max_size=20),
)
def test_epsilon_monotone_and_bounded(start: float, end: float, decay: int, steps: list[int]) -> None:
    sched = EpsilonSchedule(start=start, end=end, decay_env_steps=decay)
    lo, hi = min(start, end), max(start, end)
    values = [sched.value(s) for s in sorted(steps)]
    for v in values:
        assert lo - 1e-12 <= v <= hi + 1e-12
    pairs = list(zip(values, values[1:], strict=False))
    if end <= start:
        assert all(b <= a + 1e-12 for a, b in pairs)
    else:
        assert all(b >= a - 1e-12 for a, b in pairs)
    assert sched.value(decay) == pytest.approx(end, abs=1e-12)
    assert sched.value(0) == start
