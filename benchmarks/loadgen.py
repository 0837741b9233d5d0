"""Load generators for the service benchmark: wrk (preferred) or a Python fallback.

``wrk`` (Debian package ``wrk``) is a C load generator: one thread keeps 16 connections
busy at tens of thousands of requests per second, far more than the service can answer,
so the figures are the service's.  It is installed with apt-get when missing and this
process runs as root; otherwise the fallback is a closed-loop asyncio generator over
httpx, which costs a few hundred microseconds of Python per request on the same cores:
its single-row figures are then pessimistic, and the benchmark says so in its output.

Both return a :class:`Run`: request count, duration, errors and the latency percentiles
(each request timed from the first byte sent to the last byte received; closed loop: a
client sends its next request when the previous answer has arrived).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

LUA = Path(__file__).with_name("bodies.lua")
JSON = "application/json"
PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class Run:
    """One timed run of one scenario."""

    requests: int
    seconds: float
    errors: int  # non-2xx answers, timeouts, socket errors
    latency_ms: dict[str, float]  # p50, p90, p95, p99, mean, max

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def find_wrk(install: bool = True) -> tuple[str | None, str]:
    """wrk's path (None: use the Python generator) and a sentence saying which and why."""
    path = shutil.which("wrk")
    if path:
        return path, f"wrk ({path})"
    if install and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install_wrk = ["apt-get", "install", "-y", "-q", "wrk"]
        for commands in ([install_wrk], [["apt-get", "update", "-q"], install_wrk]):
            for command in commands:
                subprocess.run(command, env=env, capture_output=True, check=False)
            path = shutil.which("wrk")
            if path:
                return path, f"wrk ({path}, installed now with apt-get)"
    return None, (
        "Python asyncio + httpx (wrk not found: `apt-get install wrk` for better figures; "
        "this generator spends a few hundred microseconds of CPU per request on the same "
        "machine, so single-row figures are pessimistic)"
    )


class LoadGenerator:
    """Runs closed-loop load against a URL with bodies taken in turn."""

    def __init__(self, wrk: str | None) -> None:
        self.wrk = wrk
        self._folder = tempfile.TemporaryDirectory(prefix="bench-bodies-")

    def close(self) -> None:
        self._folder.cleanup()

    def run(
        self,
        url: str,
        bodies: list[bytes],
        clients: int,
        seconds: float,
        content_type: str = JSON,
    ) -> Run:
        """Closed-loop load: ``bodies`` (bytes of any kind) POSTed in turn to ``url`` (its
        query string included) with ``content_type``."""
        if self.wrk is not None:
            return self._wrk(url, bodies, clients, seconds, content_type)
        return asyncio.run(_python_run(url, bodies, clients, seconds, content_type))

    def _body_files(self, bodies: list[bytes]) -> list[str]:
        """One file per body (written once per list of bodies), read by wrk in binary mode.
        Named by the bodies' digest, not by ``id()``: a list freed after one model may share
        its id with another model's list."""
        digest = hashlib.sha256()
        for body in bodies:
            digest.update(hashlib.sha256(body).digest())
        folder = Path(self._folder.name) / f"bodies-{digest.hexdigest()[:16]}"
        if not folder.exists():
            folder.mkdir()
            for i, body in enumerate(bodies):
                (folder / f"{i}.body").write_bytes(body)
        return [str(folder / f"{i}.body") for i in range(len(bodies))]

    def _wrk(
        self, url: str, bodies: list[bytes], clients: int, seconds: float, content_type: str
    ) -> Run:
        command = [
            self.wrk or "wrk",
            "-t1",
            f"-c{clients}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "60s",
            "-s",
            str(LUA),
            url,
            "--",
            content_type,
            *self._body_files(bodies),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        line = next((x for x in done.stdout.splitlines() if x.startswith("WRKJSON ")), None)
        if done.returncode != 0 or line is None:
            raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
        raw = json.loads(line.removeprefix("WRKJSON "))
        latency = raw["latency_us"]
        return Run(
            requests=int(raw["requests"]),
            seconds=raw["duration_us"] / 1e6,
            errors=sum(int(v) for v in raw["errors"].values()),
            latency_ms={
                **{f"p{p}": latency[f"p{p}"] / 1e3 for p in PERCENTILES},
                "mean": latency["mean"] / 1e3,
                "max": latency["max"] / 1e3,
            },
        )


async def _python_run(
    url: str, bodies: list[bytes], clients: int, seconds: float, content_type: str
) -> Run:
    """The fallback: ``clients`` asyncio tasks, each one request at a time."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Content-Type": content_type}
    latencies: list[float] = []
    errors = 0
    async with httpx.AsyncClient(limits=limits, timeout=60.0) as client:
        started = time.perf_counter()
        deadline = started + seconds

        async def worker(first: int) -> None:
            nonlocal errors
            k = first
            while time.perf_counter() < deadline:
                body = bodies[k % len(bodies)]
                k += 1
                t0 = time.perf_counter()
                try:
                    response = await client.post(url, content=body, headers=headers)
                    ok = response.status_code < 300
                except httpx.HTTPError:
                    ok = False
                latencies.append(time.perf_counter() - t0)
                errors += not ok

        await asyncio.gather(*(worker(i) for i in range(clients)))
        elapsed = time.perf_counter() - started
    values = np.asarray(latencies) * 1e3
    return Run(
        requests=len(latencies),
        seconds=elapsed,
        errors=errors,
        latency_ms={
            **{f"p{p}": float(np.percentile(values, p)) for p in PERCENTILES},
            "mean": float(values.mean()),
            "max": float(values.max()),
        },
    )
