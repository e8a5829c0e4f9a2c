"""Learner groups: two gloo ranks on loopback, spawned with torch.multiprocessing as torchrun would start them.

Each rank compares its DistributedDataParallel gradient with a single learner's on the concatenated batch,
computed in the same process from the same seed, and raises when they differ: mp.spawn re-raises a rank's
failure here. The weights checksum and the config check must refuse on every rank.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from rlfleet.launcher.up import free_port
from rlfleet.learner_worker.algorithms.a2c import A2C
from rlfleet.learner_worker.algorithms.dqn import DQN
from rlfleet.learner_worker.algorithms.impala import Impala
from rlfleet.learner_worker.algorithms.ppo import PPO
from rlfleet.learner_worker.algorithms.r2d2 import R2D2
from rlfleet.learner_worker.algorithms.recurrent_impala import RecurrentImpala
from rlfleet.learner_worker.algorithms.recurrent_ppo import RecurrentPPO
from rlfleet.learner_worker.algorithms.sac import SAC
from rlfleet.learner_worker.distributed import Group, GroupMismatch, digest, next_step
from rlfleet.learner_worker.obsnorm import RunningStats
from rlfleet.shared.algorithms.a2c import A2CParams
from rlfleet.shared.algorithms.dqn import DQNParams
from rlfleet.shared.algorithms.impala import ImpalaParams
from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.algorithms.r2d2 import R2D2Params
from rlfleet.shared.algorithms.recurrent_impala import RecurrentImpalaParams
from rlfleet.shared.algorithms.recurrent_ppo import RecurrentPPOParams
from rlfleet.shared.algorithms.sac import SACParams
from rlfleet.shared.config.base import CoreConfig, NetConfig
from rlfleet.shared.payloads.spaces import DiscreteActions, ObsSpace, Spaces
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.learner_data import IMAGE_SHAPE, N_ACTIONS, OBS_DIM, make_batch, make_chunk, make_image_chunk
from tests.support.policies import EPSILON_GREEDY, PENDULUM, SAMPLING, flat_spaces
from tests.support.sequences import HIDDEN as SEQ_HIDDEN
from tests.support.sequences import SPACES as SEQ_SPACES
from tests.support.sequences import StoredSequences, core_chunk

CPU = torch.device("cpu")
WORLD = 2
CONFIG = digest([b"the same learner task"])
PENDULUM_BEHAVIOUR = SAMPLING.model_copy(update={"head": "gaussian"})
TANH = Behaviour(head="tanh_gaussian", sample=False)
TIMEOUT = timedelta(seconds=30)  # a rank waiting on a collective fails instead of hanging the test


def _rank_main(rank: int, port: int, body: Callable[[int], None]) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    body(rank)


def run_group(body: Callable[[int], None]) -> None:
    """Run `body(rank)` in WORLD fresh processes with torchrun's environment; a rank's exception fails the test."""
    mp.spawn(_rank_main, args=(free_port(), body), nprocs=WORLD, join=True)


def grads(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in module.parameters()]


def assert_close(got: list[torch.Tensor], want: list[torch.Tensor], what: str) -> None:
    for index, (a, b) in enumerate(zip(got, want, strict=True)):
        if not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"{what}: tensor {index} differs by {(a - b).abs().max().item():.3g}")


def assert_differ(got: list[torch.Tensor], want: list[torch.Tensor], what: str) -> None:
    if all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, want, strict=True)):
        raise AssertionError(f"{what}: expected a difference (the comparison would not catch a missing average)")


def rows(batch: dict[str, np.ndarray], rank: int) -> dict[str, np.ndarray]:
    share = len(batch["actions"]) // WORLD
    return {k: v[rank * share:(rank + 1) * share] for k, v in batch.items()}


def weighted_batch(seed: int, size: int = 64) -> dict[str, np.ndarray]:
    """A replay batch with importance weights, as prioritized replay sends (normalised by the buffer)."""
    batch = make_batch(seed, size)
    batch["weights"] = np.random.default_rng(seed + 100).uniform(0.2, 1.0, size).astype(np.float32)
    return batch


def _dqn_body(rank: int) -> None:
    group = Group.join(CPU, CONFIG, TIMEOUT)
    cfg = DQNParams(net=NetConfig(hidden=(16, 16)), learning_rate=1e-3, target_update_every=2, batch_size=64)
    spaces = flat_spaces(4, 3)
    single, member, alone = (DQN(spaces, cfg, EPSILON_GREEDY, seed=0) for _ in range(3))
    member.join(group)

    full = weighted_batch(1)
    single.td_loss(full)[0].backward()
    member.td_loss(rows(full, rank))[0].backward()
    alone.td_loss(rows(full, rank))[0].backward()
    assert_close(grads(member.nets.online), grads(single.nets.online), "DQN: averaged gradient vs one learner's")
    assert_differ(grads(alone.nets.online), grads(single.nets.online), "DQN: one rank's own gradient")

    for step in range(1, 6):  # clipping, Adam and target syncs see the same gradients as the single learner
        full = weighted_batch(10 + step)
        single.update(full)
        member.update(rows(full, rank))
        group.check_weights(step)
    for net in ("online", "target"):
        assert_close(list(getattr(member.nets, net).parameters()), list(getattr(single.nets, net).parameters()),
                     f"DQN {net} weights after 5 steps")

    if rank == 1:  # one rank drifts: every rank must refuse to go on
        with torch.no_grad():
            next(member.nets.online.parameters()).add_(1e-6)
    with pytest.raises(GroupMismatch, match="weights after update 6"):
        group.check_weights(6)
    group.leave()


def test_dqn_group_averages_gradients_of_the_concatenated_batch_and_keeps_weights_identical() -> None:
    run_group(_dqn_body)


def _r2d2_body(rank: int) -> None:
    group = Group.join(CPU, CONFIG, TIMEOUT)
    cfg = R2D2Params(net=NetConfig(hidden=(16,), core=CoreConfig(kind="gru", hidden=SEQ_HIDDEN)), n_step=3,
                     batch_size=4, learning_rate=1e-3, target_update_every=2)
    single, member, alone = (R2D2(SEQ_SPACES, cfg, EPSILON_GREEDY, seed=0) for _ in range(3))
    member.join(group)
    with tempfile.TemporaryDirectory() as tmp:
        chunks = [core_chunk(1), core_chunk(2)]
        for chunk in chunks:  # no episode starts: a sequence inside the burn-in has no trained row
            chunk["terminated"][:] = chunk["truncated"][:] = False
        stored = StoredSequences(Path(tmp), chunks)
        cache = stored.cache(burn_in=3)
        # rank 0's first sequence lies inside the burn-in: 1 sequence with trained rows there, 2 on rank 1
        sample = stored.sample([(0, 0, 0), (0, 5, 1), (1, 4, 1), (1, 6, 0)], length=2, batch_size=4)
        prepared = [cache.get(ref) for ref in sample.chunks]
        full = cache.batch(sample, prepared, [0, 1, 2, 3])
        mine = cache.batch(sample, prepared, [2 * rank, 2 * rank + 1])
    assert full["trained"].any(axis=0).tolist() == [False, True, True, True]

    single.td_loss(full)[0].backward()
    member.td_loss(mine)[0].backward()
    alone.td_loss(mine)[0].backward()
    assert_close(grads(member.nets.online), grads(single.nets.online), "R2D2: averaged gradient vs one learner's")
    assert_differ(grads(alone.nets.online), grads(single.nets.online), "R2D2: one rank's own gradient")

    for step in range(1, 4):  # clipping, Adam and target syncs see the same gradients as the single learner
        single.update(full)
        member.update(mine)
        group.check_weights(step)
    for net in ("online", "target"):
        assert_close(list(getattr(member.nets, net).parameters()), list(getattr(single.nets, net).parameters()),
                     f"R2D2 {net} weights after 3 steps")
    group.leave()


def test_r2d2_group_averages_over_the_group_s_sequences_however_the_untrained_ones_fall() -> None:
    run_group(_r2d2_body)


def ppo_batch(seed: int, size: int, dims: int, actions: np.ndarray) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(seed)
    columns = {"obs": rng.normal(size=(size, dims)), "actions": actions, "logp": np.log(rng.uniform(0.2, 0.6, size)),
               "advantages": rng.normal(1.0, 2.0, size), "targets": rng.normal(size=size)}
    return {k: torch.from_numpy(np.asarray(v, np.int64 if k == "actions" and v.dtype.kind == "i" else np.float32))
            for k, v in columns.items()}


def _ppo_body(rank: int) -> None:
    group = Group.join(CPU, CONFIG, TIMEOUT)
    cfg = PPOParams(net=NetConfig(hidden=(16,)), minibatch_size=16, epochs=2, entropy_coef=0.01)
    rng = np.random.default_rng(0)
    for spaces, behaviour, actions in ((flat_spaces(4, 3), SAMPLING, rng.integers(0, 3, 40)),
                                       (PENDULUM, PENDULUM_BEHAVIOUR, rng.uniform(-2, 2, (40, 1)))):
        single, member, alone = (PPO(spaces, cfg, behaviour, seed=0) for _ in range(3))
        member.join(group)
        full = ppo_batch(1, 40, spaces.obs.shape[0], actions)
        mine = torch.arange(0, 24) if rank == 0 else torch.arange(24, 40)  # unequal shares: 24 and 16 rows
        single.minibatch_loss(full, torch.arange(40))[0].backward()
        member.minibatch_loss(full, mine)[0].backward()
        alone.minibatch_loss(full, mine)[0].backward()
        what = f"PPO ({behaviour.head})"
        assert_close(grads(member.actor) + grads(member.critic), grads(single.actor) + grads(single.critic),
                     f"{what}: averaged gradient vs one learner's, advantages normalised over both ranks")
        assert_differ(grads(alone.actor), grads(single.actor), f"{what}: one rank's own gradient")

    # Observation statistics: every rank folds in both ranks' rows, exactly as one learner folds in all of them.
    rows = np.random.default_rng(5).normal(3.0, 2.0, (30, 4))
    mine_rows = rows[:18] if rank == 0 else rows[18:]
    alone_stats, group_stats = RunningStats((4,), 5.0), RunningStats((4,), 5.0)
    alone_stats.update(rows)
    group_stats.merge(*group.moments(mine_rows))
    if not (np.allclose(group_stats.mean, alone_stats.mean) and np.allclose(group_stats.var, alone_stats.var)):
        raise AssertionError("observation statistics of the group differ from one learner's")

    # The loop's step is agreed: one rank without a batch makes all wait, one stopping rank stops all.
    agreed = [next_step(group, True, True), next_step(group, True, rank == 0), next_step(group, rank == 0, True)]
    if agreed != ["train", "wait", "stop"]:
        raise AssertionError(f"rank {rank} decided {agreed}")

    member = PPO(flat_spaces(4, 3), cfg, SAMPLING, seed=rank)  # different seeds: DDP starts every rank at rank 0's
    member.join(group)
    for step in range(1, 4):  # ranks with different row counts still take equal minibatch counts
        member.update([make_chunk(10 * step + rank, steps=8 + 4 * rank)])
        group.check_weights(step)
    group.leave()


def test_ppo_group_averages_gradients_with_all_reduced_advantage_statistics() -> None:
    run_group(_ppo_body)


def _ppo_shared_trunk_body(rank: int) -> None:
    group = Group.join(CPU, CONFIG, TIMEOUT)
    spaces = Spaces(obs=ObsSpace(shape=IMAGE_SHAPE, dtype="uint8"), action=DiscreteActions(n=3))
    cfg = PPOParams(net=NetConfig(hidden=(16,), encoder={"kind": "impala", "channels": [4]}), minibatch_size=16,
                    epochs=2, entropy_coef=0.01)
    single, member = (PPO(spaces, cfg, SAMPLING, seed=0) for _ in range(2))
    assert member.trunk == "shared"
    member.join(group)
    full = ppo_batch(1, 40, 1, np.random.default_rng(0).integers(0, 3, 40))
    full["obs"] = torch.from_numpy(np.random.default_rng(2).integers(0, 256, (40, *IMAGE_SHAPE)).astype(np.uint8))
    mine = torch.arange(0, 24) if rank == 0 else torch.arange(24, 40)
    single.minibatch_loss(full, torch.arange(40))[0].backward()
    member.minibatch_loss(full, mine)[0].backward()
    assert_close(grads(member.model), grads(single.model), "PPO, shared trunk: averaged gradient vs one learner's")
    member.update([make_image_chunk(3 + rank)])
    group.check_weights(1)
    group.leave()


def test_ppo_group_trains_a_shared_trunk() -> None:
    run_group(_ppo_shared_trunk_body)
def stored(chunk: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """`chunk` with a GRU(8) state stored for each env's first row."""
    envs = chunk["rewards"].shape[1]
    return {**chunk, "core_state": np.random.default_rng(seed).uniform(-1, 1, (envs, 8)).astype(np.float32)}


