"""Win / draw / loss of a policy against one opponent of a two-player game (shared/two_player.py).

A game's return is +1, 0 or -1 from the policy's seat, so the evaluator's own greedy episodes (evaluator/
episodes.py: every env plays the same number of games, every started game is finished) count wins, draws and
losses once the env's opponent is fixed to the one asked for. Seats alternate game by game in each env.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluator.episodes import Act, evaluate
from shared.envconfig import EnvConfig


@dataclass(frozen=True)
class Record:
    opponent: str
    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def win_rate(self) -> float:
        return self.wins / self.games

    @property
    def win_or_draw_rate(self) -> float:
        return (self.wins + self.draws) / self.games

    def __str__(self) -> str:
        return (f"vs {self.opponent}: {self.wins} won, {self.draws} drawn, {self.losses} lost of {self.games} "
                f"(win {self.win_rate:.3f}, win or draw {self.win_or_draw_rate:.3f})")


def against(act: Act, env: EnvConfig, opponent: str, games: int, num_envs: int, seed: int) -> Record:
    """Play `games` greedy games against `opponent` alone, whatever mixture the run trained against."""
    fixed = env.model_copy(update={"kwargs": {**env.kwargs, "opponent": opponent}})
    returns, _ = evaluate(act, fixed, num_envs, games, seed)
    return Record(opponent, sum(r > 0 for r in returns), sum(r == 0 for r in returns), sum(r < 0 for r in returns))
