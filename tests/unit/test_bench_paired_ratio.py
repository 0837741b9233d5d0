"""Issue 24.1's bench figure: one Arrow row's req/s over one JSON row's at 16 clients,
round by round (``benchmarks/service_bench.py``'s batching block), and its line in the
report; results written before it render as before."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import service_bench
from loadgen import Run


def _runs(*rps: float) -> list[Run]:
    return [Run(int(r * 2), 2.0, 0, {"p50": 1.0}) for r in rps]


def test_the_ratio_is_each_round_s_own() -> None:
    arrow = _runs(5_000, 6_300, 5_900, 4_000)
    json_ = _runs(4_000, 6_000, 6_100, 5_000)
    paired = service_bench.paired_ratio(arrow, json_)
    assert paired["rounds"] == 4 and paired["at_least_1"] == 2
    assert paired["min"] == pytest.approx(0.8) and paired["max"] == pytest.approx(1.25)
    assert paired["median"] == pytest.approx((1.05 + 5_900 / 6_100) / 2)
    with pytest.raises(ValueError):
        service_bench.paired_ratio(arrow, json_[:3])  # rounds must pair


def test_the_batching_block_prints_the_paired_figure_when_it_has_one() -> None:
    entry = {"rps": {"median": 6_000.0, "min": 5_000.0, "max": 7_000.0}, "p50_ms": {"median": 2.6}}
    scenario = {"label": "1 row, 16 clients", "on": entry, "off": entry, "ratio": 1.0}
    batching = {"model": "random forest", "requests_per_call": 7.5, "scenarios": {"x": scenario}}
    before = service_bench.render_batching({"batching": batching})
    assert "Arrow over JSON" not in before  # results written before the figure
    paired = service_bench.paired_ratio(_runs(6_100, 5_800, 6_000), _runs(6_000, 6_000, 6_000))
    text = service_bench.render_batching({"batching": {**batching, "arrow_over_json": paired}})
    assert text.startswith(before)
    assert text.splitlines()[-1] == (
        "One row at 16 clients, batched, Arrow over JSON round by round (issue 24.1, goal "
        ">= 1x): median 1.000x, spread 0.967-1.017, at least 1x in 2 of 3 rounds"
    )