def _recurrent_ppo_body(rank: int) -> None:
    """recurrent_ppo: a minibatch is the union of every rank's sequences (3 and 2 here), its loss the mean over the
    union's rows; then updates on chunks of different sizes per rank (24 and 12 rows, so different sequence counts
    and lengths) take the same number of steps on every rank and keep the weights equal."""
    group = Group.join(CPU, CONFIG, TIMEOUT)
    spaces = flat_spaces(OBS_DIM, N_ACTIONS)
    cfg = RecurrentPPOParams(net=NetConfig(hidden=(16,), activation="tanh", core=CoreConfig(kind="gru", hidden=8)),
                             minibatch_size=16, epochs=2, entropy_coef=0.01)
    single, member, alone = (RecurrentPPO(spaces, cfg, SAMPLING, seed=0) for _ in range(3))
    member.join(group)
    seqs = single.sequences([stored(make_chunk(1, steps=8, envs=3, invalid=0.1), 1),
                             stored(make_chunk(2, steps=8, envs=2), 2)], cfg.gamma, cfg.gae_lambda)
    mine = torch.arange(0, 3) if rank == 0 else torch.arange(3, 5)
    single.minibatch_loss(seqs, torch.arange(5))[0].backward()  # type: ignore[index]
    member.minibatch_loss(seqs, mine)[0].backward()  # type: ignore[index]
    alone.minibatch_loss(seqs, mine)[0].backward()  # type: ignore[index]
    assert_close(grads(member.model), grads(single.model), "recurrent_ppo: averaged gradient vs one learner's")
    assert_differ(grads(alone.model), grads(single.model), "recurrent_ppo: one rank's own gradient")
    for step in range(1, 4):
        chunk = make_chunk(10 * step + rank, steps=8 if rank == 0 else 6, envs=3 if rank == 0 else 2)
        member.update([stored(chunk, step)])
        group.check_weights(step)
    group.leave()


