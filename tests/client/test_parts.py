"""The client's parts without a server: retry timing, problems, tables, the CLI's parsing,
sparklines and progress bar, and importing without the optional libraries."""

from __future__ import annotations

import email.utils
import io
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import httpx
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from rich.console import Console

from ensemble_client import AsyncClient, Client, InvalidArgumentError, Job
from ensemble_client.calls import Call, RetryPolicy, retry_after
from ensemble_client.cli.app import Group, State, for_cli, split_ref
from ensemble_client.cli.render import sparkline
from ensemble_client.cli.train import parse_pairs
from ensemble_client.errors import ServerError, api_error
from ensemble_client.names import MODEL_NAME_PATTERN, is_model_name
from ensemble_client.progress import Bar
from ensemble_client.sessions import auth_headers, base_url
from ensemble_client.tables import frame_rows, write_table
from ensembles.registry import names as service_names
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


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("::::", "Invalid port"),
        ("ftp://127.0.0.1:8000", "the scheme is 'ftp'"),
        ("http://", "it has no host"),
        ("127.0.0.1:70000", "port 70000 is not from 1 to 65535"),
    ],
)
def test_a_url_that_is_not_http_is_refused_before_sending(url: str, reason: str) -> None:
    for make in (Client, AsyncClient):
        with pytest.raises(InvalidArgumentError) as caught:
            make(url)
        assert isinstance(caught.value, ValueError)
        assert str(caught.value).startswith(f"the service URL {url!r} cannot be used ({reason}")


@pytest.mark.parametrize(
    ("key", "what"),
    [
        ("ключ", "has a non-ASCII character at position 1"),
        ("secret\n", "has a line break at position 7"),
        ("sec\tret", "has a control character at position 4"),
        (" secret", "has a space at an end"),
    ],
)
def test_an_api_key_that_cannot_be_a_header_is_refused_unshown(key: str, what: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        Client("http://127.0.0.1:8000", api_key=key)
    assert str(caught.value).startswith(f"the API key {what}: ")
    assert "secret" not in str(caught.value) and "ключ" not in str(caught.value)


def test_the_model_name_rule_is_the_services() -> None:
    assert MODEL_NAME_PATTERN == service_names.MODEL_NAME_PATTERN
    for name in ("iris-rf", "a", "A.b_c-1", "x/aliases/y", "-x", "", "a\n", "é", "a" * 129):
        assert is_model_name(name) == service_names.is_model_name(name), name


def test_an_unknown_output_suffix_is_refused_not_written_as_csv(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"'.*out\.xyz' from its suffix: end it "
                       r"with \.csv, \.parquet, \.pq, \.jsonl, \.ndjson, \.json"):  # fmt: skip
        write_table(pd.DataFrame({"a": [1]}), tmp_path / "out.xyz")
    assert list(tmp_path.iterdir()) == []


def test_cli_messages_point_to_the_command_not_the_route() -> None:
    assert for_cli("unknown kind 'random_forrest'; see GET /v1/kinds") == (
        "unknown kind 'random_forrest'; see `ensemble kinds`"
    )
    assert for_cli("unknown kind 'random_forrest' (did you mean 'random_forest'?)") == (
        "unknown kind 'random_forrest' (did you mean 'random_forest'?); see `ensemble kinds`"
    )
    assert for_cli("no column 'nope' in the table") == "no column 'nope' in the table"


@click.group(cls=Group)
def broken() -> None:
    """A group of the CLI's class with a command that fails as no one expected."""


@broken.command()
def divide() -> None:
    print(1 / 0)


def test_an_unexpected_error_is_one_line_unless_debugging() -> None:
    result = CliRunner().invoke(broken, ["divide"], obj=State())
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "error: ZeroDivisionError: division by zero (--debug shows the traceback)"
    ]
    debugging = CliRunner().invoke(broken, ["divide"], obj=State(debug=True))
    assert isinstance(debugging.exception, ZeroDivisionError)


def job_state(status: str, done: int, total: int, stage: str) -> Job:
    return Job.model_validate(
        {"id": "job_1", "status": status, "model": "iris-rf", "version": 1,
         "created_at": "2026-01-01T00:00:00Z",
         "progress": {"done": done, "total": total, "stage": stage}}
    )  # fmt: skip


def test_the_bar_shows_a_stages_last_count_when_the_job_moves_on() -> None:
    """Polled states skip 300/300 (1/300, 208/300, then evaluating): the fitting line still
    ends at 300/300; an uncounted stage gives its line to the next."""
    out = io.StringIO()
    bar = Bar(Console(file=out, force_terminal=True, width=120, color_system=None))
    for state in [
        job_state("queued", 0, 0, "queued"),
        job_state("running", 0, 1, "preprocessing"),
        job_state("running", 1, 300, "fitting"),
        job_state("running", 208, 300, "fitting"),
        job_state("running", 0, 1, "evaluating"),
        job_state("succeeded", 0, 1, "compiling"),
    ]:
        bar.update(state)
    bar.close()
    final = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue().split("\x1b[1A")[-1])
    lines = [[w for w in line.split() if "━" not in w][:4] for line in final.splitlines()]
    assert [" ".join(words) for words in lines if words] == [
        "iris-rf v1 fitting 300/300",
        "iris-rf v1 compiling 1/1",
    ], out.getvalue()
