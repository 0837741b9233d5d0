"""CPU per one-row request through the server's own HTTP protocol, in process, without
sockets: uvicorn's protocol (the service's, :mod:`app.server.http_protocol`) is fed each
request's bytes by a stand-in transport on uvloop, as the event loop would feed it, and
the app answers through every layer a served request goes through (Starlette's
middleware, the access log, the metrics, the fast path, the engine).  What the kernel
does (the sockets, the wakeups) is left out, so the figure moves with the code, hardly
with the host; ``--trees`` runs each tree in a process of its own, in alternating rounds.

    PYTHONPATH=. .venv/bin/python benchmarks/one_row_loop.py --data /tmp/tree-cpu-ab \
        --trees base=/tmp/base,new=. --rounds 5

``--scenario single_1_arrow`` sends ``make bench``'s one-row Arrow IPC body instead of the
JSON one.  ``--clients N`` hands N requests to the protocol objects (one per connection) in the same
loop turn, as N clients whose bytes arrived together would (batching sees them as such).
``--pairs N`` starts the trees together and runs one batch of each in turn, N rounds: the
two are measured seconds apart instead of minutes, and a loaded host moves them alike
(the per-round ratio is the figure to read).

    PYTHONPATH=. .venv/bin/python benchmarks/one_row_loop.py --data /tmp/tree-cpu-ab \
        --trees base=/work/main,new=. --clients 6 --requests 1200 --pairs 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ONE = "one"  # the argument that runs one tree's measurement in this process


class Transport:
    """What the protocol writes to, counting the answers that are complete."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.answers: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written += data
        head, sep, rest = bytes(self.written).partition(b"\r\n\r\n")
        if not sep:
            return
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        if len(rest) >= length:
            self.answers.append(bytes(self.written[: len(head) + 4 + length]))
            del self.written[: len(head) + 4 + length]

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


async def connected(app: Any, clients: int) -> tuple[Any, list[tuple[Any, Transport]]]:
    """``app`` started (its lifespan, to be shut down by the caller) and ``clients``
    connections of the service's HTTP protocol on stand-in transports."""
    import uvicorn
    from uvicorn.lifespan.on import LifespanOn
    from uvicorn.server import ServerState

    from app.server.http_protocol import OneWriteHTTPProtocol

    config = uvicorn.Config(app, log_config=None, lifespan="on")
    config.load()
    lifespan = LifespanOn(config)
    await lifespan.startup()
    state = ServerState()
    state.default_headers = [(b"date", b"Sun, 29 Nov 2026 07:00:00 GMT"), *config.encoded_headers]
    loop = asyncio.get_running_loop()
    connections: list[tuple[Any, Transport]] = []
    for _ in range(clients):
        protocol = OneWriteHTTPProtocol(config, state, lifespan.state, loop)
        transport = Transport()
        protocol.connection_made(transport)  # type: ignore[arg-type]
        connections.append((protocol, transport))
    return lifespan, connections


def requests_on_the_wire(path: str, chosen: Any) -> list[bytes]:
    """Each of a workload's bodies as the bytes of one HTTP/1.1 POST to ``path``."""
    return [
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
            f"Content-Type: {chosen.content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
        for body in chosen.bodies
    ]


