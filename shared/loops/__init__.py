"""The loop-kind registry: one line per kind in `_KINDS`, beside the algorithm registry (shared/algorithms/).

Adding a loop kind is its own modules (its entry here in shared/loops/<kind>.py, its coordinator workload, its
trainer, and where it has them its routes and wire models) plus its line in `_KINDS`; nothing else in rlfleet
names it. An algorithm names its kind in `AlgorithmSpec.loop`. Listed rather than discovered: the order is the
order the coordinator mounts the kinds' routers in.
"""

from __future__ import annotations

import importlib

from rlfleet.shared.loops.kind import LoopKind

_KINDS = (
    "replay",
    "sequences",
    "chunks",
    "population",
    "dataset",
)


def _register() -> dict[str, LoopKind]:
    kinds: dict[str, LoopKind] = {}
    for module in _KINDS:
        kind = getattr(importlib.import_module(f"{__name__}.{module}"), "KIND", None)
        if not isinstance(kind, LoopKind) or kind.name != module:
            raise RuntimeError(f"shared/loops/{module}.py must define KIND = LoopKind(name={module!r}, ...)")
        kinds[kind.name] = kind
    return kinds


LOOPS: dict[str, LoopKind] = _register()


def loop_of(name: str) -> LoopKind:
    """The kind an algorithm's `loop` names; a name no kind is registered under is refused, naming those that are."""
    try:
        return LOOPS[name]
    except KeyError:
        raise KeyError(f"no loop kind {name!r}: the registered kinds are {', '.join(LOOPS)}") from None
