"""Elo ratings of policy versions from their games (two-player runs), for curves and status.

Ratings are the maximum-likelihood Bradley-Terry strengths of every player at once (versions, pool versions
they played, baselines), fitted by Hunter's (2004) MM iteration, a draw counting half a win for each side.
Elo = 400 log10(strength), with the random baseline at 0 so a version's rating reads as its distance above
random play. Each player also gets one virtual draw against random: a version that won every game would
otherwise have an infinite rating, and one never linked to random none at all. That prior pulls ratings a
little toward 0; with hundreds of games per version it moves them by a few points.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

ANCHOR = "random"
ITERATIONS = 2000
TOLERANCE = 1e-10


def elo_ratings(records: Iterable[tuple[str, str, int, int, int]]) -> dict[str, float]:
    """{player: Elo} from (player, opponent, wins, draws, losses) records, random at 0."""
    names: dict[str, int] = {ANCHOR: 0}
    rows: list[tuple[int, int, float, float]] = []  # (i, j, games, points of i)
    for player, opponent, wins, draws, losses in records:
        games = wins + draws + losses
        if games == 0 or player == opponent:
            continue
        first, second = names.setdefault(player, len(names)), names.setdefault(opponent, len(names))
        rows.append((first, second, games, wins + 0.5 * draws))
    rows += [(k, 0, 1.0, 0.5) for k in range(1, len(names))]  # the prior: one draw against random each
    if len(names) == 1:
        return {ANCHOR: 0.0}
    i, j, n, points = (np.array(col) for col in zip(*rows, strict=True))
    size = len(names)
    # both sides of every pairing: i scores `points` of n, j scores n - points
    a, b = np.concatenate([i, j]).astype(np.int64), np.concatenate([j, i]).astype(np.int64)
    played = np.concatenate([n, n])
    score = np.bincount(a, weights=np.concatenate([points, n - points]), minlength=size)
    score = np.maximum(score, 1e-9)  # a player that never scored: tiny, not zero (log of it stays finite)
    strength = np.ones(size)
    for _ in range(ITERATIONS):
        denominator = np.bincount(a, weights=played / (strength[a] + strength[b]), minlength=size)
        fresh = score / denominator
        fresh /= fresh[0]
        if np.max(np.abs(np.log(fresh) - np.log(strength))) < TOLERANCE:
            strength = fresh
            break
        strength = fresh
    elo = 400.0 * np.log10(strength)
    return {name: float(elo[k]) for name, k in names.items()}
