"""docker/grafana-dashboard.json queries only metrics that /metrics exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fastapi.testclient import TestClient

from rlfleet.coordinator.main import create_app
from tests.support.api import make_settings
from tests.support.repo import REPO


def test_every_metric_the_grafana_dashboard_queries_exists(tmp_path: Path) -> None:
    doc = json.loads((REPO / "docker" / "grafana-dashboard.json").read_text())
    queried = {name for panel in doc["panels"] for target in panel["targets"]
               for name in re.findall(r"rlfleet_\w+", target["expr"])}
    settings, _ = make_settings(tmp_path)
    with TestClient(create_app(settings)) as client:
        client.get("/readyz")  # request latency has a series once a route has answered
        exposed = client.get("/metrics").text
    missing = {name for name in queried if not re.search(rf"^{name}(\{{| )", exposed, re.MULTILINE)}
    assert queried and not missing, missing
