"""The learner.hooks section: entries validated, each hook's function loaded once (in a child process) by the
preflight, and bad input refused naming the field and what would work."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

import rlfleet.shared.config.hookcheck
from rlfleet.shared.config.hooks import HookView, load_hook
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import RunConfig, load_run_config
from tests.support import hooks as hook_functions
from tests.support.repo import REPO

RECORD = "tests.support.hooks:record"


def _load(tmp_path: Path, hooks: list[dict]) -> RunConfig:
    """A config file with these hooks, as the launcher and the coordinator take it: loaded, then preflighted."""
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"learner": {"hooks": hooks}}))
    return preflight(load_run_config(path)).config


def test_a_hooks_section_loads_and_names_each_hook(tmp_path: Path) -> None:
    config = _load(tmp_path, [{"at": "start", "call": RECORD}, {"at": "every", "every": 100, "call": RECORD},
                              {"at": "publish", "call": "tests.support.hooks:boom"}, {"at": "end", "call": RECORD}])
    assert [hook.name for hook in config.learner.hooks] == [
        "tests.support.hooks:record@start", "tests.support.hooks:record@every", "tests.support.hooks:boom@publish",
        "tests.support.hooks:record@end"]
    assert config.learner.hooks[1].every == 100
    assert RunConfig().learner.hooks == ()


def test_the_check_runs_once_per_distinct_list_of_hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    ask = shared.config.hookcheck.ask_child

    def counted(module: str, question: str) -> object:
        asked.append(question)
        return ask(module, question)

    monkeypatch.setattr(shared.config.hookcheck, "ask_child", counted)
    monkeypatch.setattr(shared.config.hookcheck, "_problems", {})
    hooks = [{"at": "end", "call": RECORD}]
    _load(tmp_path, hooks)
    _load(tmp_path, hooks)
    preflight(RunConfig())  # no hooks: no child
    assert asked == ['["tests.support.hooks:record"]']


@pytest.mark.parametrize(("call", "hints"), [
    ("tests.support.hooks:recrod", ["has no function 'recrod'", "(did you mean 'record'?)"]),
    ("tests.support.hooks:LOG_VARIABLE", ["has no function 'LOG_VARIABLE'"]),
    ("tests.no_such_hooks:record", ["cannot import module 'tests.no_such_hooks'", "ModuleNotFoundError",
                                    "PYTHONPATH"]),
    ("tests.support.hooks:no_arguments", ["tests.support.hooks:no_arguments takes ()",
                                          "one argument, a shared.config.hooks.HookView"]),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_hook_that_does_not_load_is_refused_naming_the_field(tmp_path: Path, call: str,
                                                               hints: list[str]) -> None:
    with pytest.raises(ValidationError) as info:
        _load(tmp_path, [{"at": "start", "call": RECORD}, {"at": "end", "call": call}])
    message = str(info.value)
    assert "learner.hooks[1].call: " in message and "learner.hooks[0]" not in message
    for hint in hints:
        assert hint in message


@pytest.mark.parametrize(("hook", "loc", "hint"), [
    ({"at": "start", "call": "tests.support.hooks"}, "learner.hooks.0.call", "should match pattern"),
    ({"at": "start", "call": "tests/support/hooks.py:record"}, "learner.hooks.0.call", "should match pattern"),
    ({"at": "sometimes", "call": RECORD}, "learner.hooks.0.at", "'start', 'every', 'publish' or 'end'"),
    ({"at": "every", "call": RECORD}, "learner.hooks.0", "at=every needs `every`"),
    ({"at": "every", "every": 0, "call": RECORD}, "learner.hooks.0.every", "greater than or equal to 1"),
    ({"at": "end", "every": 5, "call": RECORD}, "learner.hooks.0", "`every` applies to at=every only"),
    ({"at": "end", "call": RECORD, "when": "later"}, "learner.hooks.0.when", "Extra inputs"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_malformed_hook_is_refused_before_anything_is_imported(tmp_path: Path, hook: dict, loc: str,
                                                                 hint: str) -> None:
    with pytest.raises(ValidationError) as info:
        _load(tmp_path, [hook])
    assert loc in str(info.value) and hint in str(info.value)


def test_a_function_listed_twice_for_one_event_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"learner.hooks\[2\]: repeats learner.hooks\[0\] "
                                              r"\(tests.support.hooks:record@every\)"):
        _load(tmp_path, [{"at": "every", "every": 10, "call": RECORD}, {"at": "end", "call": RECORD},
                         {"at": "every", "every": 20, "call": RECORD}])


def test_a_process_without_torch_checks_hooks_in_a_child_and_stays_without_them(tmp_path: Path) -> None:
    """The coordinator never imports a user's hook module, which may import torch: it still refuses a bad hook."""
    (tmp_path / "torch_hooks.py").write_text("import torch\n\ndef on_end(view):\n    pass\n")
    (tmp_path / "plain_hooks.py").write_text("def on_end(view):\n    pass\n")  # one torch import is enough
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump({"learner": {"hooks": [{"at": "end", "call": "torch_hooks:on_end"}]}}))
    bad.write_text(yaml.safe_dump({"learner": {"hooks": [{"at": "end", "call": "plain_hooks:on_ned"}]}}))
    script = f"""
import sys
from pathlib import Path
from pydantic import ValidationError
sys.path.append({str(tmp_path)!r})
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import load_run_config
print(preflight(load_run_config(Path({str(good)!r}))).config.learner.hooks[0].name)
try:
    preflight(load_run_config(Path({str(bad)!r})))
except ValidationError as exc:
    print(next(line for line in str(exc).splitlines() if "learner.hooks" in line))
print(sorted(m for m in ("torch", "torch_hooks", "plain_hooks") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    name, error, loaded = done.stdout.strip().splitlines()
    assert name == "torch_hooks:on_end@end"
    assert "learner.hooks[0].call: module 'plain_hooks' has no function 'on_ned' (did you mean 'on_end'?)" in error
    assert loaded == "[]"


def test_load_hook_gives_the_function() -> None:
    assert load_hook(0, RECORD) is hook_functions.record


def test_the_view_is_a_frozen_snapshot_holding_its_own_losses() -> None:
    losses = {"td_loss": 0.5}
    view = HookView(event="every", run_name="r", algorithm="dqn", iteration=10, transitions_trained=640,
                    policy_version=2, losses=losses)
    view.losses["td_loss"] = 9.0  # type: ignore[index]
    assert losses == {"td_loss": 0.5}  # the learner's dict is not the view's
    losses["q_mean"] = 1.0
    assert view.losses == {"td_loss": 9.0}
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.iteration = 11  # type: ignore[misc]
    assert dataclasses.asdict(view)["losses"] == {"td_loss": 9.0}  # a plain copy: asdict and json take it
