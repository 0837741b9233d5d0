"""A training job's wall timeline through the service, stage by stage, every process.

Starts the service of a tree (``--tree``, default this one: ``python -m app`` from that
folder) with ``benchmarks/timeline_hook`` on ``PYTHONPATH`` and ``ENSEMBLE_TIMELINE``
set, trains the 500-round LightGBM on 200,000 x 20 rows (``train_scale``'s table) through
the API ``--rounds`` times (``--kind random_forest --size 100``: the 100-tree forest),
each after a direct fit (``train_scale.direct_lightgbm``), and
prints, for each job, every stage the hook saw: its start and end in seconds from the
submit, its wall, its process's CPU, the seconds its process's threads waited on a run
queue (ready, no core free: other work on the host) and its page faults, and the host's
memory events over the job (:data:`VMSTAT`).  Two trees run alternately give A/B rounds:

    .venv/bin/python benchmarks/job_timeline.py --tree /work/main --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service_bench import free_port, stop, until_ready
from train_scale import (
    direct,
    direct_lightgbm,
    forest_spec,
    lightgbm_spec,
    parquet,
    table,
    train_and_wait,
    uploaded_request,
)

HOOK = Path(__file__).resolve().parent / "timeline_hook"
QUIET = {"sql_jobs.SqlJobs.get_job"}  # read every 0.25 s by the wait and the job's updates


def run(
    tree: Path, rounds: int, rows: int, size: int, kind: str = "lightgbm"
) -> list[dict[str, object]]:
    frame = table(rows, 20)
    body = parquet(frame)
    out: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="ensemble-timeline-") as tmp:
        folder = Path(tmp)
        timeline = folder / "timeline.jsonl"
        env = {
            **os.environ,
            "PYTHONPATH": f"{tree}{os.pathsep}{HOOK}",
            "ENSEMBLE_TIMELINE": str(timeline),
            "ENSEMBLE_DATA_DIR": str(folder / "data"),
            "ENSEMBLE_WORKERS": "1",
            "ENSEMBLE_MAX_UPLOAD_BYTES": str(len(body) + 1_000_000),
            "HOST": "127.0.0.1",
        }
        env.pop("ENSEMBLE_API_KEYS", None)
        port = free_port()
        env["PORT"] = str(port)
        base = f"http://127.0.0.1:{port}"
        log_path = folder / "service.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "app"], cwd=tree, env=env, stdout=log, stderr=log
            )
        try:
            until_ready(process, base, log_path)
            with httpx.Client(base_url=base, timeout=600) as client:
                forest = kind == "random_forest"
                spec = forest_spec(size) if forest else lightgbm_spec(size)
                request = uploaded_request(client, body, spec)
                for _ in range(rounds):
                    fit = direct if forest else direct_lightgbm
                    direct_s = fit(frame, size, 1)[0]
                    timeline.write_text("")
                    before = vmstat()
                    submitted = time.time()
                    wall, version = train_and_wait(client, "scale", request)
                    time.sleep(0.3)  # the last lines of the worker
                    after = vmstat()
                    lines = [json.loads(x) for x in timeline.read_text().splitlines()]
                    out.append(
                        {
                            "direct": direct_s,
                            "wall": wall,
                            "train_s": version["training"]["duration_s"],
                            "submitted": submitted,
                            "stages": lines,
                            "load": os.getloadavg()[0],
                            "vmstat": {k: after[k] - before.get(k, 0) for k in after},
                            "inference": {
                                k: v
                                for k, v in version["inference"].items()
                                if not k.endswith("seconds")
                            },
                        }
                    )
                    show(out[-1])
        finally:
            stop(process)
    return out


# The host's memory events a slow round may hide: direct compaction stalls (a huge page
# made on the spot), huge pages not had, pages read back from disk, reclaim.
VMSTAT = ("compact_stall", "thp_fault_alloc", "thp_fault_fallback", "pgmajfault", "pgscan_direct")


def vmstat() -> dict[str, int]:
    """The VMSTAT counters of the host now (none where /proc/vmstat is not readable)."""
    try:
        lines = Path("/proc/vmstat").read_text().splitlines()
    except OSError:
        return {}
    values = dict(line.split() for line in lines)
    return {name: int(values[name]) for name in VMSTAT if name in values}


def show(job: dict[str, object]) -> None:
    t = float(job["submitted"])  # type: ignore[arg-type]
    print(
        f"direct {job['direct']:.2f} s, service {job['wall']:.2f} s, train() "
        f"{job['train_s']:.2f} s, ratio {float(job['wall']) / float(job['direct']):.3f}, "  # type: ignore[arg-type]
        f"load {job['load']:.1f}"
    )
    print(f"  host during the job: {job.get('vmstat')}")
    print(
        f"  {'stage':40s} {'pid':>7s} {'start':>7s} {'end':>7s} {'wall':>6s} {'cpu':>6s} "
        f"{'runq':>6s} {'faults':>7s}"
    )
    stages = [s for s in job["stages"] if s["what"] not in QUIET]  # type: ignore[attr-defined]
    for s in sorted(stages, key=lambda s: s["t0"]):
        waited = s.get("rq1", 0.0) - s.get("rq0", 0.0)  # the hook of an older tree: none
        faults = s.get("flt1", 0) - s.get("flt0", 0)
        print(
            f"  {s['what']:40s} {s['pid']:7d} {s['t0'] - t:7.3f} {s['t1'] - t:7.3f} "
            f"{s['t1'] - s['t0']:6.3f} {s['cpu1'] - s['cpu0']:6.3f} {waited:6.3f} {faults:7d}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=500, help="boosting rounds or trees")
    parser.add_argument("--kind", choices=["lightgbm", "random_forest"], default="lightgbm")
    parser.add_argument("--json")
    args = parser.parse_args()
    jobs = run(Path(args.tree), args.rounds, args.rows, args.size, args.kind)
    if args.json:
        Path(args.json).write_text(json.dumps(jobs) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
