"""What watching costs: coordinator CPU during a real training run with N dashboards open vs none.

  python bench/dashboard_cost.py [--browsers 10] [--window 15] [--repeats 4] [--warmup 20]

Starts `rlfleet up` (DQN on CartPole, 2 collectors, a threshold it cannot reach so it keeps training) on a free
loopback port, then alternates measurement windows: none watching, then --browsers simulated pages. A simulated
page does what coordinator/webui/dashboard.js does, at its poll interval (read from that file): it loads the
page and its two assets once, then polls `GET /v1/dashboard` with `since`, `boot`, `evaluations_since` and
`tests_since`, at once again when the reply says `more`. Each on its own keep-alive connection, as browsers
are. Coordinator CPU is utime+stime of its process (all threads) from /proc over each window.

Prints each window's coordinator CPU (% of a core) side by side, the medians and their ratio. The run's own
load drifts (the learner warms up, the rate limiter pauses collectors), hence alternating windows and medians;
and since that drift is larger than what ten pages add, a last window polls flat out to measure the CPU of one
poll, from which it derives what the pages add at the page's own rate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from rlfleet.launcher.up import free_port  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def poll_seconds() -> float:
    """The page's own poll interval, so the bench follows the page if it changes."""
    script = (REPO / "coordinator" / "webui" / "dashboard.js").read_text()
    match = re.search(r"const POLL_MS = (\d+);", script)
    assert match, "POLL_MS not found in dashboard.js"
    return int(match.group(1)) / 1000


def coordinator_pid(up_pid: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == up_pid and b"coordinator" in cmdline:
            return int(entry.name)
    return None


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15 of stat)


async def page(url: str, token: str, period: float, stop: asyncio.Event, counts: list[int]) -> None:
    """One open dashboard: the page's requests, nothing more."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        for asset in ("/", "/dashboard/dashboard.js", "/dashboard/dashboard.css"):
            (await http.get(asset)).raise_for_status()
        params: dict[str, str | int] = {"since": 0, "evaluations_since": 0, "tests_since": 0}
        headers = {"Authorization": f"Bearer {token}"}
        while not stop.is_set():
            resp = await http.get("/v1/dashboard", params=params, headers=headers)
            resp.raise_for_status()
            update = resp.json()
            counts[0] += 1
            counts[1] += len(resp.content)
            params = {"since": update["seq"], "boot": update["boot"], "evaluations_since": update["evaluations_next"],
                      "tests_since": update["tests_next"]}
            if not update["more"]:
                with contextlib.suppress(TimeoutError):  # the page's timer, or the end of the window
                    await asyncio.wait_for(stop.wait(), period)


async def window(pid: int, seconds: float, url: str, token: str, browsers: int,
                 period: float) -> tuple[float, list[int]]:
    """Coordinator CPU (fraction of a core) over `seconds` with `browsers` pages open; polls and bytes."""
    stop, counts = asyncio.Event(), [0, 0]
    pages = [asyncio.create_task(page(url, token, period, stop, counts)) for _ in range(browsers)]
    await asyncio.sleep(min(1.0, period / 2) if browsers else 0)  # pages loaded before the window opens
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, t1 = cpu_seconds(pid), time.monotonic()
    stop.set()
    await asyncio.gather(*pages)
    return (cpu1 - cpu0) / (t1 - t0), counts


async def measure(args: argparse.Namespace, url: str, token: str, pid: int) -> None:
    period = poll_seconds()
    none, watched, polls = [], [], [0, 0]
    print(f"coordinator pid {pid}; {args.browsers} pages polling every {period:g} s; {args.window:g} s windows")
    print(f"{'round':>5}  {'none: coord CPU':>16}  {f'{args.browsers} pages: coord CPU':>22}")
    for i in range(args.repeats):
        idle, _ = await window(pid, args.window, url, token, 0, period)
        busy, counts = await window(pid, args.window, url, token, args.browsers, period)
        none.append(idle)
        watched.append(busy)
        polls = [polls[0] + counts[0], polls[1] + counts[1]]
        print(f"{i + 1:>5}  {idle:>15.1%}  {busy:>22.1%}", flush=True)
    a, b = statistics.median(none), statistics.median(watched)
    paired = statistics.median(w / n for w, n in zip(watched, none, strict=True))
    print(f"{'median':>5}  {a:>15.1%}  {b:>22.1%}")
    print(f"ratio of medians {b / a:.3f}, median of the rounds' ratios {paired:.3f} (watched / none); "
          f"{polls[0]} polls, {polls[1] / max(polls[0], 1) / 1024:.1f} KiB per poll on average")
    # The run's own load drifts by more than the pages add; polling flat out for a few seconds shows what
    # one poll costs, and so what the pages add at the page's rate.
    burst, counts = await window(pid, args.burst, url, token, args.browsers, 0.0)
    per_poll = max(burst - a, 0.0) * args.burst / max(counts[0], 1)
    added = per_poll * args.browsers / period
    print(f"flat out: {counts[0] / args.burst:.0f} polls/s at {burst:.1%} coordinator CPU: {per_poll * 1e3:.2f} ms "
          f"per poll, so {args.browsers} pages add {added:.2%} of a core, {added / a:+.1%} of the run's "
          f"coordinator CPU")
    if args.json:
        args.json.write_text(json.dumps({"none": none, "watched": watched, "ratio": b / a, "paired_ratio": paired,
                                         "polls": polls[0], "browsers": args.browsers, "poll_seconds": period,
                                         "ms_per_poll": per_poll * 1e3, "added_share": added / a}, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--browsers", type=int, default=10)
    parser.add_argument("--window", type=float, default=15.0, help="seconds per measurement window")
    parser.add_argument("--repeats", type=int, default=4, help="pairs of windows (none, watched)")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds of training before the first window")
    parser.add_argument("--burst", type=float, default=5.0, help="seconds of polling flat out, at the end")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rlfleet-dashcost-") as tmp:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = open(Path(tmp) / "up.log", "wb")  # noqa: SIM115 - closed below
        up = subprocess.Popen([sys.executable, "-m", "rlfleet.launcher", "up", "--data-dir", f"{tmp}/data", "--port",
                               str(port), "--set", "env.solve_threshold=1000",
                               "--set", "budget.max_env_steps=100000000"],
                              cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert up.poll() is None, (Path(tmp) / "up.log").read_text()[-3000:]
                time.sleep(0.5)
            pid = coordinator_pid(up.pid)
            assert pid is not None, "no coordinator process under rlfleet up"
            token = json.loads((Path(tmp) / "data" / "tokens.json").read_text())["read"]
            time.sleep(args.warmup)
            asyncio.run(measure(args, url, token, pid))
        finally:
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                up.kill()
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
