"""A collector written only against rlfleet's published contract: no rlfleet imports.

Uses the standard library, numpy, msgpack, httpx and gymnasium. Every protocol fact it relies on is stated
in docs/protocol.md (the list at its end names the page or schema for each), in the coordinator's OpenAPI
document (/docs) or in the JSON Schemas it serves (/v1/schemas/chunk, /v1/schemas/policy).

    python examples/third_party_collector.py --url http://127.0.0.1:8000 --token $COLLECTOR_TOKEN \\
        --store data/runs/<run name>/store

It registers, claims a collector task, long-polls heartbeats for new policies, acts with the policy's MLP
(numpy, built from the manifest; uniformly at random before the first policy), steps gymnasium envs, writes
chunk payloads into the store and reports them, and honours pause directives. Scope: gymnasium ids without
wrappers, flat float32 observations, Discrete actions, q_values (epsilon-greedy) or categorical heads, mlp
encoder, with or without a recurrent core (gru or lstm: one state per env, written as each chunk's `core_state`):
enough for CartPole DQN, PPO and recurrent PPO; anything else is refused at claim time with a message.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import struct
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import gymnasium as gym
import httpx
import msgpack
import numpy as np

log = logging.getLogger("third_party_collector")
TRANSIENT = (429, 500, 502, 503, 504)


class Refused(RuntimeError):
    """A final 4xx answer: {"error": code, "message": text}."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {status} {body.get('error')}: {body.get('message')}")
        self.status, self.error = status, body.get("error")


