"""CPU of checking the rows of K one-record requests: ``check_rows`` once per request (as
each was checked before ``onerow8``) against one ``check_records_together`` for all K
(a batch's check on the event loop), the same rows, in process, blocks alternating.

The model's signature is read from the registry of a data folder ``batch_turn_ab.py``
(or ``tree_cpu_ab.py``) trained; the records are ``make bench``'s one-row bodies.

    PYTHONPATH=. .venv/bin/python benchmarks/batch_check_cost.py --data /tmp/onerow8-ab
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/onerow8-ab")
    parser.add_argument("--model", default="bench-rf")
    parser.add_argument("--sizes", default="1,4,6,16")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--blocks", type=int, default=10)
    args = parser.parse_args()
    import numpy as np
    import service_bench as sb

    from ensembles import ModelSignature
    from ensembles.inference import check_records_together, check_rows

    database = sqlite3.connect(Path(args.data) / "data" / "registry.db")
    query = "select metadata from versions where model = ? order by version desc"
    metadata = json.loads(database.execute(query, (args.model,)).fetchone()[0])
    signature = ModelSignature.from_dict(metadata["signature"])
    work = sb.workloads(sb.load_dataset("breast_cancer"), True, np.random.default_rng(sb.SEED))
    records = [json.loads(body)["instances"][0] for body in work["single_1"].bodies]
    for k in (int(size) for size in args.sizes.split(",")):
        batch = [records[i % len(records)] for i in range(k)]
        each: list[float] = []
        together: list[float] = []
        for block in range(args.blocks):
            for way in ("each", "together") if block % 2 == 0 else ("together", "each"):
                started = time.process_time()
                for _ in range(args.calls):
                    if way == "each":
                        for record in batch:
                            check_rows(signature, [record])
                    else:
                        check_records_together(signature, batch)
                spent = (time.process_time() - started) / args.calls / k * 1e6
                (each if way == "each" else together).append(spent)
        print(
            f"{k} request(s): check_rows each {statistics.median(each):.1f} us a request, "
            f"together {statistics.median(together):.1f} us a request"
        )


if __name__ == "__main__":
    main()
