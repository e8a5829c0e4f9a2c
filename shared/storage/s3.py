"""The payload store in an S3-compatible object store (AWS S3, SeaweedFS, MinIO...), through boto3.

Objects live under `<prefix>/<relpath>` of one bucket, with the same validated relative paths as the local
store, so no path can reach outside the prefix. A PUT is atomic (readers see the old object, nothing, or all
of the new one), so a collector uploads first and reports after, as with files; readers check the sha256.

Every call is retried: botocore retries transient failures itself (standard mode, explicit timeouts), and on
top of that a store that stays unreachable or refuses us (endpoint, credentials, bucket) is retried with
backoff for `retry_seconds`, each attempt logging which setting to check, before StoreUnavailable is raised.
Credentials come from boto3's usual chain (environment, AWS_SHARED_CREDENTIALS_FILE, ...) and are never logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as EndpointError

from rlfleet.shared.storage.protocol import IntegrityError, StoreUnavailable, check_path, sha256_hex

log = logging.getLogger(__name__)
T = TypeVar("T")
_CREDENTIALS = ("the object store refused the credentials: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY "
                "or AWS_SHARED_CREDENTIALS_FILE")
_DENIED = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken", "403"}
_MISSING = {"NoSuchKey", "404", "NotFound"}
DELETE_BATCH = 1000  # the most keys one DeleteObjects request may carry


def client_config(connect_timeout: float = 5.0, read_timeout: float = 30.0, attempts: int = 4) -> Config:
    """Timeouts and retries set explicitly (botocore's defaults wait 60 s per read), path-style addressing,
    which every S3-compatible server understands (virtual hosts need DNS for each bucket), and a connection
    pool as large as the coordinator's thread pool, whose size checks run concurrently."""
    return Config(connect_timeout=connect_timeout, read_timeout=read_timeout,
                  retries={"mode": "standard", "max_attempts": attempts}, s3={"addressing_style": "path"},
                  max_pool_connections=32)


class S3Store:
    # Every call is a network round trip: an event loop must run them in a thread.
    local = False

    def __init__(self, bucket: str, prefix: str, endpoint_url: str | None, *, retry_seconds: float = 60.0,
                 config: Config | None = None) -> None:
        self.bucket, self.prefix, self.endpoint_url = bucket, prefix.strip("/"), endpoint_url
        self.retry_seconds = retry_seconds
        self.client: Any = boto3.session.Session().client("s3", endpoint_url=endpoint_url,
                                                          config=config or client_config())

    def describe(self) -> str:
        where = f" at {self.endpoint_url}" if self.endpoint_url else ""
        return f"s3://{self.bucket}/{self.prefix}{where}"

    def _key(self, relpath: str) -> str:
        return f"{self.prefix}/{check_path(relpath)}" if self.prefix else check_path(relpath)

    def _relpath(self, key: str) -> str:
        return key[len(self.prefix) + 1:] if self.prefix else key

    # ----- errors and retries ------------------------------------------------------------------------------
    def _problem(self, exc: Exception, bucket_call: bool = False) -> str | None:
        """What is wrong, naming the setting to check; None for an error that retrying cannot fix. `bucket_call`:
        a 404 means the bucket (a HEAD of the bucket answers a bare 404 where a GET would say NoSuchBucket)."""
        if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
            return ("no usable AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                    "AWS_SHARED_CREDENTIALS_FILE")
        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            if code == "NoSuchBucket" or (bucket_call and code in _MISSING):
                return (f"bucket {self.bucket!r} (RLFLEET_STORE_URL) does not exist on "
                        f"{self.endpoint_url or 'AWS'}: create it, or fix RLFLEET_STORE_URL")
            if code in _DENIED:
                return f"{_CREDENTIALS} ({code})"
            if status >= 500 or code in ("SlowDown", "ServiceUnavailable", "InternalError"):
                return f"the object store at {self.endpoint_url or 'AWS'} answered {status} {code}"
            return None
        if isinstance(exc, (EndpointError, HTTPClientError)):  # connection refused, DNS, timeouts: the endpoint
            return (f"cannot reach the object store at RLFLEET_S3_ENDPOINT_URL={self.endpoint_url or '(AWS)'}: "
                    f"{type(exc).__name__}: {exc}")
        return None

    def _call(self, what: str, fn: Callable[[], T], bucket_call: bool = False) -> T:
        """`fn()`, retried with capped exponential backoff while the store is unreachable or misconfigured."""
        deadline = time.monotonic() + self.retry_seconds
        delay = 0.5
        while True:
            try:
                return fn()
            except (BotoCoreError, ClientError) as exc:
                problem = self._problem(exc, bucket_call)
                if problem is None:
                    raise
                if time.monotonic() + delay > deadline:
                    raise StoreUnavailable(f"{what} {self.describe()}: {problem} (gave up after "
                                           f"{self.retry_seconds:.0f}s)") from None
                log.warning("%s %s: %s; retrying in %.1fs", what, self.describe(), problem, delay)
                time.sleep(delay)
                delay = min(delay * 2, 30.0)

    @staticmethod
    def _missing(exc: ClientError) -> bool:
        return str(exc.response.get("Error", {}).get("Code", "")) in _MISSING

    # ----- the interface -----------------------------------------------------------------------------------
    def check(self) -> None:
        """Reach the bucket once (at service start), so a wrong setting is named before any work is done."""
        self._call("checking", lambda: self.client.head_bucket(Bucket=self.bucket), bucket_call=True)

    def create_bucket(self) -> bool:
        """Create the bucket if it does not exist (`rlfleet store-init`, for a fresh object store); True if it
        was created. Services never create it themselves: a missing bucket is more often a typo in the URL."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return False
        except ClientError as exc:
            if not self._missing(exc):
                raise
        self._call("creating the bucket of", lambda: self.client.create_bucket(Bucket=self.bucket))
        return True

    def put(self, relpath: str, data: bytes) -> str:
        key, sha = self._key(relpath), sha256_hex(data)
        self._call("writing to", lambda: self.client.put_object(Bucket=self.bucket, Key=key, Body=data))
        return sha

    def get(self, relpath: str, sha256: str | None = None, max_bytes: int = 1 << 30) -> bytes:
        key = self._key(relpath)

        def read() -> bytes:
            try:
                body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            except ClientError as exc:
                if self._missing(exc):
                    raise FileNotFoundError(f"{relpath}: not in {self.describe()}") from None
                raise
            with body:
                return bytes(body.read(max_bytes + 1))

        data = self._call("reading from", read)
        if len(data) > max_bytes:
            raise IntegrityError(f"{relpath}: larger than the {max_bytes}-byte limit")
        if sha256 is not None and sha256_hex(data) != sha256:
            raise IntegrityError(f"{relpath}: sha256 mismatch (object changed or corrupt)")
        return data

    def size(self, relpath: str) -> int | None:
        key = self._key(relpath)

        def head() -> int | None:
            try:
                return int(self.client.head_object(Bucket=self.bucket, Key=key)["ContentLength"])
            except ClientError as exc:
                if self._missing(exc):
                    return None
                raise

        return self._call("asking the size in", head)

    def _objects(self, prefix: str) -> list[dict]:
        """Every object under the directory `prefix` ("" for all), with Key, LastModified..., through all pages."""
        key_prefix = (self._key(prefix) if prefix else self.prefix) + "/"

        def listing() -> list[dict]:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=key_prefix)
            return [obj for page in pages for obj in page.get("Contents", [])]

        return self._call("listing", listing)

    def list_prefix(self, prefix: str) -> list[str]:
        return sorted(self._relpath(obj["Key"]) for obj in self._objects(prefix))

    def delete(self, relpath: str) -> bool:
        """Delete one object; True if it was there (S3 deletes answer alike either way, hence the HEAD)."""
        if self.size(relpath) is None:
            return False
        key = self._key(relpath)
        self._call("deleting from", lambda: self.client.delete_object(Bucket=self.bucket, Key=key))
        return True

    def delete_many(self, relpaths: list[str]) -> int:
        """Delete in batches of 1000 keys per request. An invalid path is skipped; returns how many were deleted
        (S3 reports deleting absent keys as success, so this counts requested keys the store did not refuse)."""
        keys = []
        for relpath in relpaths:
            try:
                keys.append(self._key(relpath))
            except ValueError:
                log.warning("not deleting %r: not a valid store path", relpath)
        deleted = 0
        for start in range(0, len(keys), DELETE_BATCH):
            batch = [{"Key": key} for key in keys[start:start + DELETE_BATCH]]
            reply = self._call("deleting from", partial(self.client.delete_objects, Bucket=self.bucket,
                                                        Delete={"Objects": batch, "Quiet": True}))
            errors = reply.get("Errors", [])
            for err in errors[:3]:
                log.warning("could not delete %s: %s", err.get("Key"), err.get("Code"))
            deleted += len(batch) - len(errors)
        return deleted

    def delete_unreferenced(self, prefix: str, keep: set[str], older_than: float) -> int:
        """The GC sweep: objects under `prefix` not in `keep` whose LastModified (the store's clock) is before
        `older_than`. The grace should dwarf any clock skew between the store and the caller."""
        doomed = [self._relpath(obj["Key"]) for obj in self._objects(prefix)
                  if obj["LastModified"].timestamp() < older_than and self._relpath(obj["Key"]) not in keep]
        return self.delete_many(doomed) if doomed else 0
