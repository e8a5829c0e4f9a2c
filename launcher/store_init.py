"""`rlfleet store-init`: create the bucket that RLFLEET_STORE_URL names if it is missing, and check the store
answers (the s3 profile's one-shot job in compose). Nothing to do for the run directory."""

from __future__ import annotations

import typer

from rlfleet.launcher.startup import configure_logging


def store_init() -> int:
    """0 once the store is there and answers; 2 with the store's complaint (settings, credentials, reachability)."""
    from rlfleet.shared.storage.factory import StoreConfigError, StoreSettings, object_store
    from rlfleet.shared.storage.protocol import StoreUnavailable

    configure_logging()
    try:
        target = StoreSettings().store_target()
        if target is None:
            typer.echo("RLFLEET_STORE_URL is empty: payloads go to the run directory, nothing to create")
            return 0
        store = object_store(target, target.prefix)
        created = store.create_bucket()
        store.check()
    except (StoreConfigError, StoreUnavailable) as exc:
        typer.echo(f"rlfleet store-init: {exc}", err=True)
        return 2
    typer.echo(f"bucket {target.bucket} {'created' if created else 'already there'}: store reachable")
    return 0
