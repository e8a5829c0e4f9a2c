"""Self-play's pieces in one process: a policy plays either seat of a game from its own view, draws over the
latest version, the pool and the baselines, and the config's refusals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from pydantic import ValidationError

from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.envs.build import make_vector_env
from rlfleet.shared.envs.selfplay import draw_weights, game_space, policy_player, set_opponents
from rlfleet.shared.envs.two_player import TwoPlayerEnv
from tests.support.policies import random_actor

TICTACTOE = RunConfig.model_validate({"env": {"id": "rlfleet/TicTacToe-v0"}, "self_play": {}})


def test_a_policy_player_moves_legally_from_its_own_view_of_the_board() -> None:
    """The player is asked with the opponent's observation: its own stones in plane 0, whichever seat it holds."""
    actor = random_actor(RunPlan.of(TICTACTOE).spaces)
    seen_boards = []

    def watching(seen: dict[str, np.ndarray]) -> int:
        seen_boards.append(seen["observation"].copy())
        return policy_player(actor, game_space(TICTACTOE.env))(seen)

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
        player = policy_player(actor, space, epsilon, np.random.default_rng(0))
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
