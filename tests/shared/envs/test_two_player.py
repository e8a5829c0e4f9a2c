"""shared.envs.two_player: PettingZoo's board games as one-seat gymnasium envs, and their baseline opponents."""

from __future__ import annotations

import numpy as np
import pytest

from rlfleet.shared.envs.two_player import TwoPlayerEnv, lookahead_move, place, wins_with


def board(rows: int, cols: int, mine: list[tuple[int, int]], theirs: list[tuple[int, int]]) -> np.ndarray:
    b = np.zeros((rows, cols, 2), np.int8)
    for r, c in mine:
        b[r, c, 0] = 1
    for r, c in theirs:
        b[r, c, 1] = 1
    return b


def test_stones_fall_in_connect_four_and_sit_where_played_in_tictactoe() -> None:
    c4 = board(6, 7, [(5, 3)], [(4, 3)])
    assert place(c4, 3, gravity=True) == (3, 3) and place(c4, 0, gravity=True) == (5, 0)
    full = board(6, 7, [(r, 2) for r in range(6)], [])
    assert place(full, 2, gravity=True) is None
    ttt = board(3, 3, [(0, 1)], [])
    assert place(ttt, 5, gravity=False) == (1, 2) and place(ttt, 1, gravity=False) is None


def test_k_in_a_row_in_every_direction() -> None:
    assert wins_with(board(3, 3, [(0, 0), (0, 1)], []), (0, 2), 0, 3)
    assert wins_with(board(3, 3, [(0, 0), (1, 1)], []), (2, 2), 0, 3)
    assert wins_with(board(3, 3, [(0, 2), (1, 1)], []), (2, 0), 0, 3)
    assert wins_with(board(6, 7, [], [(5, 0), (4, 0), (3, 0)]), (2, 0), 1, 4)
    assert not wins_with(board(3, 3, [(0, 0), (0, 1)], []), (1, 2), 0, 3)


def test_the_lookahead_wins_first_then_blocks_then_plays_at_random() -> None:
    rng = np.random.default_rng(0)
    legal = np.ones(9, bool)
    can_win = board(3, 3, [(0, 0), (0, 1)], [(1, 0), (1, 1)])  # both threaten: winning comes first
    legal[[0, 1, 3, 4]] = False
    assert lookahead_move(can_win, legal, 3, False, rng) == 2
    must_block = board(3, 3, [(0, 0)], [(1, 0), (1, 1)])
    legal = np.ones(9, bool)
    legal[[0, 3, 4]] = False
    assert lookahead_move(must_block, legal, 3, False, rng) == 5
    quiet = [lookahead_move(board(3, 3, [], []), np.ones(9, bool), 3, False, rng) for _ in range(400)]
    assert set(quiet) == set(range(9))  # no threat: any move, ties broken at random


def play(env: TwoPlayerEnv, games: int, seed: int) -> list[tuple[float, str]]:
    rng = np.random.default_rng(seed)
    results = []
    obs, info = env.reset(seed=seed)
    for _ in range(games):
        done = False
        while not done:
            action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
            obs, reward, done, _, info = env.step(action)
        results.append((float(reward), info["opponent"]))
        obs, info = env.reset()
    return results


def test_games_end_in_a_win_draw_or_loss_and_the_lookahead_beats_random_play() -> None:
    results = play(TwoPlayerEnv("tictactoe", "lookahead"), 300, seed=1)
    rewards = np.array([r for r, _ in results])
    assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0}
    assert (rewards < 0).mean() > 0.6  # measured: random play loses ~79% of its games to the lookahead
    vs_random = np.array([r for r, _ in play(TwoPlayerEnv("connect_four", "random"), 200, seed=2)])
    assert 0.3 < (vs_random > 0).mean() < 0.7


def test_seats_alternate_and_the_opponent_mixture_is_drawn_per_game() -> None:
    env = TwoPlayerEnv("tictactoe", {"random": 0.75, "lookahead": 0.25})
    env.reset(seed=3)
    seats = []
    for _ in range(400):
        seats.append(env.me)
        env.reset()
    assert seats[0] != seats[1] and seats[0] == seats[2]
    opponents = [o for _, o in play(env, 800, seed=4)]
    assert abs(opponents.count("random") / len(opponents) - 0.75) < 0.05


def test_an_illegal_move_loses_at_once_and_a_seed_repeats_the_games() -> None:
    env = TwoPlayerEnv("connect_four", "random", seat="second")
    obs, _ = env.reset(seed=5)
    assert obs["observation"][:, :, 1].sum() == 1  # the opponent opened
    env.game.reset(seed=0)
    for _ in range(6):  # both players fill column 0
        env.game.step(0)
    assert not env.game.observe(env.me)["action_mask"][0]
    _, reward, terminated, _, info = env.step(0)
    assert (reward, terminated, info.get("illegal")) == (-1.0, True, True)
    first, again = play(TwoPlayerEnv("tictactoe", "lookahead"), 50, 6), play(TwoPlayerEnv("tictactoe", "lookahead"),
                                                                              50, 6)
    assert first == again


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"game": "chess"}, "game 'chess'"),
    ({"opponent": "minimax"}, "a baseline of"),
    ({"opponent": {"random": 0.0}}, "do not all vanish"),
    ({"seat": "middle"}, "seat 'middle'"),
])
def test_bad_settings_are_refused_naming_them(kwargs, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        TwoPlayerEnv(**kwargs)
