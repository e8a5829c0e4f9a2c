"""Example requests and replies for the OpenAPI document, built as wire models so they always validate.

One small CartPole run (the default config): collector task `collector-0`, its worker `collector-1-a1b2c3`, policy v3.
"""

from __future__ import annotations

from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.payloads.spaces import DiscreteActions, ObsSpace, Spaces
from rlfleet.shared.policy.manifest import Behaviour
from rlfleet.shared.wire import (
    Ack,
    BufferStatus,
    CheckpointLoad,
    ChunkAck,
    ChunkBatch,
    ChunkBatchAck,
    ChunkReport,
    ChunkVerdict,
    ClaimResponse,
    CollectorTask,
    ControlStatus,
    CorruptAck,
    CorruptReport,
    DatasetBatch,
    DatasetFile,
    DatasetSampleRequest,
    Directive,
    EpisodeStat,
    EvaluateRequest,
    EvaluationReport,
    EvaluationResult,
    GenerationClose,
    GenerationOpen,
    GenerationOpened,
    GenerationResults,
    HeartbeatResponse,
    HoldoutReport,
    HoldoutResult,
    JournalStatus,
    LearnerStatus,
    LearnReport,
    LoadCheckpointRequest,
    MemberClaim,
    MemberClaimRequest,
    MemberOutcome,
    MemberResult,
    MemberSpec,
    MemberTask,
    OpponentPool,
    Perturbation,
    PolicyLagStatus,
    PolicyPublish,
    PolicyRef,
    PriorityAck,
    PriorityUpdate,
    RegisterRequest,
    RegisterResponse,
    ResultAck,
    RunResponse,
    SampledChunk,
    SampleRequest,
    SampleResponse,
    SchemaInfo,
    SettingChange,
    SettingsRequest,
    Status,
    StopRequest,
    TaskStatus,
    WorkerStatus,
)

CONFIG = RunConfig(name="cartpole")
COLLECTOR, LEARNER, EVALUATOR = "collector-1-a1b2c3", "learner-2-d4e5f6", "evaluator-3-0a1b2c"
POLICY = PolicyRef(version=3, path="policies/v00000003.safetensors", sha256="9f" * 32)
OPPONENTS = OpponentPool(latest=POLICY, pool=[PolicyRef(version=2, path="policies/v00000002.safetensors",
                                                        sha256="7e" * 32)],
                         weights={"latest": 0.4, "pool": 0.4, "random": 0.1, "lookahead": 0.1})
RUNNING = Directive(run_state="running", policy=POLICY, pause_seconds=0.0, env_steps_total=24576)
PAUSED = Directive(run_state="running", policy=POLICY, pause_seconds=0.05, env_steps_total=24576)
CHUNK_ID = "5d41402abc4b2a76b9719d911017c592"
CHUNK_PATH = f"chunks/collector-0/{CHUNK_ID}.msgpack"

REGISTER = RegisterRequest(kind="collector", name="host-a", restarts=0, request_id="8f14e45fceea167a5a36dedd4bea2543")
REGISTERED = RegisterResponse(worker_id=COLLECTOR, lease_seconds=10.0, heartbeat_seconds=2.5, max_wait_seconds=5.0,
                              run_name=CONFIG.name, directive=RUNNING)
HEARTBEAT = HeartbeatResponse(lease_seconds=10.0, directive=RUNNING)
CLAIMED = ClaimResponse(task=CollectorTask(
    task_id="collector-0", env=CONFIG.env, spaces=Spaces(obs=ObsSpace(shape=(4,), dtype="float32"),
                                                         action=DiscreteActions(n=2)),
    behaviour=Behaviour(head="q_values", sample=False, epsilon=CONFIG.collector.epsilon),
    collector=CONFIG.collector, sampling=CONFIG.sampling, seed=4096, policy=POLICY), directive=RUNNING)

CHUNK = ChunkReport(chunk_id=CHUNK_ID, worker_id=COLLECTOR, task_id="collector-0", payload_path=CHUNK_PATH,
                    sha256="3a" * 32, size_bytes=61_000, env_steps=2048, num_envs=8, ends=[1011, 1900],
                    fresh_columns=[3], episodes=[EpisodeStat(ret=127.0, length=127)], policy_version=3,
                    env_errors=1)
