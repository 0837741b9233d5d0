"""The service's processes run OpenMP with sleeping idle threads unless the operator says
otherwise (why: app/__init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = (
    "import app, os, sklearn.ensemble, threadpoolctl;"
    "print(os.environ['OMP_WAIT_POLICY']);"
    "print(sum(p['internal_api'] == 'openmp' for p in threadpoolctl.threadpool_info()))"
)


def _policy(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def test_idle_openmp_threads_sleep_in_the_service() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    policy, runtimes = _policy(env)
    assert policy == "PASSIVE"
    assert int(runtimes) >= 1  # loaded after the policy was set, so it reads it


@pytest.mark.parametrize("given", ["ACTIVE", "passive"])
def test_the_operator_s_policy_wins(given: str) -> None:
    assert _policy({**os.environ, "OMP_WAIT_POLICY": given})[0] == given
