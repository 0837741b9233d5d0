"""Where a one-row request's Python goes, socket to socket: the server (uvicorn with the
service's protocol, on the data folder of ``tree_cpu_ab.py``) runs in this process under
cProfile while a client process sends ``--requests`` one-row JSON requests over
``--clients`` keep-alive connections (each sends its next request when its answer has
arrived).  Prints the function calls per request (deterministic: independent of the
host's load) and the functions called most, by calls and by own time.

    PYTHONPATH=. .venv/bin/python benchmarks/one_row_profile.py --data /tmp/tree-cpu-ab
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CLIENT = r"""
import socket, sys, threading
port, clients, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
path, body = sys.argv[4], sys.argv[5].encode()
head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n").encode()
def run(n):
    s = socket.create_connection(("127.0.0.1", port))
    for _ in range(n):
        s.sendall(head + body)
        data = b""
        while True:
            data += s.recv(65536)
            if b"\r\n\r\n" in data:
                h, _, rest = data.partition(b"\r\n\r\n")
                lines = [x for x in h.split(b"\r\n") if x.lower().startswith(b"content-length")]
                length = int(lines[0].split(b":")[1])
                if len(rest) >= length:
                    break
        assert h.startswith(b"HTTP/1.1 200"), h
    s.close()
threads = [threading.Thread(target=run, args=(count // clients,)) for _ in range(clients)]
[t.start() for t in threads]; [t.join() for t in threads]
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/tree-cpu-ab")
    parser.add_argument("--model", default="bench-rf")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="calls")
    args = parser.parse_args()
    folder = Path(args.data)
    version = json.loads((folder / f"{args.model}.json").read_text())["version"]
    os.environ["ENSEMBLE_DATA_DIR"] = str(folder / "data")
    os.environ.pop("ENSEMBLE_API_KEYS", None)

    import service_bench as sb
    import uvicorn

    from app.logs import configure_logging
    from app.server.http_protocol import PROTOCOL
    from app.settings import Settings

    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    port = sb.free_port()
    config = uvicorn.Config(
        "app.main:create_app",
        factory=True,
        host="127.0.0.1",
        port=port,
        http=PROTOCOL,
        log_config=None,
    )
    server = uvicorn.Server(config)
    path = f"/v1/models/{args.model}/versions/{version}/predict"
    dataset = sb.load_dataset("breast_cancer")
    import numpy as np

    work = sb.workloads(dataset, True, np.random.default_rng(sb.SEED))
    body = work["single_1"].bodies[0].decode()
    profiler = cProfile.Profile()
    loop_box: list[asyncio.AbstractEventLoop] = []

    def client(count: int) -> None:
        command = [
            sys.executable,
            "-c",
            CLIENT,
            str(port),
            str(args.clients),
            str(count),
            path,
            body,
        ]
        subprocess.run(command, check=True)

    def drive() -> None:
        while not server.started:
            threading.Event().wait(0.05)
        loop = loop_box[0]
        client(500)  # warm-up: model loaded, caches filled
        done = threading.Event()

        def switch(on: bool) -> None:  # in the loop's thread: cProfile profiles that one
            profiler.enable() if on else profiler.disable()
            done.set()

        loop.call_soon_threadsafe(switch, True)
        done.wait()
        client(args.requests)
        done.clear()
        loop.call_soon_threadsafe(switch, False)
        done.wait()
        server.should_exit = True

    async def serve() -> None:
        loop_box.append(asyncio.get_running_loop())
        await server.serve()

    threading.Thread(target=drive, daemon=True).start()
    from uvicorn._compat import asyncio_run

    asyncio_run(serve(), loop_factory=config.get_loop_factory())
    stats = pstats.Stats(profiler)
    total = sum(calls for (_, calls, *_rest) in stats.stats.values())  # type: ignore[attr-defined]
    primitive = sum(cc for (cc, *_rest) in stats.stats.values())  # type: ignore[attr-defined]
    print(
        f"{args.requests} requests, {args.clients} clients: "
        f"{primitive / args.requests:.0f} function calls per request "
        f"({total / args.requests:.0f} with recursion)"
    )
    stats.sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