CHUNK_ACK = ChunkAck(chunk_id=CHUNK_ID, duplicate=False, directive=PAUSED)
BATCH = ChunkBatch(reports=[CHUNK])
BATCH_ACK = ChunkBatchAck(results=[ChunkVerdict(chunk_id=CHUNK_ID, duplicate=False)], directive=RUNNING)

SAMPLE = SampleRequest(worker_id=LEARNER, request_id="c4ca4238a0b923820dcc509a6f75849b", batch_size=2)
SAMPLED = SampleResponse(
    unit="transition", chunks=[SampledChunk(chunk_id=CHUNK_ID, payload_path=CHUNK_PATH, sha256="3a" * 32,
                                            policy_version=3, num_envs=8, env_steps=2048)],
    chunk_index=[0, 0], offsets=[17, 905], lengths=[1, 1], ids=[4113, 5001], weights=[1.0, 1.0], batch_size=2,
    buffer_transitions=24576, directive=RUNNING)
PRIORITIES = PriorityUpdate(worker_id=LEARNER, ids=[4113, 5001], priorities=[0.7, 0.02])
PRIORITIES_ACK = PriorityAck(updated=2, ignored=0, directive=RUNNING)
CORRUPT = CorruptReport(worker_id=LEARNER, chunk_id=CHUNK_ID, reason="sha256 mismatch")
CORRUPT_ACK = CorruptAck(removed=True, directive=RUNNING)
LEARN = LearnReport(worker_id=LEARNER, iteration=1200, losses={"td_loss": 0.031}, transitions_trained=153_600)
PUBLISH = PolicyPublish(worker_id=LEARNER, policy=POLICY, iteration=1200)
ACK = Ack(directive=RUNNING)

EVALUATION = EvaluationReport(worker_id=EVALUATOR, request_id="eccbc87e4b5ce2fe28308fd9f2a7baf3", policy_version=3,
                              returns=[500.0, 488.0], lengths=[500, 488], seed=8192)
EVALUATED = EvaluationResult(policy_version=3, mean=494.0, std=6.0, episodes=2, env_steps=24576, wall_seconds=41.5,
                             iteration=1200, seed=8192, solved=True, test_requested=True)
HOLDOUT = HoldoutReport(worker_id=EVALUATOR, request_id="a87ff679a2f3e71d9181a67b7542122c", policy_version=3,
                        returns=[500.0, 497.0], lengths=[500, 497], seed=12288)
TESTED = HoldoutResult(policy_version=3, mean=498.5, std=1.5, ci95=(496.4, 500.6), episodes=2,
                       validation_mean=494.0, env_steps=26112, wall_seconds=44.0, iteration=1260, seed=12288,
                       confirmed=True)

STATUS = Status(
    run_name=CONFIG.name, run_state="running", run_message="", coordinator_resumes=0, wall_seconds=41.5,
    env_steps=24576, env_steps_per_second=2300.0, episodes=310, chunks=12, duplicate_chunks=0, env_errors=0,
    recent_return_mean=79.3, policy_version=3,
    policy_lag=PolicyLagStatus(ingest_mean=0.4, ingest_max=2, sampled_mean=0.9, sampled_max=3,
                               ingest_histogram={"0": 8, "1": 3, "2": 1}),
    learner=LearnerStatus(iteration=1200, transitions_trained=153_600, losses={"td_loss": 0.031},
                          samples_per_insert=6.25),
    latest_evaluation=EVALUATED, best_evaluation=EVALUATED,
    workers=[WorkerStatus(worker_id=COLLECTOR, kind="collector", name="host-a", task_id="collector-0",
                          last_seen_seconds_ago=0.4, restarts=0)],
    tasks=[TaskStatus(task_id="collector-0", kind="collector", state="claimed", worker_id=COLLECTOR, claims=1)],
    buffers=[BufferStatus(buffer_id="replay-0", sampler="uniform", unit="transition", chunks=12, transitions=24576,
                          items=24576, capacity_transitions=100_000, evicted_chunks=0, removed_max_use=0,
                          removed_stale=0, max_priority=1.0, beta=1.0, inserted_transitions=24576,
                          sampled_transitions=153_600, samples_per_insert=8.0, tolerance_transitions=2048)],
    journal=JournalStatus(commits=140, submissions=160, chunk_ids_remembered=12),
)
RUN = RunResponse(run_name=CONFIG.name, run_state="running", config=CONFIG)
STOP = StopRequest(reason="enough for today")
SCHEMAS = [SchemaInfo(name="chunk", version=1, title="rlfleet.chunk payload v1", url="/v1/schemas/chunk"),
           SchemaInfo(name="policy", version=1, title="rlfleet.policy manifest v1", url="/v1/schemas/policy")]
