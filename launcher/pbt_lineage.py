"""A population's lineage: what happened to which member when, as JSON lines (`lineage.jsonl`) and as a plot
(`lineage.png`).

Every row has the wall time, the member and its env steps. `start` rows give a member's initial settings, `score`
rows its score each time it is ranked, `exploit` rows a copy: which member it copied (`source`, at the source's env
steps and score), the checkpoint loaded, and the settings before and after the perturbation. The file is appended
as events happen, so a population killed midway keeps what it did; the plot is drawn from the file alone.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rlfleet.shared.extras import require


class Lineage:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: str, member: str, env_steps: int, **fields: Any) -> dict[str, Any]:
        row = {"time": round(time.time(), 3), "event": event, "member": member, "env_steps": env_steps, **fields}
        with open(self.path, "a") as out:
            out.write(json.dumps(row, sort_keys=True) + "\n")
        return row

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]


def plot_lineage(rows: list[dict[str, Any]], settings: list[str], out: Path) -> Path:
    """Members' scores over env steps with each copy as an arrow from the source's point to the copier's, and one
    panel per setting with each member's value over env steps."""
    matplotlib = require("matplotlib", "plot", "the lineage plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    members = sorted({r["member"] for r in rows}, key=lambda m: int(m.rpartition("-")[2]))
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(members)}
    fig, axes = plt.subplots(1 + len(settings), 1, figsize=(10, 4 + 2.2 * len(settings)), sharex=True,
                             squeeze=False)
    ax = axes[0][0]
    for member in members:
        points = [(r["env_steps"], r["score"]) for r in rows
                  if r["member"] == member and r["event"] == "score" and r["score"] is not None]
        if points:
            ax.plot(*zip(*points, strict=True), marker=".", color=colours[member], label=member)
    for r in rows:  # the copier's score jumps to its source's: an arrow in the source's colour
        if r["event"] == "exploit" and r.get("source_score") is not None:
            ax.annotate("", xy=(r["env_steps"], r["source_score"]), xytext=(r["env_steps"], r["score"]),
                        arrowprops={"arrowstyle": "-|>", "color": colours[r["source"]], "lw": 1.5})
            ax.text(r["env_steps"], r["source_score"], f" {r['member']} <- {r['source']}", fontsize=7,
                    color=colours[r["member"]], va="bottom")
    ax.set_ylabel("score")
    ax.set_title("population: scores (arrows: a member loads another's checkpoint, in the source's colour)")
    ax.legend(loc="lower right", fontsize=8)
    for panel, key in enumerate(settings, start=1):
        ax = axes[panel][0]
        for member in members:
            points = setting_path(rows, member, key)
            if points:
                ax.step(*zip(*points, strict=True), where="post", color=colours[member])
        ax.set_ylabel(key, fontsize=8)
        values = [v for r in rows for v in ([r.get("settings", {}).get(key)] + [r.get("new_settings", {}).get(key)])
                  if isinstance(v, (int, float)) and v > 0]
        if values and max(values) / min(values) > 20:
            ax.set_yscale("log")
    axes[-1][0].set_xlabel("member env steps")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def setting_path(rows: list[dict[str, Any]], member: str, key: str) -> list[tuple[int, float]]:
    """(env steps, value) of `member`'s setting `key` at each of its events, in the file's order: a copy is
    ranked at the env steps it copies at, so sorting would put its new value before the old one it replaced."""
    return [(r["env_steps"], r["new_settings" if r["event"] == "exploit" else "settings"][key])
            for r in rows if r["member"] == member and r["event"] in ("start", "score", "exploit")]
