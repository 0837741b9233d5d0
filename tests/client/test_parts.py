"""The client's parts without a server: retry timing, problems, tables, the CLI's parsing
and sparklines, and importing without the optional libraries."""

from __future__ import annotations

import email.utils
import math
import subprocess
import sys
import textwrap

import click
import httpx
import numpy as np
import pandas as pd
import pytest

from ensemble_client.calls import Call, RetryPolicy, retry_after
from ensemble_client.cli.app import split_ref
from ensemble_client.cli.render import sparkline
from ensemble_client.cli.train import parse_pairs
from ensemble_client.errors import ServerError, api_error
from ensemble_client.sessions import auth_headers, base_url
from ensemble_client.tables import frame_rows
from tests.e2e.server import ROOT

GET = Call("GET", "/v1/models", idempotent=True)
POST = Call("POST", "/v1/models/m/versions")


def answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert retry_after(answer(503, **{"Retry-After": "5"})) == 5.0
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert retry_after(answer(503, **{"Retry-After": date}), now=1_000_000) == 30.0
    assert retry_after(answer(503, **{"Retry-After": "soon"})) is None
    assert retry_after(answer(503)) is None


def test_only_idempotent_calls_are_retried_and_only_on_429_and_503() -> None:
    policy = RetryPolicy(max_retries=3, backoff=0.5, max_wait=30)
    assert policy.delay(GET, answer(503, **{"Retry-After": "2"}), 0) == 2.0
    assert policy.delay(GET, answer(429, **{"Retry-After": "600"}), 0) == 30.0  # capped
    assert [policy.delay(GET, answer(503), i) for i in range(4)] == [0.5, 1.0, 2.0, None]
    assert policy.delay(POST, answer(429, **{"Retry-After": "1"}), 0) is None
    assert policy.delay(GET, answer(500), 0) is None
    assert policy.delay(GET, answer(404), 0) is None


def test_an_answer_that_is_not_a_problem_still_becomes_one() -> None:
    error = api_error(502, b"<html>Bad gateway</html>", "text/html")
    assert isinstance(error, ServerError)
    assert (error.status, error.code) == (502, "http_502")
    assert error.detail == "HTTP 502: <html>Bad gateway</html>"


def test_url_and_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENSEMBLE_URL", raising=False)
    monkeypatch.delenv("ENSEMBLE_API_KEY", raising=False)
    assert base_url(None) == "http://127.0.0.1:8000"
    assert auth_headers(None) == {}
    monkeypatch.setenv("ENSEMBLE_URL", "models.example:9000/")
    monkeypatch.setenv("ENSEMBLE_API_KEY", "k1")
    assert base_url(None) == "http://models.example:9000"
    assert base_url("https://other/") == "https://other"
    assert auth_headers(None) == {"Authorization": "Bearer k1"}
    assert auth_headers("k2") == {"Authorization": "Bearer k2"}


def test_frames_become_exact_json_rows() -> None:
    frame = pd.DataFrame(
        {
            "x": [0.1 + 0.2, np.nan],
            "n": [1, 2],
            "s": ["a", None],
            "t": pd.to_datetime(["2026-01-02T03:04:05", None]),
        }
    )
    rows = frame_rows(frame)
    assert rows["columns"] == ["x", "n", "s", "t"]
    assert rows["data"] == [[0.30000000000000004, 1, "a", "2026-01-02T03:04:05"],
                            [None, 2, None, None]]  # fmt: skip


def test_param_values_are_json_when_they_parse() -> None:
    pairs = ("n_estimators=200", "max_features=sqrt", "max_depth=null", "w=[1, 2]", "b=true")
    assert parse_pairs(pairs, "--param", as_json=True) == {
        "n_estimators": 200, "max_features": "sqrt", "max_depth": None, "w": [1, 2], "b": True
    }  # fmt: skip
    assert parse_pairs(("team=3",), "--tag", as_json=False) == {"team": "3"}
    with pytest.raises(click.BadParameter, match="not KEY=VALUE"):
        parse_pairs(("oops",), "--param", as_json=True)


def test_model_references() -> None:
    assert split_ref("iris-rf") == ("iris-rf", "latest")
    assert split_ref("iris-rf@production") == ("iris-rf", "production")
    assert split_ref("iris-rf@3") == ("iris-rf", "3")
    with pytest.raises(click.BadParameter):
        split_ref("iris-rf@")


def test_sparklines_span_lowest_to_highest() -> None:
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert sparkline([2.0, 2.0]) == "▅▅"
    assert sparkline([1.0, None, math.nan, 3.0]) == "▁  █"
    long = sparkline([float(i) for i in range(500)], width=60)
    assert len(long) == 60 and long[0] == "▁" and long[-1] == "█"


def test_the_client_imports_with_httpx_and_pydantic_alone() -> None:
    """pandas, pyarrow, rich, click and the service's own packages blocked: the client
    imports, builds requests from records, and names what a DataFrame needs."""
    script = textwrap.dedent(
        """
        import sys
        BLOCKED = ("pandas", "pyarrow", "numpy", "rich", "click", "app", "ensembles",
                   "sklearn", "fastapi")

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"blocked: {name}")
                return None

        sys.meta_path.insert(0, Block())
        from ensemble_client import Client, MissingDependencyError, Prediction
        from ensemble_client import operations as ops
        from ensemble_client.progress import progress_for, Silent

        call, _ = ops.predict_call("m", "latest", [{"a": 1.0}], {"return_proba": True}, 1000)
        assert call.json == {"instances": [{"a": 1.0}], "options": {"return_proba": True}}
        assert isinstance(progress_for(True), Silent)  # no rich: no bar, no failure
        answer = Prediction(model="m", version=1, task="regression", predictions=[1.0])
        try:
            answer.to_frame()
        except MissingDependencyError as exc:
            print(exc)
        Client("http://127.0.0.1:9").close()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "a prediction as a DataFrame needs pandas: "
        "pip install 'ensemble-service[client-pandas]' (pandas and pyarrow)"
    )