LOADED = CheckpointLoad(load_id="c9f0f895fb98ab9159f51fd0297e236d", source="/data/pbt/member-1/data/runs/member-1",
                        checkpoint="learner-0000000500.pt", source_iteration=500, source_env_steps=98304,
                        env_steps=90112, wall_seconds=310.5)
CONTROL = ControlStatus(paused=False, checkpoints=1, evaluations=1, tests=1, changes=[SettingChange(
    key="replay.samples_per_insert", old=32.0, new=16.0, env_steps=24576, wall_seconds=41.5)],
    live_settings=["evaluation.every_versions", "replay.samples_per_insert"], loads=[LOADED], load_refusals=0,
    reproducible=False)
EVALUATE = EvaluateRequest(test=True)
SETTINGS = SettingsRequest(settings={"replay.samples_per_insert": 16})
LOAD_CHECKPOINT = LoadCheckpointRequest(request_id="c9f0f895fb98ab9159f51fd0297e236d",
                                        source="/data/pbt/member-1/data/runs/member-1")

# Population evaluation (evolution strategies): generation 7 of 4 members perturbing policy v3.
PERTURBATION = Perturbation(noise_seed=1234, noise_size=4_194_304, sigma=0.1, episodes=1, lease_seconds=30.0)
GENERATION_OPEN = GenerationOpen(worker_id=LEARNER, request_id="1679091c5a880faf6fb5e6087eb1b2dc", policy_version=3,
                                 perturbation=PERTURBATION, members=[
                                     MemberSpec(noise_index=81_220, sign=1), MemberSpec(noise_index=81_220, sign=-1),
                                     MemberSpec(noise_index=3_090_417, sign=1),
                                     MemberSpec(noise_index=3_090_417, sign=-1)])
GENERATION_OPENED = GenerationOpened(generation=7, population=4, directive=RUNNING)
MEMBER_CLAIM = MemberClaimRequest(worker_id=COLLECTOR, wait_seconds=5.0)
MEMBER_CLAIMED = MemberClaim(member=MemberTask(generation=7, member=1, policy=POLICY, perturbation=PERTURBATION,
                                               noise_index=81_220, sign=-1, seed=72_057_525_318_479_872),
                             directive=RUNNING)
MEMBER_RESULT = MemberResult(worker_id=COLLECTOR, member=1, mean_return=212.0, mean_length=212.0, episodes=1,
                             env_steps=212)
MEMBER_ACK = ResultAck(accepted=True, duplicate=False, late=False, directive=RUNNING)
GENERATION_CLOSE = GenerationClose(worker_id=LEARNER, min_fraction=0.9, wait_seconds=5.0)
GENERATION_RESULTS = GenerationResults(
    generation=7, closed=True, population=4, received=4, late_results=2, directive=RUNNING,
    results=[MemberOutcome(member=0, noise_index=81_220, sign=1, mean_return=187.0, mean_length=187.0),
             MemberOutcome(member=1, noise_index=81_220, sign=-1, mean_return=212.0, mean_length=212.0),
             MemberOutcome(member=2, noise_index=3_090_417, sign=1, mean_return=500.0, mean_length=500.0),
             MemberOutcome(member=3, noise_index=3_090_417, sign=-1, mean_return=96.0, mean_length=96.0)])

# Dataset serving: the third batch of 256 of epoch 2 of a 20-episode CartPole recording.
DATASET_SAMPLE = DatasetSampleRequest(worker_id=LEARNER, request_id="8f14e45fceea167a5a36dedd4bea2543", batch_size=4)
DATASET_BATCH = DatasetBatch(
    dataset="cartpole-expert", epoch=2, epoch_complete=False, epochs=50,
    files=[DatasetFile(path="cartpole-expert/train/episode-000003.msgpack", sha256="9" * 64),
           DatasetFile(path="cartpole-expert/train/episode-000011.msgpack", sha256="4" * 64)],
    file_index=[0, 1, 1, 0], rows=[17, 402, 3, 288], directive=RUNNING)