class Coordinator:
    """REST calls with retries: transient failures (transport errors, 429, 5xx) are retried unchanged, which is
    safe because every mutating request carries an id chosen before its first try."""

    def __init__(self, url: str, token: str, patience: float = 60.0) -> None:
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=70.0)
        self.patience = patience

    def post(self, path: str, body: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
        deadline, delay = time.monotonic() + self.patience, 0.1
        while True:
            try:
                resp = self.http.post(path, json=body, params=params or None)
                if resp.status_code < 400:
                    return resp.json()
                if resp.status_code not in TRANSIENT:
                    raise Refused(resp.status_code, resp.json())
                problem = f"HTTP {resp.status_code}"
            except httpx.TransportError as exc:
                problem = repr(exc)
            if time.monotonic() > deadline:
                raise RuntimeError(f"POST {path}: {problem}; coordinator unavailable for {self.patience}s")
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


class Session:
    """Registration, the lease (a heartbeat thread that long-polls for newer policies) and the latest directive."""

    def __init__(self, api: Coordinator, name: str) -> None:
        self.api, self.name = api, name
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.lost = threading.Event()  # the coordinator forgot us: register and claim again
        self.failed = ""  # why the heartbeat thread ended the process
        self.register()
        threading.Thread(target=self._beat, daemon=True).start()

    def register(self) -> None:
        reply = self.api.post("/v1/workers", {"kind": "collector", "name": self.name,
                                              "request_id": uuid.uuid4().hex})
        with self.lock:
            self.worker_id, self.directive = reply["worker_id"], reply["directive"]
            self.poll = min(reply["heartbeat_seconds"], reply["max_wait_seconds"])
        self.lost.clear()
        log.info("registered as %s", self.worker_id)

    def update(self, directive: dict[str, Any]) -> None:
        with self.lock:
            self.directive = directive
        if directive["run_state"] != "running":
            self.stop.set()

    def heartbeat(self, newer_than: int | None = None) -> None:
        params = {} if newer_than is None else {"newer_than": newer_than, "wait": self.poll}
        try:
            self.update(self.api.post(f"/v1/workers/{self.worker_id}/heartbeat", **params)["directive"])
        except Refused as exc:
            if exc.error != "unknown_worker":
                raise
            self.lost.set()

    def _beat(self) -> None:
        """Each renewal is a long poll: it returns at once when a newer policy is published. A lease nobody
        renews would strand the task, so a failure here stops the whole collector."""
        try:
            while not self.stop.is_set():
                if self.lost.is_set():
                    time.sleep(0.1)
                    continue
                policy = self.directive["policy"]
                self.heartbeat(newer_than=policy["version"] if policy else 0)
        except Exception as exc:
            self.failed = f"heartbeat: {exc}"
            self.stop.set()


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # the logistic function, without exp's overflow for large |x|


class Policy:
    """The policy file: safetensors (8-byte little-endian header size, JSON header, tensor bytes) whose metadata
    holds the manifest (GET /v1/schemas/policy); an MLP `body.<2k>.weight/bias` with the manifest's activation,
    after the manifest's recurrent `core` if it has one (docs/protocol.md, Recurrent core)."""

    def __init__(self, data: bytes) -> None:
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + size])
        self.manifest = json.loads(header.pop("__metadata__")["rlfleet.manifest"])
        if self.manifest["encoder"]["kind"] != "mlp":
            raise ValueError("this example runs mlp policies only")
        tensors = {}
        for name, info in header.items():
            if info["dtype"] != "F32":
                raise ValueError(f"tensor {name} is {info['dtype']}, expected F32")
            start, end = info["data_offsets"]
            tensors[name] = np.frombuffer(data[8 + size + start:8 + size + end], "<f4").reshape(info["shape"])
        self.layers = [(tensors[f"body.{2 * k}.weight"], tensors[f"body.{2 * k}.bias"])
                       for k in range(len(self.manifest["net"]["hidden"]) + 1)]
        self.core: dict[str, Any] | None = self.manifest.get("core")
        if self.core is not None:  # torch's nn.GRU / nn.LSTM tensors: the gates' blocks of `hidden` rows stacked
            self.w_ih, self.w_hh, self.b_ih, self.b_hh = (tensors[f"core.rnn.{name}_l0"] for name in (
                "weight_ih", "weight_hh", "bias_ih", "bias_hh"))
        norm = self.manifest.get("obs_norm")
        self.norm = None if norm is None else (np.asarray(norm["mean"]), np.sqrt(np.asarray(norm["var"]) + 1e-8),
                                               norm["clip"])

    def forward(self, obs: np.ndarray, state: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """The head's outputs for observations [N, ...] from the core states [N, *state] (None without a core),
        and the states after this step."""
        x = obs.reshape(len(obs), -1).astype(np.float64)
        if self.norm is not None:
            mean, std, clip = self.norm
            x = np.clip((x - mean) / std, -clip, clip)
        if self.core is not None:
            assert state is not None
            x, state = self.step_core(x, state.astype(np.float64))
        for k, (weight, bias) in enumerate(self.layers):
            x = x @ weight.T + bias
            if k < len(self.layers) - 1:
                x = np.maximum(x, 0) if self.manifest["net"]["activation"] == "relu" else np.tanh(x)
        return x, state

    def step_core(self, x: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step of the core: (its output h', the new state); a gru's state is h [N, H], an lstm's h then c
        [N, 2, H]. The equations are docs/protocol.md's table, torch's own."""
        assert self.core is not None
        size = self.core["hidden"]
        gi = x @ self.w_ih.T + self.b_ih
        if self.core["kind"] == "gru":  # gates r, z, n
            gh = state @ self.w_hh.T + self.b_hh
            r = sigmoid(gi[:, :size] + gh[:, :size])
            z = sigmoid(gi[:, size:2 * size] + gh[:, size:2 * size])
            n = np.tanh(gi[:, 2 * size:] + r * gh[:, 2 * size:])
            h = (1.0 - z) * n + z * state
            return h, h
        h, c = state[:, 0], state[:, 1]  # lstm, gates i, f, g, o
        a = gi + h @ self.w_hh.T + self.b_hh
        i, f = sigmoid(a[:, :size]), sigmoid(a[:, size:2 * size])
        g, o = np.tanh(a[:, 2 * size:3 * size]), sigmoid(a[:, 3 * size:])
        c = f * c + i * g
        h = o * np.tanh(c)
        return h, np.stack([h, c], axis=1)


def check_task(task: dict[str, Any]) -> None:
    env, spaces, behaviour = task["env"], task["spaces"], task["behaviour"]
    problems = {
        "env wrappers": bool(env["wrappers"]),
        "env entry points": ":" in env["id"],
        "non-Discrete actions": spaces["action"]["kind"] != "discrete",
        "image observations": spaces["obs"]["dtype"] != "float32",
        f"the {behaviour['head']} head": behaviour["head"] not in ("q_values", "categorical"),
        "n_episode collection": bool(task["sampling"]["n_episode"]),
    }
    if any(problems.values()):
        raise SystemExit(f"this example does not handle {', '.join(p for p, bad in problems.items() if bad)}")


class Collector:
    def __init__(self, session: Session, store: Path, task: dict[str, Any]) -> None:
        check_task(task)
        self.session, self.store, self.task = session, store, task
        env, cfg = task["env"], task["collector"]
        self.n, self.steps = cfg["num_envs"], cfg["chunk_steps"]
        self.behaviour = task["behaviour"]
        self.n_actions = task["spaces"]["action"]["n"]
        self.envs = [gym.make(env["id"], max_episode_steps=env["max_episode_steps"], **env["kwargs"])
                     for _ in range(self.n)]
        self.obs = np.stack([e.reset(seed=task["seed"] + i)[0] for i, e in enumerate(self.envs)]).astype(np.float32)
        self.rng = np.random.default_rng(task["seed"])
        self.ret, self.length = np.zeros(self.n), np.zeros(self.n, np.int64)
        self.policy: Policy | None = None
        self.version = 0
        self.sync = task["sampling"]["force_sync"] or task["lockstep"]
        # A recurrent run: each env's core state, zero at first and wherever an episode begins; a random action
        # leaves it as it is, a new policy version continues from it (docs/protocol.md, Recurrent core).
        self.core = self.behaviour.get("core")
        self.state = None if self.core is None else np.zeros(
            (self.n, self.core["hidden"]) if self.core["kind"] == "gru" else (self.n, 2, self.core["hidden"]),
            np.float32)

    def refresh_policy(self) -> None:
        ref = self.session.directive["policy"]
        if ref is None or ref["version"] <= self.version:
            return
        data = (self.store / ref["path"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != ref["sha256"]:
            raise ValueError(f"policy {ref['path']}: sha256 mismatch")
        policy = Policy(data)
        if policy.core != self.core:
            raise ValueError(f"policy {ref['path']} has core {policy.core}, the task's behaviour.core is {self.core}")
        self.policy, self.version = policy, ref["version"]
        log.info("acting with policy v%d", self.version)

    def act(self, obs: np.ndarray, env_steps_total: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """(actions, their log-probabilities or None, the envs whose core state turned non-finite)."""
        b = self.behaviour
        broken = np.zeros(self.n, bool)
        if self.policy is None or env_steps_total < b["random_env_steps"]:
            return self.rng.integers(0, self.n_actions, self.n), None, broken
        out, state = self.policy.forward(obs, self.state)
        if state is not None:
            # A state gone NaN or inf is an error of this step: act from a zero state, restart from zero.
            broken = ~np.isfinite(state.reshape(self.n, -1)).all(axis=1)
            if broken.any():
                out[broken] = self.policy.forward(obs[broken], np.zeros_like(state[broken]))[0]
                state[broken] = 0.0
            self.state = state.astype(np.float32)
        if b["head"] == "categorical":  # sample from softmax(logits); record the log-probability (logp column)
            logp_all = out - out.max(1, keepdims=True)
            logp_all -= np.log(np.exp(logp_all).sum(1, keepdims=True))
            acts = np.array([self.rng.choice(self.n_actions, p=np.exp(row)) for row in logp_all])
            return acts, logp_all[np.arange(self.n), acts], broken
        acts = out.argmax(1)
        eps = b["epsilon"]
        if eps is not None:  # linear decay on the run's acknowledged env steps (directive.env_steps_total)
            frac = min(1.0, env_steps_total / eps["decay_env_steps"])
            explore = self.rng.random(self.n) < eps["start"] + frac * (eps["end"] - eps["start"])
            acts[explore] = self.rng.integers(0, self.n_actions, int(explore.sum()))
        return acts, None, broken

    def collect(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """chunk_steps steps of every env: arrays [T, N, ...] and the report's episode fields."""
        t_, n = self.steps, self.n
        a = {"obs": np.zeros((t_, n, *self.obs.shape[1:]), np.float32), "actions": np.zeros((t_, n), np.int64),
             "rewards": np.zeros((t_, n), np.float32), "terminated": np.zeros((t_, n), bool),
             "truncated": np.zeros((t_, n), bool), "valid": np.ones((t_, n), bool)}
        a["next_obs"] = np.zeros_like(a["obs"])
        if self.behaviour["sample"]:
            a["logp"] = np.zeros((t_, n), np.float32)
        if self.state is not None:  # per env, not per step: the state its first row is acted from
            a["core_state"] = self.state.copy()
        fresh = [i for i in range(n) if self.length[i] == 0]
        episodes, version = [], self.version
        for t in range(t_):
            a["obs"][t] = self.obs
            acts, logp, broken = self.act(self.obs, self.session.directive["env_steps_total"])
            a["actions"][t] = acts
            if logp is not None:
                a["logp"][t] = logp
            for i, env in enumerate(self.envs):
                try:
                    nxt, rew, term, trunc, _ = env.step(int(acts[i]))
                    # a core state gone non-finite is an error of this step too: this example ends the episode
                    # there, as for an env error, rather than go on with one whose memory was lost
                    ok = np.isfinite(rew) and np.isfinite(nxt).all() and not broken[i]
                except Exception as exc:  # an env error: the step is kept, invalid, and ends the episode
                    log.warning("env %d raised %r", i, exc)
                    nxt, rew, term, trunc, ok = self.obs[i], 0.0, False, True, False
                a["rewards"][t, i], a["next_obs"][t, i] = (rew if ok else 0.0), (nxt if ok else self.obs[i])
                a["terminated"][t, i], a["truncated"][t, i], a["valid"][t, i] = term and ok, trunc or not ok, ok
                self.ret[i] += rew if ok else 0.0
                self.length[i] += 1
                if term or trunc or not ok:
                    if ok:  # a broken episode's return means nothing: not reported
                        episodes.append({"ret": float(self.ret[i]), "length": int(self.length[i])})
                    self.ret[i], self.length[i] = 0.0, 0
                    nxt = env.reset()[0]
                    if self.state is not None:
                        self.state[i] = 0.0  # its next row begins an episode: so does its memory
                self.obs[i] = nxt
        done = a["terminated"] | a["truncated"] | ~a["valid"]
        fields = {"ends": np.flatnonzero(done).tolist(), "fresh_columns": fresh, "episodes": episodes,
                  "policy_version": version, "env_errors": int((~a["valid"]).sum())}
        return a, fields

    def write(self, arrays: dict[str, np.ndarray], chunk_id: str) -> tuple[str, bytes]:
        """The rlfleet.chunk msgpack envelope (GET /v1/schemas/chunk), written atomically at its store path."""
        body = {name: {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": arr.astype(arr.dtype.newbyteorder(
            "<")).tobytes()} for name, arr in arrays.items()}
        data = msgpack.packb({"format": "rlfleet.chunk", "version": 1, "arrays": body,
                              "meta": {"task_id": self.task["task_id"], "chunk_id": chunk_id}}, use_bin_type=True)
        path = f"chunks/{self.task['task_id']}/{chunk_id}.msgpack"
        target = self.store / path
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)  # readers never see a torn file
        return path, data

    def run_once(self) -> bool:
        """One chunk: pause while told to, act, write, report. True when a chunk was acknowledged."""
        session = self.session
        if session.directive["pause_seconds"] > 0:
            log.info("paused by the rate limiter")
        while session.directive["pause_seconds"] > 0 and not (session.stop.is_set() or session.lost.is_set()):
            # a re-check interval, not a sleep per chunk: wait, ask again, resume as soon as it is 0
            session.stop.wait(session.directive["pause_seconds"])
            session.heartbeat()
        if self.behaviour["sample"] and self.policy is None:  # log-probs need the learner's policy
            session.heartbeat(newer_than=0)
            self.refresh_policy()
            return False
        if self.sync:
            self.await_newer_policy()
        self.refresh_policy()
        arrays, fields = self.collect()
        chunk_id = uuid.uuid4().hex  # fixed before the first try: a retried report is counted once
        path, data = self.write(arrays, chunk_id)
        report = {"chunk_id": chunk_id, "worker_id": session.worker_id, "task_id": self.task["task_id"],
                  "payload_path": path, "sha256": hashlib.sha256(data).hexdigest(), "size_bytes": len(data),
                  "env_steps": self.steps * self.n, "num_envs": self.n, **fields}
        try:
            ack = session.api.post("/v1/chunks", report)
        except Refused as exc:
            (self.store / path).unlink(missing_ok=True)  # never to be acknowledged: do not leave an orphan
            if exc.error in ("unknown_worker", "task_not_held"):
                session.lost.set()  # lease lost: register and claim afresh
                return False
            raise
        session.update(ack["directive"])
        return True

    def await_newer_policy(self) -> None:
        """On-policy (force_sync): wait, by long poll, for a policy newer than the one that made the last chunk;
        bounded by one poll unless the task is in lockstep (then however long the learner takes)."""
        session = self.session
        while not session.stop.is_set():
            policy = session.directive["policy"]
            if policy is not None and policy["version"] > self.version:
                return
            session.heartbeat(newer_than=self.version)
            if not self.task["lockstep"]:
                return

    def close(self) -> None:
        for env in self.envs:
            env.close()


