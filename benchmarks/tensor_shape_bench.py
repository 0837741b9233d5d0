"""What a ``/v2`` request whose declared tensor shape is far larger than its data costs the
server: status, latency and peak memory, per request, in process.

Each case runs in a fresh process: the service (``create_app``, a temporary data folder)
answers one small request through httpx's ASGI transport, with ``tracemalloc`` tracing
(numpy reports its arrays to it) and the process's peak resident set read before and after
(``resource.getrusage``).  The model need not exist: the body is read before the model is
looked up.  A request of about a hundred bytes should cost about that much.

    PYTHONPATH=. .venv/bin/python benchmarks/tensor_shape_bench.py
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import orjson

from app.main import create_app
from app.settings import Settings

HEADER = "Inference-Header-Content-Length"
# name -> (datatype, declared shape, binary data or None for JSON data)
CASES: dict[str, tuple[str, list[int], bytes | None]] = {
    "BYTES [1e8, 1], one element sent": ("BYTES", [10**8, 1], b"\x01\x00\x00\x00a"),
    "BYTES [1e10, 1], one element sent": ("BYTES", [10**10, 1], b"\x01\x00\x00\x00a"),
    "BYTES [2^62, 2^62], one element sent": ("BYTES", [2**62, 2**62], b"\x01\x00\x00\x00a"),
    "FP64 [1e8, 1], one element sent": ("FP64", [10**8, 1], b"\x00" * 8),
    "FP64 JSON [1e8, 1], one element sent": ("FP64", [10**8, 1], None),
    "BYTES [200000, 1], all sent (over the row limit)": (
        "BYTES",
        [200_000, 1],
        b"\x01\x00\x00\x00a" * 200_000,
    ),
}


def body(datatype: str, shape: list[int], binary: bytes | None) -> tuple[bytes, dict[str, str]]:
    tensor: dict[str, Any] = {"name": "colour", "datatype": datatype, "shape": shape}
    if binary is None:
        tensor["data"] = [1.0]
        return orjson.dumps({"inputs": [tensor]}), {"content-type": "application/json"}
    tensor["parameters"] = {"binary_data_size": len(binary)}
    head = orjson.dumps({"inputs": [tensor]})
    headers = {HEADER: str(len(head)), "content-type": "application/octet-stream"}
    return head + binary, headers


async def measure(name: str) -> dict[str, Any]:
    content, headers = body(*CASES[name])
    with tempfile.TemporaryDirectory() as folder:
        app = create_app(Settings(data_dir=Path(folder)))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                await client.get("/v2/health/live")  # warm: imports, first request
                rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                tracemalloc.start()
                start = time.perf_counter()
                response = await client.post("/v2/models/m/infer", content=content, headers=headers)
                seconds = time.perf_counter() - start
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "case": name,
        "request_bytes": len(content),
        "status": response.status_code,
        "latency_ms": round(seconds * 1000, 1),
        "traced_peak_mb": round(peak / 2**20, 2),
        "peak_rss_growth_mb": round((rss_after - rss_before) / 1024, 1),
        "answer": response.text[:160],
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        print(json.dumps(asyncio.run(measure(sys.argv[2]))))
        return
    for name in CASES:
        run = subprocess.run(
            [sys.executable, __file__, "--case", name], check=False, capture_output=True, text=True
        )
        lines = run.stdout.strip().splitlines()
        if run.returncode or not lines:
            print(f"{name}: failed: {run.stderr.strip()[-300:]}")
            continue
        row = json.loads(lines[-1])
        print(
            f"{row['case']:<50} {row['request_bytes']:>9} B  {row['status']}  "
            f"{row['latency_ms']:>9} ms  traced peak {row['traced_peak_mb']:>8} MB  "
            f"RSS +{row['peak_rss_growth_mb']} MB\n    {row['answer']}"
        )


if __name__ == "__main__":
    main()