def test_recurrent_ppo_group_averages_over_every_rank_s_sequences() -> None:
    run_group(_recurrent_ppo_body)


def _chunk_learners_body(rank: int) -> None:
    """A2C and IMPALA (also with APPO's clip and advantages normalised over the whole batch, and with a GRU core):
    each rank trains on the chunks it took (8 and 12 steps here, shares that differ, padded side by side for the
    recurrent learner); the group steps as one learner on all of them."""
    group = Group.join(CPU, CONFIG, TIMEOUT)
    spaces = flat_spaces(OBS_DIM, N_ACTIONS)
    net = NetConfig(hidden=(16,))
    for make in (lambda seed: A2C(spaces, A2CParams(net=net, entropy_coef=0.01), SAMPLING, seed),
                 lambda seed: Impala(spaces, ImpalaParams(net=net, epochs=2, entropy_coef=0.01), SAMPLING, seed),
                 lambda seed: Impala(spaces, ImpalaParams(net=net, epochs=2, entropy_coef=0.01, clip_ratio=0.1,
                                                          normalize_advantages=True), SAMPLING, seed),
                 lambda seed: RecurrentImpala(spaces, RecurrentImpalaParams(
                     net=NetConfig(hidden=(16,), core=CoreConfig(kind="gru", hidden=8)), epochs=2, clip_ratio=0.1,
                     normalize_advantages=True), SAMPLING, seed)):
        single, member = make(0), make(rank)  # different seeds: DDP starts every rank at rank 0's weights
        member.join(group)
        for step in range(1, 4):
            chunks = [make_chunk(10 * step, steps=8, invalid=0.1), make_chunk(10 * step + 1, steps=12)]
            for seed, chunk in enumerate(chunks):  # stored core states, read by the recurrent learner alone
                envs = chunk["rewards"].shape[1]
                chunk["core_state"] = np.random.default_rng(seed).uniform(-1, 1, (envs, 8)).astype(np.float32)
            single.update(chunks)
            member.update([chunks[rank]])
            group.check_weights(step)
        what = type(single).__name__
        assert_close(list(member.actor.parameters()), list(single.actor.parameters()), f"{what} actor after 3 steps")
        assert_close(list(member.critic.parameters()), list(single.critic.parameters()),
                     f"{what} critic after 3 steps")
    group.leave()


