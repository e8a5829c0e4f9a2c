"""Config of two-player runs: self-play's opponent pool (`self_play`) and the battle solve rule
(`evaluation.against`).

Kept apart from shared/config/run_config.py, which assembles the run config from sections like these, and free of
gymnasium, which the coordinator never imports: the games' names live here, shared/envs/two_player.py registers them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from rlfleet.shared.config.base import Strict

BASELINES = ("random", "lookahead")  # the fixed opponents of shared/envs/two_player.py's games
ENTRY_POINT = "rlfleet.shared.envs.two_player:TwoPlayerEnv"
GAME_IDS = {"rlfleet/TicTacToe-v0": "tictactoe", "rlfleet/ConnectFour-v0": "connect_four"}

SELF_PLAY_CLASSES = ("latest", "pool", *BASELINES)  # what self_play.weights may name
MAX_POOL = 64


class SelfPlayConfig(Strict):
    """Collectors play the learning policy against opponents drawn per game: the latest published version,
    a version from the coordinator's pool (every `every_versions`-th published version, the newest
    `pool_size` of them, kept in the store while they are in the pool), or a baseline."""

    every_versions: Annotated[int, Field(ge=1, le=1_000_000, description=(
        "a published version joins the opponent pool when its number is a multiple of this"))] = 10
    pool_size: Annotated[int, Field(ge=1, le=MAX_POOL, description=(
        "versions the pool holds: the newest ones; an older one leaves it (and the store, once the policy "
        "book has dropped it too)"))] = 8
    weights: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=lambda: {"latest": 0.4, "pool": 0.4, "random": 0.1, "lookahead": 0.1}, description=(
            "how often each kind of opponent is drawn per game: latest, pool (split evenly over its versions) and "
            "the baselines random and lookahead; kinds not yet available (no policy published) are left out"))
    opponent_epsilon: Annotated[float, Field(ge=0, le=1, description=(
        "policy opponents (latest and pool versions) play a uniformly random legal move with this probability, in "
        "training and in the evaluator's pool games: greedy play against greedy play repeats the same two games "
        "(one per seat)"))] = 0.1
    eval_pool_versions: Annotated[int, Field(ge=0, le=MAX_POOL, description=(
        "pool versions each validation also plays (sampled per version; their records feed the Elo ratings)"))] = 2
    eval_pool_games: Annotated[int, Field(ge=2, le=10_000, description=(
        "games each validation plays against each sampled pool version, seats alternating"))] = 20

    @model_validator(mode="after")
    def _weights(self) -> SelfPlayConfig:
        unknown = sorted(set(self.weights) - set(SELF_PLAY_CLASSES))
        if unknown:
            raise ValueError(f"self_play.weights names {unknown}: use {list(SELF_PLAY_CLASSES)}")
        if not any(self.weights.get(kind, 0) > 0 for kind in BASELINES):
            raise ValueError("self_play.weights: give a baseline (random or lookahead) a positive weight, so games "
                             "can be played before the first policy is published")
        return self


class BattleBar(Strict):
    """What a policy must reach against one baseline, over that baseline's games (seats alternating)."""

    min_win: Annotated[float, Field(ge=0, le=1)] | None = None
    """The least share of games won (null: no bar on wins alone)."""
    min_win_or_draw: Annotated[float, Field(ge=0, le=1)] | None = None
    """The least share of games won or drawn (null: no such bar)."""

    @model_validator(mode="after")
    def _some_bar(self) -> BattleBar:
        if self.min_win is None and self.min_win_or_draw is None:
            raise ValueError("set min_win, min_win_or_draw or both")
        return self

    def met(self, wins: int, draws: int, games: int) -> bool:
        return ((self.min_win is None or wins >= self.min_win * games)
                and (self.min_win_or_draw is None or wins + draws >= self.min_win_or_draw * games))

    def __str__(self) -> str:
        parts = [f"win >= {self.min_win:g}" if self.min_win is not None else "",
                 f"win or draw >= {self.min_win_or_draw:g}" if self.min_win_or_draw is not None else ""]
        return " and ".join(p for p in parts if p)


def is_two_player(env_id: str) -> bool:
    """Whether an env section's id (a registered id or the entry point) names shared/envs/two_player.py's games."""
    return env_id in GAME_IDS or env_id == ENTRY_POINT


def check_against(against: dict[str, BattleBar]) -> None:
    unknown = sorted(set(against) - set(BASELINES))
    if unknown:
        raise ValueError(f"evaluation.against names {unknown}: the baselines are {list(BASELINES)}")
