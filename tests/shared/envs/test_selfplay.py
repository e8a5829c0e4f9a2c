"""Self-play's pieces in one process: a policy plays either seat of a game from its own view, draws over the
latest version, the pool and the baselines, a recurrent opponent's memory (its own per game, zeroed when a game
begins), and the config's refusals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from pydantic import ValidationError

from rlfleet.shared.config.base import CoreConfig
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.envs.build import make_vector_env
from rlfleet.shared.envs.selfplay import PolicyPlayer, draw_weights, game_space, set_opponents
from rlfleet.shared.envs.two_player import Player, TwoPlayerEnv
from rlfleet.shared.policy.actors import Actor, build_actor
from rlfleet.shared.policy.manifest import PolicyManifest
from tests.support.policies import manifest, policy_state, random_actor

TICTACTOE = RunConfig.model_validate({"env": {"id": "rlfleet/TicTacToe-v0"}, "self_play": {}})


def test_a_policy_player_moves_legally_from_its_own_view_of_the_board() -> None:
    """The player is asked with the opponent's observation: its own stones in plane 0, whichever seat it holds."""
    actor = random_actor(RunPlan.of(TICTACTOE).spaces)
    seen_boards = []

    def watching(seen: dict[str, np.ndarray]) -> int:
        seen_boards.append(seen["observation"].copy())
        return PolicyPlayer(actor, game_space(TICTACTOE.env))(seen)

    env = TwoPlayerEnv("tictactoe")
    env.set_opponents({"champion": 1.0}, {"champion": watching})
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        assert info["opponent"] == "champion"
        done = False
        while not done:
            obs, reward, done, _, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
            assert "illegal" not in info
    counts = [(board[..., 0].sum(), board[..., 1].sum()) for board in seen_boards]
    # to move, it has as many stones as we do (it opened) or one fewer: its own stones are plane 0
    assert all(mine in (theirs, theirs - 1) for mine, theirs in counts)
    assert any(mine == theirs - 1 for mine, theirs in counts)


def test_draw_weights_split_the_pool_and_leave_out_what_cannot_play() -> None:
    weights = {"latest": 0.4, "pool": 0.4, "random": 0.2, "lookahead": 0.0}
    assert draw_weights(weights, latest=True, pool=["v5", "v10"]) == {
        "latest": 0.4, "v5": 0.2, "v10": 0.2, "random": 0.2}
    assert draw_weights(weights, latest=False, pool=[]) == {"random": 0.2}


def test_opponents_set_on_a_vector_env_take_over_from_the_next_game() -> None:
    vec = make_vector_env(TICTACTOE.env, 2)
    try:
        set_opponents(vec, {"lookahead": 1.0}, {})
        vec.reset(seed=0)
        assert [game.unwrapped.opponent for game in vec.envs] == ["lookahead", "lookahead"]
        with pytest.raises(ValueError, match="unknown: \\['v3'\\]"):
            set_opponents(vec, {"v3": 1.0}, {})  # a name with no player behind it
    finally:
        vec.close()


def test_a_game_under_way_finishes_against_the_opponent_it_began_with() -> None:
    """New opponents (a new version, a pool that changed) take over at the next game: the one under way keeps its
    player, and with it the memory of that game, instead of losing it mid-game."""
    moved: list[str] = []

    def player(name: str) -> Player:
        def move(seen: dict[str, np.ndarray]) -> int:
            moved.append(name)
            return int(np.flatnonzero(seen["action_mask"])[0])
        return move

    env = TwoPlayerEnv("tictactoe", seat="second")
    env.set_opponents({"v5": 1.0}, {"v5": player("v5")})
    obs, _ = env.reset(seed=0)
    env.set_opponents({"v10": 1.0}, {"v10": player("v10")})  # v5 left the pool mid-game
    done = False
    while not done:
        obs, _, done, _, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        assert info["opponent"] == "v5"
    assert set(moved) == {"v5"} and len(moved) >= 3
    env.reset(seed=1)
    assert moved[-1] == "v10"


