"""A self-play collector's opponents: keeps every env's per-game draw in step with the coordinator's pool.

The pool changes only when a version joins it (every `self_play.every_versions`-th), so the collector asks
for it (`GET /v1/policies/opponents`) at its first policy and then whenever its newest version is due to have
joined; the latest version itself arrives with every directive, as for any collector. Pool versions are
loaded once (sha256-checked) and kept while they are in the pool. A pool version whose file cannot be read
(deleted from the store behind the coordinator's back, or torn) is left out of this collector's draws with a
warning naming it, and asked for again with the next pool.
"""

from __future__ import annotations

import logging

import numpy as np
from gymnasium.vector import SyncVectorEnv

from rlfleet.collector_worker.rollout import Rollout
from rlfleet.shared.config.battle import SelfPlayConfig
from rlfleet.shared.envs.seeds import OPPONENT_STREAM
from rlfleet.shared.envs.selfplay import PolicyPlayer, draw_weights, game_envs, set_opponents
from rlfleet.shared.envs.two_player import Player
from rlfleet.shared.policy.actors import Actor, PolicyError, build_actor
from rlfleet.shared.policy.files import load_policy
from rlfleet.shared.policy.manifest import ManifestError
from rlfleet.shared.storage.protocol import IntegrityError, PayloadStore
from rlfleet.shared.wire import OpponentPool
from rlfleet.shared.worker.session import WorkerSession

log = logging.getLogger("rlfleet.collector")


class OpponentDraw:
    def __init__(self, session: WorkerSession, store: PayloadStore, rollout: Rollout, config: SelfPlayConfig,
                 seed: int) -> None:
        self.session, self.store, self.rollout, self.config = session, store, rollout, config
        self.rng = np.random.default_rng([seed, OPPONENT_STREAM])  # the opponents' random moves: their own stream
        if not isinstance(rollout.env, SyncVectorEnv):  # the run config refuses self-play with another backend
            raise ValueError("self-play swaps opponents inside the games: collector.env_backend must be sync")
        self.games = rollout.env
        self.space = game_envs(self.games)[0].observation_space
        self.players: dict[int, Player] = {}  # pool version -> its player
        self.applied = -1  # the rollout's policy version when the draw was last set
        self.pool: list[int] = []
        self.missing: set[int] = set()

    def refresh(self) -> None:
        """Called after the rollout may have loaded a newer policy: re-draw when it did."""
        version = self.rollout.version
        if version == self.applied:
            return
        due = self.applied < 0 or version // self.config.every_versions > self.applied // self.config.every_versions
        if due and version > 0:
            self._load_pool(self.session.client.call("GET", "/v1/policies/opponents", OpponentPool))
        self.applied = version
        players: dict[str, Player] = {f"v{v}": self.players[v] for v in self.pool if v in self.players}
        actor = self.rollout.actor
        if actor is not None:
            players["latest"] = self._player(actor)
        weights = draw_weights(self.config.weights, actor is not None, [n for n in players if n != "latest"])
        set_opponents(self.games, weights, players)

    def _player(self, actor: Actor) -> Player:
        return PolicyPlayer(actor, self.space, self.config.opponent_epsilon, self.rng)

    def _load_pool(self, pool: OpponentPool) -> None:
        self.pool = [ref.version for ref in pool.pool]
        self.players = {v: p for v, p in self.players.items() if v in self.pool}
        for ref in pool.pool:
            if ref.version in self.players:
                continue
            try:
                manifest, state = load_policy(self.store, ref)
                self.players[ref.version] = self._player(build_actor(manifest, state))
                self.missing.discard(ref.version)
            except (FileNotFoundError, IntegrityError, ManifestError, PolicyError) as exc:
                if ref.version not in self.missing:
                    log.warning("opponent pool: policy v%d (%s) cannot be played and is left out of this "
                                "collector's draws: %s", ref.version, ref.path, exc)
                self.missing.add(ref.version)
        log.info("opponent pool: %s", ", ".join(f"v{v}" for v in self.pool) or "empty")
