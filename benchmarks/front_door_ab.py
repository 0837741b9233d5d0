"""CPU per one-row request with the app's front door (``app.front``) open and shut, in
one process, blocks alternating: the same app, protocol and engine either way, so the
difference is the layers the door skips, and a loaded host moves both alike.

The requests go through the service's HTTP protocol fed by ``one_row_loop.py``'s
stand-in transport (no sockets), as that script does; the data folder is the one
``tree_cpu_ab.py`` trains.

    PYTHONPATH=. .venv/bin/python benchmarks/front_door_ab.py --data /tmp/tree-cpu-ab
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


async def measure(data: Path, model: str, clients: int, block: int, blocks: int) -> None:
    import numpy as np
    import service_bench as sb
    from one_row_loop import connected, requests_on_the_wire

    from app.front import ServiceApp
    from app.main import create_app
    from app.settings import Settings

    version = json.loads((data / f"{model}.json").read_text())["version"]
    app = create_app(Settings(data_dir=data / "data"))
    if not isinstance(app, ServiceApp):
        raise SystemExit("this tree has no front door")
    lifespan, connections = await connected(app, clients)
    work = sb.workloads(sb.load_dataset("breast_cancer"), True, np.random.default_rng(sb.SEED))
    path = f"/v1/models/{model}/versions/{version}/predict"
    wires = requests_on_the_wire(path, work["single_1"])  # JSON rows, no query

    async def round_trips(count: int) -> list[bytes]:
        answers = []
        for k in range(count):
            for i, (protocol, _) in enumerate(connections):
                protocol.data_received(wires[(k + i) % len(wires)])
            for _, transport in connections:
                while not transport.answers:
                    await asyncio.sleep(0)
                answers.append(transport.answers.pop())
            await asyncio.sleep(0)
        return answers

    await round_trips(300)  # warm, and the stack (and its door) built
    door = app.front
    assert door is not None
    opened = await round_trips(len(wires))
    app.front = None
    shut = await round_trips(len(wires))
    if [_body(a) for a in opened] != [_body(a) for a in shut]:
        raise RuntimeError("the door answers differently")
    figures: dict[str, list[float]] = {"open": [], "shut": []}
    for b in range(blocks):
        for name in ("open", "shut") if b % 2 == 0 else ("shut", "open"):
            app.front = door if name == "open" else None
            started = time.process_time()
            await round_trips(block // clients)
            spent = time.process_time() - started
            figures[name].append(spent / (block // clients * clients) * 1e6)
    app.front = door
    await lifespan.shutdown()
    pairs = [s - o for o, s in zip(figures["open"], figures["shut"], strict=True)]
    print(f"{clients} client(s), {blocks} blocks of {block} requests each way, alternating")
    for name, values in figures.items():
        print(f"door {name}: median {statistics.median(values):.1f} us CPU a request")
    lower = sum(p > 0 for p in pairs)
    print(f"shut - open: median {statistics.median(pairs):.1f} us ({lower} of {blocks} lower)")


def _body(answer: bytes) -> tuple[bytes, bytes]:
    """An answer's status line and body (its date and request id differ by design)."""
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0], body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/tree-cpu-ab")
    parser.add_argument("--model", default="bench-rf")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--block", type=int, default=400)
    parser.add_argument("--blocks", type=int, default=40)
    args = parser.parse_args()
    import uvloop

    uvloop.run(measure(Path(args.data), args.model, args.clients, args.block, args.blocks))


if __name__ == "__main__":
    main()
