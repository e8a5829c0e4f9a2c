"""The dashboard's page and its poll: public assets, a read-scoped compact update, rows only once each."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from rlfleet.coordinator.main import create_app
from rlfleet.coordinator.observe.timeline import Timeline
from tests.support.api import auth, make_settings, register


def test_the_page_and_its_assets_are_served_from_the_package_without_a_token(tmp_path: Path) -> None:
    settings, _ = make_settings(tmp_path)
    with TestClient(create_app(settings)) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]  # nothing from another origin
        assert "/dashboard/dashboard.js" in page.text and "http" not in page.text.split("<body>")[0]
        script = client.get("/dashboard/dashboard.js")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        assert client.get("/dashboard/dashboard.css").status_code == 200
        assert client.get("/dashboard/../main.py").status_code == 404
        assert client.get("/dashboard/nothing.js").json()["error"] == "not_found"


def test_a_poll_needs_a_token_and_returns_only_what_the_page_lacks(tmp_path: Path) -> None:
    settings, tokens = make_settings(tmp_path, tick_seconds=3600)  # rows come from this test only
    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/dashboard").status_code == 401
        assert client.get("/v1/dashboard", headers=auth("wrong-token-0123456789")).status_code == 401
        register(client, tokens["collector"], "collector")
        run, timeline = client.app.state.run, client.app.state.timeline  # type: ignore[attr-defined]
        for _ in range(3):
            timeline.record(run.status())
        first = client.get("/v1/dashboard", headers=auth(tokens["read"])).json()
        assert [row[0] for row in first["rows"]] == [1, 2, 3] and first["seq"] == 3
        snapshot = first["snapshot"]
        assert snapshot["run_state"] == "running" and len(snapshot["workers"]) == 1
        assert snapshot["solve_rule"] == "retest_lower_bound_95"  # the page shows the rule beside the tests
        assert snapshot["worker_columns"][snapshot["worker_columns"].index("kind")] == "kind"
        timeline.record(run.status())
        params = {"since": first["seq"], "boot": first["boot"]}
        second = client.get("/v1/dashboard", params=params, headers=auth(tokens["read"])).json()
        assert [row[0] for row in second["rows"]] == [4]
        again = client.get("/v1/dashboard", params={"since": 4, "boot": "another-process"},
                           headers=auth(tokens["read"])).json()
        assert len(again["rows"]) == 4  # the page's rows came from another coordinator process: all again


def test_the_timeline_stays_bounded_and_the_snapshot_is_built_once_per_tick(tmp_path: Path) -> None:
    settings, _ = make_settings(tmp_path)
    with TestClient(create_app(settings)) as client:
        status = client.app.state.run.status()  # type: ignore[attr-defined]
    timeline = Timeline(limit=100)
    for _ in range(1000):
        timeline.record(status)
    assert len(timeline.rows) <= 100 and timeline.seqs == sorted(timeline.seqs) and timeline.seqs[-1] == 1000
    assert timeline.seqs[-50:] == list(range(951, 1001))  # recent rows stay dense, old ones are thinned
    assert timeline.snapshot() is timeline.snapshot()  # cached bytes until the next tick



def test_every_asset_is_package_data() -> None:
    """An installed package (pip install ., the Docker image) must ship every file the page loads."""
    import fnmatch
    import tomllib

    from tests.support.repo import REPO

    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "rlfleet.coordinator.webui"]
    assets = [p.name for p in (REPO / "coordinator" / "webui").iterdir() if p.suffix in (".html", ".js", ".css")]
    assert assets and all(any(fnmatch.fnmatch(name, pattern) for pattern in patterns) for name in assets)


def test_a_resumed_coordinator_shows_the_curves_from_the_run_start(tmp_path: Path) -> None:
    settings, tokens = make_settings(tmp_path, tick_seconds=0.05)
    with TestClient(create_app(settings)) as client:
        _wait_for_rows(client, tokens, 3)
    with open(next(tmp_path.rglob("metrics.csv")), "a") as fh:
        fh.write("12.5,torn")  # a line cut by a killed coordinator
    settings.tick_seconds = 3600
    with TestClient(create_app(settings)) as client:
        update = client.get("/v1/dashboard", headers=auth(tokens["read"])).json()
        assert len(update["rows"]) >= 3 and update["rows"][0][0] == 1  # the earlier boot's rows, torn one skipped


def _wait_for_rows(client: TestClient, tokens: dict[str, str], count: int) -> None:
    import time

    deadline = time.monotonic() + 10
    while len(client.get("/v1/dashboard", headers=auth(tokens["read"])).json()["rows"]) < count:
        assert time.monotonic() < deadline
        time.sleep(0.05)
