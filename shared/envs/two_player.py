"""PettingZoo's classic two-player board games as gymnasium envs for one seat, against baseline opponents.

`rlfleet/TicTacToe-v0` and `rlfleet/ConnectFour-v0`: the policy plays one seat of the PettingZoo game and the
opponent's moves happen inside `step`, so collectors, the evaluator and every learner see an ordinary
single-agent env. Observations are PettingZoo's own Dict: the board from the view of the player to move (its
pieces in plane 0, the opponent's in plane 1) and `action_mask`, which shared/envs/build.py flattens and
shared/envs/gymspaces.py turns into the spaces' action mask, so every actor plays legal moves only. The reward comes at
the end of the game, from the policy's seat: +1 a win, 0 a draw, -1 a loss; an illegal move (possible only for
an actor that ignores the mask) loses the game at once. `info["opponent"]` names the episode's opponent.

Opponents (kwarg `opponent`): `random` (uniform over the legal moves), `lookahead` (a one-step lookahead: win now
if it can, else block the policy's immediate win, else random), or a mixture such as
`{"random": 0.5, "lookahead": 0.5}` drawn per episode from the env's seeded generator. Seats alternate from one
episode to the next (`seat: alternate`, the default) or stay `first` / `second`.

Self-play (shared/envs/selfplay.py) replaces the mixture at run time with `set_opponents`: players are then also
policies (a `Player` maps the opponent's own view of the board to its move), named by the caller. A player with
memory of the game (a recurrent policy: `RememberingPlayer`) is told when a game against it begins, and a game
under way finishes against the players it began with: new ones take over at the next reset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from rlfleet.shared.config.battle import BASELINES, ENTRY_POINT, GAME_IDS
from rlfleet.shared.extras import require

# game -> (PettingZoo registry id, stones in a row that win, pieces fall to the lowest free row of a column)
GAMES = {"tictactoe": ("classic/tictactoe_v3", 3, False), "connect_four": ("classic/connect_four_v3", 4, True)}
Seat = Literal["alternate", "first", "second"]
Player = Callable[[dict[str, np.ndarray]], int]  # a player's own view {action_mask, observation} -> its move


@runtime_checkable
class RememberingPlayer(Protocol):
    """A player whose moves depend on the game so far (a policy with a recurrent core): `new_game` forgets it, so
    no game is played with the memory of another."""

    def __call__(self, seen: dict[str, np.ndarray]) -> int: ...

    def new_game(self) -> None: ...


def place(board: np.ndarray, action: int, gravity: bool) -> tuple[int, int] | None:
    """Where `action` puts a stone on a [rows, cols, 2] board (None: not a free cell / a full column)."""
    cols = board.shape[1]
    taken: np.ndarray = np.asarray(board.any(axis=2))
    if gravity:
        free = np.flatnonzero(~taken[:, action])
        return None if len(free) == 0 else (int(free[-1]), action)
    row, col = divmod(action, cols)
    return None if taken[row, col] else (row, col)


def wins_with(board: np.ndarray, cell: tuple[int, int], plane: int, k: int) -> bool:
    """Whether a stone of `plane` at `cell` completes k in a row (the board without it)."""
    rows, cols = board.shape[:2]
    mine = board[:, :, plane].astype(bool)
    r0, c0 = cell
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = r0 + sign * dr, c0 + sign * dc
            while 0 <= r < rows and 0 <= c < cols and mine[r, c]:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= k:
            return True
    return False


def lookahead_move(board: np.ndarray, mask: np.ndarray, k: int, gravity: bool, rng: np.random.Generator) -> int:
    """A winning move if there is one, else one that blocks the opponent's immediate win, else a random legal one
    (ties broken at random, so games against it differ from seed to seed)."""
    legal = np.flatnonzero(mask)
    for plane in (0, 1):  # 0: my win now; 1: the opponent's win next move, which I take first
        hits = []
        for action in legal:
            cell = place(board, int(action), gravity)
            if cell is not None and wins_with(board, cell, plane, k):
                hits.append(int(action))
        if hits:
            return int(rng.choice(hits))
    return int(rng.choice(legal))


class TwoPlayerEnv(gym.Env):
    """One seat of a PettingZoo classic game; the module docstring says how it plays."""

    metadata = {"render_modes": []}

    def __init__(self, game: str = "tictactoe", opponent: str | Mapping[str, float] = "random",
                 seat: Seat = "alternate") -> None:
        if game not in GAMES:
            raise ValueError(f"game {game!r}: one of {sorted(GAMES)}")
        game_id, self.k, self.gravity = GAMES[game]
        if seat not in ("alternate", "first", "second"):
            raise ValueError(f"seat {seat!r}: alternate, first or second")
        self.seat_rule = seat
        self.players: dict[str, Player] = {}  # the game under way's; `coming` takes over at the next reset
        self.coming: dict[str, Player] = {}
        self.set_opponents({opponent: 1.0} if isinstance(opponent, str) else opponent)
        # here, not at import: shared/envs/build.py imports this module in every service
        pettingzoo = require("pettingzoo", "games", f"the board game {game}")
        self.game = pettingzoo.make("aec", game_id)
        self.game.reset(seed=0)
        agent = self.game.possible_agents[0]
        inner = self.game.observation_space(agent)
        self.observation_space = gym.spaces.Dict({key: inner[key] for key in ("action_mask", "observation")})
        self.action_space = gym.spaces.Discrete(int(self.game.action_space(agent).n))
        self.rng = np.random.default_rng()
        self.episodes = 0
        self.me = agent
        self.opponent = self.names[0]

    def set_opponents(self, weights: Mapping[str, float], players: Mapping[str, Player] | None = None) -> None:
        """Draw each later episode's opponent from `weights`: baselines by name, or the `players` given here
        (policies, say). Takes effect at the next reset: the game under way keeps its opponent, memory and all."""
        players = dict(players or {})
        weights = dict(weights)
        unknown = sorted(set(weights) - set(BASELINES) - set(players))
        if unknown or not weights or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
            raise ValueError(f"opponent {weights!r}: a baseline of {list(BASELINES)}"
                             f"{' or a player given' if players else ''}, or a mapping of them to non-negative "
                             f"weights that do not all vanish (unknown: {unknown})")
        self.names = list(weights)
        total = sum(weights.values())
        self.weights = np.array([weights[n] / total for n in self.names])
        self.coming = players

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.game.reset(seed=int(self.rng.integers(2**31)))
        first = {"first": True, "second": False}.get(self.seat_rule, self.episodes % 2 == 0)
        self.episodes += 1
        self.me = self.game.possible_agents[0 if first else 1]
        self.players = self.coming
        self.opponent = self.names[int(self.rng.choice(len(self.names), p=self.weights))]
        player = self.players.get(self.opponent)
        if isinstance(player, RememberingPlayer):
            player.new_game()
        if not first:
            self._opponent_moves()
        return self._observe(), {"opponent": self.opponent}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        info = {"opponent": self.opponent}
        if not self.game.observe(self.me)["action_mask"][int(action)]:
            return self._observe(), -1.0, True, False, {**info, "illegal": True}
        self.game.step(int(action))
        if not self._over():
            self._opponent_moves()
        if self._over():
            return self._observe(), float(self.game.rewards[self.me]), True, False, info
        return self._observe(), 0.0, False, False, info

    def _over(self) -> bool:
        return bool(self.game.terminations[self.me] or self.game.truncations[self.me])

    def _opponent_moves(self) -> None:
        agent = self.game.agent_selection
        seen = self.game.observe(agent)
        mask = seen["action_mask"].astype(bool)
        if self.opponent in self.players:
            move = int(self.players[self.opponent]({"action_mask": seen["action_mask"].astype(np.int8),
                                                    "observation": seen["observation"].astype(np.int8)}))
            if not mask[move]:
                raise ValueError(f"opponent {self.opponent} chose illegal move {move}")
        elif self.opponent == "lookahead":
            move = lookahead_move(seen["observation"], mask, self.k, self.gravity, self.rng)
        else:
            move = int(self.rng.choice(np.flatnonzero(mask)))
        self.game.step(move)

    def _observe(self) -> dict[str, np.ndarray]:
        seen = self.game.observe(self.me)
        return {"action_mask": np.asarray(seen["action_mask"], np.int8),
                "observation": np.asarray(seen["observation"], np.int8)}


for _id, _game in GAME_IDS.items():  # their names live in shared/config/battle.py, which needs no gymnasium
    gym.register(_id, entry_point=ENTRY_POINT, kwargs={"game": _game})