async def measure(
    data: Path,
    model: str,
    clients: int,
    requests: int,
    batches: int,
    profile: str = "",
    scenario: str = "single_1",
) -> None:
    """Print one JSON line: CPU us per request of each batch."""

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import service_bench as sb
    from table_bodies_paired import bodies

    from app.main import create_app
    from app.settings import Settings

    version = json.loads((data / f"{model}.json").read_text())["version"]
    lifespan, connections = await connected(create_app(Settings(data_dir=data / "data")), clients)
    work = bodies(sb.load_dataset("breast_cancer"))  # make bench's, and one-row Parquet
    chosen = work[scenario]
    path = f"/v1/models/{model}/versions/{version}/predict{chosen.query}"
    wires = requests_on_the_wire(path, chosen)

    async def round_trips(count: int) -> None:
        for k in range(count):
            for i, (protocol, _) in enumerate(connections):
                protocol.data_received(wires[(k + i) % len(wires)])
            for _, transport in connections:
                while not transport.answers:
                    await asyncio.sleep(0)
                answer = transport.answers.pop()
                if not answer.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(answer[:300].decode())
            await asyncio.sleep(0)  # the protocol's end-of-turn callbacks

    await round_trips(300)
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        await round_trips(requests // clients)
        profiler.disable()
        stats = pstats.Stats(profiler)
        harness = ("one_row_loop.py", "tasks.py", "uvloop")  # this script's waiting
        calls = sum(
            cc
            for (file, _, _), (cc, *_rest) in stats.stats.items()  # type: ignore[attr-defined]
            if not any(part in file for part in harness)
        )
        count = requests // clients * clients
        print(f"{calls / count:.1f} function calls per request (this script's waits left out)")
        groups: dict[str, int] = {}
        for (file, _, func), (cc, *_rest) in stats.stats.items():  # type: ignore[attr-defined]
            parts = Path(file).parts
            where = next(
                (
                    p
                    for p in (
                        "uvicorn",
                        "starlette",
                        "fastapi",
                        "numpy",
                        "prometheus_client",
                        "logging",
                        "asyncio",
                        "app",
                        "ensembles",
                        "treelite",
                        "sklearn",
                        "pydantic",
                    )
                    if p in parts
                ),
                "",
            )
            group = where or (func if file == "~" else file)
            groups[group] = groups.get(group, 0) + cc
        for group, count in sorted(groups.items(), key=lambda g: -g[1])[:30]:
            print(f"{count / (requests // clients * clients):7.1f}  {group}")
        stats.sort_stats(profile).print_stats(60)
        return
    if batches == 0:  # --pairs: a batch each time the parent writes a line
        print("ready", flush=True)
        while sys.stdin.readline():
            started = time.process_time()
            await round_trips(requests // clients)
            spent = (time.process_time() - started) / (requests // clients * clients) * 1e6
            print(json.dumps({"cpu_us": [spent]}), flush=True)
        await lifespan.shutdown()
        return
    figures = []
    for _ in range(batches):
        started = time.process_time()
        await round_trips(requests // clients)
        figures.append((time.process_time() - started) / (requests // clients * clients) * 1e6)
    print(json.dumps({"cpu_us": figures}), flush=True)
    await lifespan.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/tree-cpu-ab")
    parser.add_argument("--model", default="bench-rf")
    parser.add_argument("--trees", default="", help="name=path,...: alternate these trees")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--profile", default="", help="a pstats sort key: profile instead")
    parser.add_argument(
        "--scenario",
        default="single_1",
        help="a one-row body of service_bench or table_bodies_paired: single_1_arrow, parquet",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=0,
        help="N: the trees started at once, then N rounds of one batch each, in turn "
        "(measured seconds apart, not minutes: a loaded host moves them alike)",
    )
    parser.add_argument(ONE, nargs="?")
    args = parser.parse_args()
    data = Path(args.data)
    if args.one or not args.trees:
        import uvloop

        uvloop.run(
            measure(
                data,
                args.model,
                args.clients,
                args.requests,
                args.batches,
                args.profile,
                args.scenario,
            )
        )
        return
    trees = dict(t.split("=", 1) for t in args.trees.split(","))
    if args.pairs:
        _paired(trees, args)
        return
    found: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            env.pop("ENSEMBLE_API_KEYS", None)
            command = [sys.executable, __file__, *sys.argv[1:], ONE]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            line = next(x for x in done.stdout.splitlines() if x.startswith('{"cpu_us"'))
            found[name].append(min(json.loads(line)["cpu_us"]))
    print(f"{args.clients} client(s), {args.rounds} rounds, CPU us per request (min of batches)")
    for name, values in found.items():
        spread = ", ".join(f"{v:.0f}" for v in values)
        print(f"{name}: median {statistics.median(values):.0f} ({spread})")


def _paired(trees: dict[str, str], args: argparse.Namespace) -> None:
    """Each tree in a process of its own, started together; then ``--pairs`` rounds in
    which each runs one batch of ``--requests``, in turn (the order alternating): the
    medians, and each round's ratio of the last tree to the first."""
    rounds = args.pairs
    argv = ["--data", args.data, "--model", args.model, "--clients", str(args.clients)]
    argv += ["--requests", str(args.requests), "--scenario", args.scenario]
    children = {}
    for name, tree in trees.items():
        env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
        env.pop("ENSEMBLE_API_KEYS", None)
        command = [sys.executable, __file__, *argv, "--batches", "0", ONE]
        children[name] = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
    for child in children.values():
        _line_starting(child, "ready")
    found: dict[str, list[float]] = {name: [] for name in trees}
    for r in range(rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for name in order:
            child = children[name]
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
            found[name].append(json.loads(_line_starting(child, '{"cpu_us"'))["cpu_us"][0])
    for child in children.values():
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"{rounds} paired rounds, CPU us per request; load average at the end {load}")
    for name, values in found.items():
        print(f"{name}: median {statistics.median(values):.0f} (min {min(values):.0f})")
    first, last = next(iter(found)), list(found)[-1]
    ratios = [b / a for a, b in zip(found[first], found[last], strict=True)]
    below = sum(r < 1 for r in ratios)
    median = statistics.median(ratios)
    print(f"{last}/{first} per round: median {median:.3f} ({below} of {rounds} below 1)")


def _line_starting(child: subprocess.Popen[str], start: str) -> str:
    """The child's next line of output that starts with ``start`` (its others skipped)."""
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith(start):
            return line
    raise RuntimeError(f"the measuring process ended (status {child.wait()})")


if __name__ == "__main__":
    main()
