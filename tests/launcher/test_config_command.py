"""`rlfleet config show` prints the config a run would start with, every default included; `rlfleet config schema`
writes the run config's JSON Schema, whose committed copy the shipped configs name in their modeline and which
accepts every shipped config and refuses what validation refuses."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.launcher.config_command import MODELINE_PREFIX, run_config_schema, schema_text
from rlfleet.shared.config.run_config import RunConfig, load_run_config
from tests.support.cli import one_line_exit_2, rlfleet
from tests.support.configs import shipped_configs
from tests.support.repo import REPO

SCHEMA_FILE = REPO / "docs" / "reference" / "run-config.schema.json"


def test_the_committed_schema_is_the_generated_one() -> None:
    """A change to a config model updates the file in the same commit:
    `rlfleet config schema docs/reference/run-config.schema.json`."""
    assert SCHEMA_FILE.read_text() == schema_text()


@pytest.mark.parametrize("path", shipped_configs())
def test_each_shipped_config_names_the_committed_schema_and_is_valid_by_it(path: Path) -> None:
    first = path.read_text().splitlines()[0]
    assert first.startswith(MODELINE_PREFIX), f"{path.name}: the first line must be the yaml-language-server modeline"
    named = (path.parent / first.removeprefix(MODELINE_PREFIX)).resolve()
    assert named == SCHEMA_FILE.resolve()
    jsonschema.Draft202012Validator(json.loads(named.read_text())).validate(yaml.safe_load(path.read_text()))


@pytest.mark.parametrize(("raw", "message"), [
    ({"colector": {}}, "'colector' was unexpected"),
    ({"collector": {"num_envs": 0}}, "0 is less than the minimum of 1"),
    ({"algo": {"name": "dqn", "learning_rate": "fast"}}, "'fast' is not of type 'number'"),
])
def test_the_schema_refuses_what_validation_refuses(raw: dict, message: str) -> None:
    errors = _messages(jsonschema.Draft202012Validator(run_config_schema()).iter_errors(raw))
    assert any(message in error for error in errors), errors


def _messages(errors: Iterable[jsonschema.ValidationError]) -> list[str]:
    """Every error's message, those under a oneOf (the algorithm's section, one branch per algorithm) too."""
    return [m for e in errors for m in (e.message, *_messages(e.context or []))]


def test_the_schema_carries_the_field_docs_editors_show() -> None:
    collector = run_config_schema()["$defs"]["CollectorConfig"]["properties"]
    assert "environments stepped in one process" in collector["num_envs"]["description"]


def test_show_prints_every_default_with_the_overrides_and_loads_back(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("env: {id: CartPole-v1}\nalgo: {name: dqn}\ncollector: {num_envs: 2}\n")
    result = CliRunner().invoke(app, ["config", "show", "--config", str(tmp_path / "mine.yaml"),
                                      "--set", "seed=7", "--set", "algo.learning_rate=0.01"])
    assert result.exit_code == 0, result.output
    shown = yaml.safe_load(result.output)
    assert shown["seed"] == 7 and shown["algo"]["learning_rate"] == 0.01 and shown["collector"]["num_envs"] == 2
    assert shown["replay"]["capacity_transitions"] == 100_000  # a default the file left out
    assert shown["env"]["solve_threshold"] == 475  # CartPole-v1's registered threshold, resolved as a run does
    assert set(shown) == set(RunConfig.model_fields)
    (tmp_path / "shown.yaml").write_text(result.output)
    assert load_run_config(tmp_path / "shown.yaml") == RunConfig.model_validate(shown)


def test_show_takes_a_shipped_configs_name() -> None:
    result = CliRunner().invoke(app, ["config", "show", "--config", "cartpole-ppo"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.output)["algo"]["name"] == "ppo"


def test_show_refuses_a_bad_override_in_one_line(tmp_path: Path) -> None:
    (line,) = one_line_exit_2(rlfleet("config", "show", "--config", "cartpole-dqn", "--set",
                                      "collector.num_envs=0", cwd=tmp_path))
    assert line.startswith("rlfleet config: ") and "collector.num_envs: Input should be greater than or equal to 1" \
        in line


def test_schema_writes_the_file_or_prints_it(tmp_path: Path) -> None:
    out = tmp_path / "run.schema.json"
    written = CliRunner().invoke(app, ["config", "schema", str(out)])
    assert written.exit_code == 0 and written.output.strip() == str(out)
    assert json.loads(out.read_text()) == run_config_schema()
    printed = CliRunner().invoke(app, ["config", "schema"])
    assert json.loads(printed.output) == run_config_schema()


def test_schema_to_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    (line,) = one_line_exit_2(rlfleet("config", "schema", str(tmp_path / "missing" / "s.json"), cwd=tmp_path))
    assert line.startswith(f"rlfleet config: cannot write the schema to {tmp_path / 'missing' / 's.json'}")