def claim(session: Session) -> dict[str, Any] | None:
    while not session.stop.is_set():
        reply = session.api.post(f"/v1/workers/{session.worker_id}/claim")
        session.update(reply["directive"])
        if reply["task"] is not None:
            return reply["task"]
        session.stop.wait(0.5)  # no task free yet
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the coordinator's base URL")
    parser.add_argument("--token", default=os.environ.get("RLFLEET_TOKEN"), help="a collector-scope token")
    parser.add_argument("--store", type=Path, required=True, help="the payload store root (shared directory)")
    parser.add_argument("--name", default="third-party", help="the name to register with")
    parser.add_argument("--max-seconds", type=float, default=3600.0, help="stop after this long")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    session = Session(Coordinator(args.url, args.token), args.name)
    deadline, chunks = time.monotonic() + args.max_seconds, 0
    while not session.stop.is_set() and time.monotonic() < deadline:
        task = claim(session)
        if task is None:
            break
        collector = Collector(session, args.store, task)
        try:
            while not (session.stop.is_set() or session.lost.is_set()) and time.monotonic() < deadline:
                chunks += collector.run_once()
        finally:
            collector.close()
        if session.lost.is_set():
            session.register()
    session.stop.set()
    log.info("done: %d chunks acknowledged, run %s", chunks, session.directive["run_state"])
    if session.failed:
        raise SystemExit(session.failed)


if __name__ == "__main__":
    main()