def test_a2c_and_impala_groups_step_as_one_learner_on_every_rank_s_chunks() -> None:
    run_group(_chunk_learners_body)


def _impala_minibatches_body(rank: int) -> None:
    """IMPALA with minibatches: ranks bringing different numbers of rows still take as many steps as each other
    (each step's all-reduce waits for every rank), and their weights stay identical."""
    group = Group.join(CPU, CONFIG, TIMEOUT)
    cfg = ImpalaParams(net=NetConfig(hidden=(16,)), epochs=2, minibatch_size=16, clip_ratio=0.1,
                       normalize_advantages=True)
    member = Impala(flat_spaces(OBS_DIM, N_ACTIONS), cfg, SAMPLING, seed=rank)  # DDP starts all at rank 0's
    member.join(group)
    for step in range(1, 4):  # 32 and 64 rows: alone, one rank would take 2 steps an epoch and the other 4
        member.update([make_chunk(10 * step + rank, steps=8 + 8 * rank)])
        group.check_weights(step)
    for step in range(4, 6):  # 4 rows and 128: 9 steps an epoch, most of them on none of rank 0's rows
        losses = member.update([make_chunk(10 * step + rank, steps=1 + 31 * rank)])
        group.check_weights(step)
        if not all(np.isfinite(value) for value in losses.values()):
            raise AssertionError(f"rank {rank} reported {losses}")
    group.leave()