@pytest.mark.parametrize(("raw", "message"), [
    ({"self_play": {}}, "self_play needs a two-player game"),
    ({"env": {"id": "rlfleet/TicTacToe-v0", "kwargs": {"opponent": "random"}}, "self_play": {}},
     "drop env.kwargs.opponent"),
    ({"env": {"id": "rlfleet/TicTacToe-v0"}, "self_play": {"weights": {"champion": 1}}}, "names \\['champion'\\]"),
    ({"env": {"id": "rlfleet/TicTacToe-v0"}, "self_play": {"weights": {"latest": 1, "pool": 1}}},
     "give a baseline"),
    ({"env": {"id": "rlfleet/TicTacToe-v0"}, "self_play": {}, "algo": {"name": "es"}},
     "self_play needs collectors playing games"),
])
def test_self_play_configs_that_cannot_work_are_refused(raw: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RunConfig.model_validate(raw)


def test_a_policy_players_epsilon_makes_games_between_two_versions_vary() -> None:
    """Greedy against greedy repeats one game per seat; the opponent's random moves make them differ."""
    actor = random_actor(RunPlan.of(TICTACTOE).spaces)
    space = game_space(TICTACTOE.env)

    def games(epsilon: float) -> set[tuple[int, ...]]:
        player = PolicyPlayer(actor, space, epsilon, np.random.default_rng(0))
        env = TwoPlayerEnv("tictactoe", seat="first")
        env.set_opponents({"other": 1.0}, {"other": player})
        played = set()
        for seed in range(12):
            obs, _ = env.reset(seed=seed)
            moves, done = [], False
            while not done:
                flat = np.asarray(gym.spaces.flatten(space, obs), np.float32)[None]
                move = int(actor.greedy(flat)[0])
                moves.append(move)
                obs, _, done, _, _ = env.step(move)
            played.add(tuple(moves))
        return played

    assert len(games(0.0)) == 1  # the same game, every time
    assert len(games(0.5)) > 3


def recurrent_actor() -> tuple[Actor, PolicyManifest, dict[str, np.ndarray]]:
    """A tic-tac-toe Q policy with a GRU core, randomly initialised: what it remembers is never all zero."""
    spaces = RunPlan.of(TICTACTOE).spaces
    m = manifest(spaces, "q_values", (16,)).model_copy(update={"core": CoreConfig(kind="gru", hidden=8)})
    state = policy_state(m, 1)
    return build_actor(m, state), m, state


def test_a_policy_opponent_leaves_the_memory_of_the_actor_it_was_made_from_alone() -> None:
    """A self-play collector plays `latest` with the very actor that acts in its own seat, one env per row: the
    opponent's moves must not overwrite (or drop) the rows' memories."""
    actor, _, _ = recurrent_actor()
    space = game_space(TICTACTOE.env)
    flat = np.stack([np.asarray(gym.spaces.flatten(space, TwoPlayerEnv("tictactoe").reset(seed=s)[0]), np.float32)
                     for s in range(3)])
    actor.greedy(flat)
    before = actor.core_state(3)
    env = TwoPlayerEnv("tictactoe", seat="second")
    env.set_opponents({"latest": 1.0}, {"latest": PolicyPlayer(actor, space)})
    obs, _ = env.reset(seed=0)
    env.step(int(np.flatnonzero(obs["action_mask"])[0]))  # the opponent has moved twice
    assert before is not None and np.abs(before).max() > 0
    np.testing.assert_array_equal(actor.core_state(3), before)


class Recorded(PolicyPlayer):
    """A policy player that notes, before each move, which player it is, the board it sees and its memory."""

    moves: list[tuple[int, np.ndarray, np.ndarray]] = []

    def __call__(self, seen: dict[str, np.ndarray]) -> int:
        memory = self.actor.core_state(1)
        assert memory is not None
        self.moves.append((id(self), np.asarray(gym.spaces.flatten(self.space, seen), np.float32), memory))
        return super().__call__(seen)


def test_each_game_played_at_once_gives_a_recurrent_opponent_its_own_memory_zeroed_when_the_game_begins() -> None:
    """Three games at once, several after another in each: each game's opponent remembers that game alone. Its moves,
    replayed per game through a fresh actor reset at each first move, meet the memory it had before every one."""
    actor, m, state = recurrent_actor()
    space = game_space(TICTACTOE.env)
    Recorded.moves = []
    vec = make_vector_env(TICTACTOE.env, 3)
    try:
        set_opponents(vec, {"rec": 1.0}, {"rec": Recorded(actor, space)})
        obs, _ = vec.reset(seed=0)
        mask = RunPlan.of(TICTACTOE).spaces.mask_slice
        for _ in range(40):  # the first legal cell: every game lasts several moves
            obs, *_ = vec.step(np.argmax(obs[:, mask] > 0, axis=1))
    finally:
        vec.close()
    players = {player for player, _, _ in Recorded.moves}
    assert len(players) == 3  # one per game
    openings = later = 0
    for player in players:
        fresh = build_actor(m, state)
        for who, flat, memory in Recorded.moves:
            if who != player:
                continue
            if (flat[mask] > 0).sum() >= 8:  # its first move of a game: no stone of its own on the board
                fresh.reset()
                openings += 1
            else:
                later += int(np.abs(memory).max() > 0)
            expected = fresh.core_state(1)
            assert expected is not None
            np.testing.assert_allclose(memory, expected, atol=1e-6)
            fresh.greedy(flat[None])
    assert openings >= 6 and later > 0
