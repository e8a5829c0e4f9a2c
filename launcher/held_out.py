"""`rlfleet test`: a held-out test of a trained policy, on seeds no training or validation env used
(evaluator/testing.py plays it); the report is printed and written as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def held_out_test(run_dir: Path | None, policy: Path | None, config: Path | None, version: int | None,
                  episodes: int, num_envs: int, seed_counter: int, video: Path | None, json_path: Path | None) -> int:
    """0 whatever the score; 2 with one line on stderr for input that cannot be tested."""
    from rlfleet.evaluator.testing import UsageError, describe, load_subject, resolve_inputs, run_test
    from rlfleet.evaluator.video import VideoError
    from rlfleet.shared.storage.factory import StoreConfigError, StoreSettings
    from rlfleet.shared.storage.local import atomic_write
    from rlfleet.shared.storage.protocol import StoreUnavailable

    try:
        store = StoreSettings().store_target()  # the run's policies: its directory, or RLFLEET_STORE_URL's store
        policy_file, config_file, default_json = resolve_inputs(run_dir, policy, config, version, store)
        report = run_test(load_subject(policy_file, config_file), episodes, num_envs, seed_counter, video)
        out = json_path or default_json
        if out is not None:
            atomic_write(out, json.dumps(report, indent=2).encode())
    except (UsageError, VideoError, OSError, StoreConfigError, StoreUnavailable) as exc:
        typer.echo(f"rlfleet test: {exc}", err=True)
        return 2
    typer.echo(describe(report))
    if out is not None:
        typer.echo(f"json     {out}")
    return 0