def test_impala_group_with_minibatches_steps_together_on_unequal_shares() -> None:
    run_group(_impala_minibatches_body)


def sac_batch(seed: int, size: int = 64) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(size, 3)).astype(np.float32), "boot_obs": rng.normal(size=(size, 3)).astype(
        np.float32), "actions": rng.uniform(-1, 1, (size, 1)).astype(np.float32),
        "returns": rng.normal(size=size).astype(np.float32),
        "discount": np.where(rng.random(size) < 0.2, 0.0, 0.9).astype(np.float32)}


def _sac_body(rank: int) -> None:
    """SAC: the actor's and critics' gradients averaged, the temperature's all-reduced, and every rank drawing its
    rows of the whole batch's noise: the group's weights stay those of one learner on the whole batch."""
    group = Group.join(CPU, CONFIG, TIMEOUT)
    cfg = SACParams(net=NetConfig(hidden=(16,)), batch_size=64, learning_rate=1e-2, target_update_interval=1)
    single, member = (SAC(PENDULUM, cfg, TANH, seed=0) for _ in range(2))
    member.join(group)
    for step in range(1, 6):
        full = sac_batch(step)
        single.update(full)
        member.update(rows(full, rank))
        group.check_weights(step)
    assert_close(list(member.actor.parameters()), list(single.actor.parameters()), "SAC actor after 5 steps")
    assert_close(list(member.critics.parameters()), list(single.critics.parameters()), "SAC critics after 5 steps")
    assert_close(list(member.targets.parameters()), list(single.targets.parameters()), "SAC targets after 5 steps")
    assert_close([member.log_alpha], [single.log_alpha], "SAC temperature after 5 steps")
    group.leave()


def test_sac_group_steps_as_one_learner_on_the_whole_batch() -> None:
    run_group(_sac_body)


def _mismatched_config_body(rank: int) -> None:
    with pytest.raises(GroupMismatch, match="config"):
        Group.join(CPU, digest([f"config of rank {rank}".encode()]), TIMEOUT)
    assert not torch.distributed.is_initialized()


def test_a_rank_with_another_config_is_refused_by_every_rank() -> None:
    run_group(_mismatched_config_body)


def _peer_gone_body(rank: int) -> None:
    group = Group.join(CPU, CONFIG, TIMEOUT)
    if rank == 1:
        os._exit(0)  # vanishes without leaving, as a killed rank does
    started = time.monotonic()
    group.leave()  # the surviving rank still leaves cleanly: its own error, not the barrier's, is what it reports
    assert not torch.distributed.is_initialized()
    if time.monotonic() - started > TIMEOUT.total_seconds() / 2:
        raise AssertionError(f"leaving took {time.monotonic() - started:.1f} s: the barrier waited for a dead peer")


def test_a_rank_whose_peer_died_leaves_without_raising() -> None:
    run_group(_peer_gone_body)


def test_a_single_learner_steps_on_its_own_flags() -> None:
    assert [next_step(None, True, True), next_step(None, True, False), next_step(None, False, True)] == [
        "train", "wait", "stop"]


def test_joining_outside_torchrun_names_the_missing_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match="RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT"):
        Group.join(CPU, CONFIG)
