"""The learner's own session loop in-process against a FakeCoordinator whose sample route serves real chunk files
from the run's store: the learner's main end to end without a coordinator process."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import numpy as np

from rlfleet.learner_worker import main as learner_main
from rlfleet.learner_worker.prefetch import MAX_CHUNKS_PER_TAKE
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.payloads.codec import encode_chunk
from rlfleet.shared.storage.layout import RunLayout, chunk_path
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import SampledChunk, SampleRequest, SampleResponse
from rlfleet.shared.worker.lifecycle import run_session
from tests.support.configs import small_run_config
from tests.support.fake_coordinator import FakeCoordinator, make_session, reply

T, N, OBS = 8, 2, 4  # steps and envs of a served chunk; CartPole observations


def prioritized() -> RunConfig:
    doc = small_run_config().model_dump(mode="json")
    doc["replay"]["sampler"] = "prioritized"
    return RunConfig.model_validate(doc)


def ppo_config() -> RunConfig:
    doc = small_run_config().model_dump(mode="json")
    doc.update(algo="ppo", sampling={"unit": "chunk", "force_sync": True})
    doc["replay"].update(sampler="fifo", max_use=1)
    doc["ppo"] = {"net": {"hidden": [8, 8], "activation": "tanh"}, "epochs": 1, "minibatch_size": 8,
                  "report_every": 1}  # the fake coordinator ends the run on a report
    return RunConfig.model_validate(doc)


class Payloads:
    """Chunks of CartPole-shaped transitions in the run's store, served by the fake's sample route."""

    def __init__(self, data_dir: Path, count: int = 3, rewards: float = 1.0, logp: bool = False) -> None:
        self.store = LocalStore(RunLayout(data_dir, "test-run").store_root)
        rng = np.random.default_rng(0)
        self.refs = []
        for k in range(count):
            shape = (T, N)
            arrays: dict[str, np.ndarray] = {
                "obs": rng.normal(size=(*shape, OBS)).astype(np.float32),
                "next_obs": rng.normal(size=(*shape, OBS)).astype(np.float32),
                "actions": rng.integers(0, 2, shape).astype(np.int64),
                "rewards": np.full(shape, rewards, np.float32),
                "terminated": rng.random(shape) < 0.1, "truncated": np.zeros(shape, bool),
                "valid": np.ones(shape, bool)}
            if logp:  # the sampling collectors' column
                arrays["logp"] = np.full(shape, math.log(0.5), np.float32)
            path = chunk_path("collect-0", f"chunk{k}")
            self.refs.append(SampledChunk(chunk_id=f"chunk{k}", payload_path=path,
                                          sha256=self.store.put(path, encode_chunk(arrays)), policy_version=0,
                                          num_envs=N, env_steps=T * N))
        self.calls = 0

    def serve(self, fake: FakeCoordinator, solve_after: int = 10**9) -> None:
        def sample(request: httpx.Request) -> httpx.Response:
            self.calls += 1
            fake.env_steps_total += T * N  # collectors keep collecting while the learner trains
            if self.calls > solve_after:
                fake.run_state = "solved"
            ask = SampleRequest.model_validate_json(request.content)
            if ask.batch_size == MAX_CHUNKS_PER_TAKE:  # the chunk loop: whole chunks
                items = len(self.refs)
                index, offsets, lengths = list(range(items)), [0] * items, [T * N] * items
                unit, size = "chunk", items
            else:
                items = ask.batch_size * ask.num_batches
                index, offsets, lengths = [k % len(self.refs) for k in range(items)], [k % (T * N) for k in
                                                                                     range(items)], [1] * items
                unit, size = "transition", ask.batch_size
            return reply(SampleResponse(unit=unit, chunks=self.refs, chunk_index=index, offsets=offsets,
                                        lengths=lengths, ids=list(range(items)), weights=[1.0] * items,
                                        batch_size=size, buffer_transitions=len(self.refs) * T * N,
                                        directive=fake.directive()))
        fake.handlers["sample"] = sample


def learn(fake: FakeCoordinator, data_dir: Path) -> int:
    """Run the learner's session against `fake` until it exits: its exit status."""
    return run_session(make_session(fake, "learner"), data_dir, learner_main._claim_and_train)
