"""The live dashboard in a real headless Chromium against a live `rlfleet up`: the page takes the token from the
URL fragment, its returns curve gains points while the run trains, a wrong token shows a message, and a
screenshot of the page mid-run is kept (dashboard.png under $RLFLEET_ARTIFACTS, else pytest's tmp dir; its path
is printed), with one of the wrong-token message beside it (dashboard-wrong-token.png). Then /docs and /redoc
render their whole API with the browser cut off from everything but loopback (docs.png).

Chromium and chromium-driver are Debian's packages (scripts/test.sh installs them when it runs as root).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rlfleet.launcher.up import free_port
from rlfleet.shared.solve_rule import shown
from tests.support.repo import REPO

pytestmark = pytest.mark.slow
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


def _wait(what: str, cond: Callable[[], Any], timeout: float, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def live_run(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], Path]]:
    """`rlfleet up` (DQN on CartPole, 2 collectors) on a free port, stopped through the API at the end."""
    port = free_port()
    log = open(tmp_path / "up.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "rlfleet.launcher", "up", "--data-dir", str(tmp_path / "data"),
                             "--port", str(port), "--set", "env.solve_threshold=1000",
                             "--set", "budget.max_env_steps=2000000"],
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, (tmp_path / "up.log").read_text()[-3000:]
        try:
            return httpx.get(url + "/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        _wait("the coordinator", ready, 120)
        tokens = json.loads((tmp_path / "data" / "tokens.json").read_text())
        yield url, tokens, tmp_path
        httpx.post(url + "/v1/run/stop", json={"reason": "test over"},
                   headers={"Authorization": f"Bearer {tokens['admin']}"}, timeout=10)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        log.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    if CHROMIUM is None or DRIVER is None:
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/test.sh installs them as root)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="rlfleet-chromium-")
    # Headless as root; nothing but loopback is reachable, so every background connection is switched off. The
    # network is off for the page too: every name but loopback fails to resolve, and whatever is not loopback
    # (Chromium never proxies loopback) goes to a proxy where nothing listens, so a CDN asset cannot load.
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--proxy-server=http://127.0.0.1:9",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1800", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _points(driver: Any, canvas: str, series: str = "") -> int:
    return int(driver.execute_script(
        "const c = document.getElementById(arguments[0]); return c.dataset['points' + arguments[1]] || '0';",
        canvas, series))


def test_the_dashboard_follows_a_live_run(live_run: tuple[str, dict[str, str], Path], browser: Any) -> None:
    url, tokens, tmp_path = live_run
    started = time.monotonic()
    artifacts = Path(os.environ.get("RLFLEET_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    try:
        _follow(browser, url, tokens, artifacts)
    except AssertionError:
        browser.save_screenshot(str(artifacts / "dashboard-failed.png"))
        print(f"dashboard at the failure: {artifacts / 'dashboard-failed.png'}")
        raise
    shot = artifacts / "dashboard.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 20_000
    print(f"dashboard screenshot: {shot} ({time.monotonic() - started:.0f}s into the test)")

    _docs_render_offline(browser, url, artifacts)

    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "data").rglob("*.log"))
    assert tokens["read"] not in logs and "not-a-token-of-this-run" not in logs  # never in a URL, never logged


def _follow(browser: Any, url: str, tokens: dict[str, str], artifacts: Path) -> None:

    # A wrong token: a message and the token form, not a blank page.
    browser.get(f"{url}/#token=not-a-token-of-this-run")
    notice = _wait("the wrong-token message", lambda: browser.execute_script(
        "const n = document.getElementById('notice'); return !n.hidden && n.textContent;"), 20)
    assert "refused this token" in notice
    assert browser.execute_script("return !document.getElementById('login').hidden")
    assert "token=" not in browser.current_url  # taken out of the address bar at once
    browser.save_screenshot(str(artifacts / "dashboard-wrong-token.png"))

    # The read token from the fragment: the board fills in and its curves grow while the run trains.
    browser.get(f"{url}/#token={tokens['read']}")
    _wait("the board", lambda: browser.execute_script("return !document.getElementById('board').hidden"), 20)
    assert "token=" not in browser.current_url
    assert browser.execute_script("return document.getElementById('run-state').textContent") == "running"
    first = _wait("training returns on the curve", lambda: _points(browser, "returns-steps", "Training"), 120)
    _wait("the returns curve to gain points", lambda: _points(browser, "returns-steps", "Training") > first, 60)
    _wait("a validation on the curve", lambda: _points(browser, "returns-steps", "Validation"), 180)
    _wait("learner losses", lambda: _points(browser, "losses"), 60)
    workers = browser.execute_script("return document.querySelectorAll('#workers tbody tr').length")
    assert workers == 4  # 2 collectors, the learner, the evaluator
    assert _points(browser, "lag") >= 1 and _points(browser, "sps") >= 2
    # Returns read as the CLI and the run's messages show them (POPGym's lie in [-1, 1]).
    values = [-0.41416, 0.1036, -0.5, 9.4321, -183.66, 475.0, 0.0]
    assert browser.execute_script("return arguments[0].map(returnText)", values) == [shown(v) for v in values]
    # The screenshot a reviewer looks at: half a minute of training, a few validations on the curves.
    _wait("30 s of training", lambda: browser.execute_script(
        "return Number(document.getElementById('run-state').dataset.wall || 0) >= 30"), 90)


def _docs_render_offline(browser: Any, url: str, artifacts: Path) -> None:
    """Swagger UI and ReDoc, from the coordinator's own assets only, draw every operation."""
    operations = sum(len(item) for item in httpx.get(url + "/openapi.json", timeout=10).json()["paths"].values())
    browser.get(f"{url}/docs")
    count = "return document.querySelectorAll(arguments[0]).length"
    _wait("Swagger UI to draw every operation", lambda: browser.execute_script(count, ".opblock") >= operations, 30)
    assert browser.execute_script(count, ".opblock") == operations
    assert "rlfleet coordinator" in browser.execute_script("return document.querySelector('.info .title').textContent")
    browser.save_screenshot(str(artifacts / "docs.png"))
    browser.get(f"{url}/redoc")
    _wait("ReDoc to draw every operation", lambda: browser.execute_script(
        count, '[data-section-id^="operation/"]') >= operations, 30)
