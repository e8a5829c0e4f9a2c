"""schemathesis against the coordinator's own OpenAPI document: generated valid and invalid requests (one at a
time and as stateful sequences) must never get a 5xx or a response that breaks the documented schema.

Excluded: schemathesis's `positive_data_acceptance` heuristic. Some rules span fields and state that JSON
Schema cannot express (a payload path must be chunks/<task_id>/<chunk_id>.msgpack and exist in the store, a
chunk must have the layout the run's config declares), so a schema-valid request can rightly get a documented
422 with a message saying what to change."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest
import schemathesis
from fastapi import FastAPI
from schemathesis import GenerationMode

from rlfleet.coordinator.main import create_app
from rlfleet.coordinator.settings import CoordinatorSettings
from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.tokens import generate_tokens_file

CASES: dict[str, int] = {}
EXCLUDED = [schemathesis.checks.positive_data_acceptance]


def _app(tmp: Path) -> tuple[FastAPI, str]:
    data = tmp / "data"
    tokens = generate_tokens_file(data / "tokens.json")
    config = tmp / "run.yaml"
    config.write_text(dump_run_config(RunConfig(name="fuzz")))
    settings = CoordinatorSettings(config=config, data_dir=data, tokens_file=data / "tokens.json",
                                   sample_wait_seconds=0, status_wait_seconds=0, tick_seconds=0.2, gc_pacing=False)
    return create_app(settings), tokens["admin"]


@pytest.fixture(scope="module")
def app_and_token(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FastAPI, str]]:
    """schemathesis starts the app's lifespan itself on first use and keeps it for the process."""
    yield _app(tmp_path_factory.mktemp("fuzz"))
    print(f"\nschemathesis cases run: {sum(CASES.values())} over {len(CASES)} operations: {CASES}")


def _schema(app: FastAPI, token: str) -> schemathesis.BaseSchema:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    schema.config.update(headers={"Authorization": f"Bearer {token}"})
    schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=40,
                                    deterministic=True)
    return schema


def _fuzz(operation: schemathesis.APIOperation, token: str) -> None:
    """Up to 60 positive and negative cases for one operation."""
    strategy = operation.as_strategy(generation_mode=GenerationMode.POSITIVE) | operation.as_strategy(
        generation_mode=GenerationMode.NEGATIVE)

    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(case=strategy)
    def check(case: schemathesis.Case) -> None:
        CASES[operation.label] = CASES.get(operation.label, 0) + 1
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        assert response.status_code < 500, f"{operation.label}: {response.status_code} {response.text[:300]}"
        case.validate_response(response, excluded_checks=EXCLUDED)

    check()


def test_every_operation_positive_and_negative(app_and_token: tuple[FastAPI, str]) -> None:
    app, token = app_and_token
    failures = []
    for result in _schema(app, token).get_all_operations():
        operation = result.ok()
        try:
            _fuzz(operation, token)
        except Exception as exc:  # collect every operation's failure, then report them together
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)


def test_stateful_sequences(app_and_token: tuple[FastAPI, str]) -> None:
    app, token = app_and_token
    base = _schema(app, token).as_state_machine()

    class Counted(base):  # type: ignore[valid-type,misc]
        def after_call(self, response: schemathesis.Response, case: schemathesis.Case) -> None:
            CASES["stateful calls"] = CASES.get("stateful calls", 0) + 1
            assert response.status_code < 500, f"{case.operation.label}: {response.status_code}"

        def validate_response(self, response: schemathesis.Response, case: schemathesis.Case,
                              additional_checks: list | None = None, **kwargs: object) -> None:
            # the module's exclusions hold here too: a chunk report's path, layout (the run config's num_envs and
            # chunk_steps) and policy version are cross-field rules JSON Schema cannot express, so a schema-valid
            # report can rightly get a documented 422
            case.validate_response(response, additional_checks=additional_checks, excluded_checks=EXCLUDED,
                                   transport_kwargs=kwargs)

    Counted.run(settings=hypothesis.settings(max_examples=30, stateful_step_count=8, deadline=None,
                                             derandomize=True, database=None,
                                             suppress_health_check=list(hypothesis.HealthCheck)))
