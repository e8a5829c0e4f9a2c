"""Wire models of two-player games: won/drawn/lost records, the opponent pool collectors and the evaluator
draw from (`GET /v1/opponents`), and self-play's section of the status.

Re-exported by shared/wire/__init__.py, which services import every wire model from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated

from pydantic import Field

from rlfleet.shared.config.battle import BattleBar
from rlfleet.shared.wire.base import Count, PolicyRef, Wire

# Who played the other seat: a baseline (random, lookahead), the latest version ("latest") or a pool
# version ("v12").
OPPONENT_PATTERN = r"^(random|lookahead|latest|v[1-9][0-9]{0,15})$"
Opponent = Annotated[str, Field(pattern=OPPONENT_PATTERN, description=(
    "who played the other seat: random, lookahead (baselines), latest (the newest policy) or vN (a pool "
    "version)"))]


class Tally(Wire):
    wins: Count
    """Games won."""
    draws: Count
    """Games drawn."""
    losses: Count
    """Games lost."""

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def win_rate(self) -> float:
        return self.wins / self.games

    @property
    def win_or_draw_rate(self) -> float:
        return (self.wins + self.draws) / self.games


class BattleRecord(Tally):
    """One policy version's games against one opponent, from the version's seat (seats alternate)."""

    opponent: Opponent

    @classmethod
    def of(cls, opponent: str, returns: Sequence[float]) -> BattleRecord:
        """The record of games returning +1 / 0 / -1 from the policy's seat."""
        return cls(opponent=opponent, wins=sum(r > 0 for r in returns), draws=sum(r == 0 for r in returns),
                   losses=sum(r < 0 for r in returns))

    def __str__(self) -> str:
        return (f"vs {self.opponent}: {self.wins} won, {self.draws} drawn, {self.losses} lost of {self.games} "
                f"(win {self.win_rate:.3f}, win or draw {self.win_or_draw_rate:.3f})")


def rule_records(against: Mapping[str, BattleBar], returns: Sequence[float]) -> list[BattleRecord]:
    """A battle rule's games, as the evaluator plays and reports them (an equal block of returns per baseline, in
    the rule's order), counted per baseline."""
    games = len(returns) // len(against)
    return [BattleRecord.of(name, returns[k * games:(k + 1) * games]) for k, name in enumerate(against)]


def rule_met(against: Mapping[str, BattleBar], records: Sequence[BattleRecord]) -> bool:
    """Whether the records meet every baseline's bar of the rule."""
    by_name = {r.opponent: r for r in records}
    return all(bar.met(by_name[name].wins, by_name[name].draws, by_name[name].games) for name, bar in against.items())


class OpponentPool(Wire):
    """The policies games may be played against: `weights` say how often each kind is drawn per game."""

    latest: PolicyRef | None = Field(description="the newest durable version (null: none published yet)")
    pool: list[PolicyRef] = Field(description="earlier versions kept as opponents, oldest first")
    weights: dict[str, float] = Field(description="self_play.weights: latest, pool, random, lookahead")


class SelfPlayStatus(Wire):
    pool_versions: list[int] = Field(description="versions in the opponent pool, oldest first")
    training: dict[str, Tally] = Field(description=(
        "training games finished so far, by the kind of opponent drawn: latest, pool, random, lookahead"))
    pool_missing: int = Field(0, description=(
        "pool versions whose file was found gone from the store (deleted outside rlfleet) and left the pool"))
    latest_elo: float | None = Field(None, description="Elo rating of the newest validated version")
    best_elo: float | None = Field(None, description="the highest Elo rating of any validated version")
