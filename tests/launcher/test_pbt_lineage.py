"""The lineage file and its plot (launcher/pbt_lineage.py): rows read back as written, a member's settings drawn
in the order they held."""

from __future__ import annotations

from pathlib import Path

from rlfleet.launcher.pbt_lineage import Lineage, plot_lineage, setting_path

LR = "algo.learning_rate"


def _population(path: Path) -> Lineage:
    lineage = Lineage(path)
    lineage.write("start", "member-0", 0, settings={LR: 1e-3}, seed=0, port=1)
    lineage.write("start", "member-1", 0, settings={LR: 2e-3}, seed=1, port=2)
    lineage.write("score", "member-0", 4096, score=20.0, settings={LR: 1e-3})
    lineage.write("score", "member-1", 4096, score=10.0, settings={LR: 2e-3})
    lineage.write("exploit", "member-1", 4096, score=10.0, source="member-0", source_env_steps=4100,
                  source_score=20.0, checkpoint="learner-0000000032.pt", old_settings={LR: 2e-3},
                  new_settings={LR: 8e-4})
    lineage.write("score", "member-1", 8192, score=30.0, settings={LR: 8e-4})
    return lineage


def test_a_copy_replaces_the_setting_it_was_ranked_with(tmp_path: Path) -> None:
    """At one env-step count the old value comes before the copy's (sorting the points put 2e-3 after 8e-4, and
    drew the old value as held until the next ranking)."""
    rows = _population(tmp_path / "lineage.jsonl").rows()
    assert setting_path(rows, "member-1", LR) == [(0, 2e-3), (4096, 2e-3), (4096, 8e-4), (8192, 8e-4)]


def test_the_plot_is_written_from_the_file_alone(tmp_path: Path) -> None:
    rows = _population(tmp_path / "lineage.jsonl").rows()
    assert [r["event"] for r in rows] == ["start", "start", "score", "score", "exploit", "score"]
    out = plot_lineage(rows, [LR], tmp_path / "lineage.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
