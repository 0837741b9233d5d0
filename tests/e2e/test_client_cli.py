"""The client and the ``ensemble`` CLI against a real server: end to end, with the
framework's runner, as a subprocess (exit statuses, Ctrl-C with nobody to ask)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path

import httpx
import joblib
import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn.datasets import load_digits

from ensemble_client import Client, ServerUnreachableError
from ensemble_client.cli import cli
from tests.api.support import IRIS_FEATURES, iris_frame
from tests.e2e.server import ROOT, Server
from tests.network import free_port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("client-e2e")
    started = Server(folder / "data", folder / "server.log").start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def iris_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tables") / "iris.csv"
    iris_frame().to_csv(path, index=False)
    return path


def ensemble(
    server: Server | None, *args: str, url: str | None = None, **env_vars: str
) -> subprocess.CompletedProcess[str]:
    """``python -m ensemble_client ARGS`` (the console script before installation)."""
    env = {**os.environ, "ENSEMBLE_URL": url or (server.url if server else ""), **env_vars}
    return subprocess.run(
        [sys.executable, "-m", "ensemble_client", *args], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_client_end_to_end(server: Server, iris_csv: Path, tmp_path: Path) -> None:
    with Client(server.url) as client:
        iris = client.datasets.upload(iris_csv, name="iris")
        version = client.models.train(
            "client-rf", dataset="iris", target="species", ensemble="random_forest",
            params={"n_estimators": 25}, random_state=3,
        )  # fmt: skip
        assert version.dataset.id == iris.id and version.metrics.oob is not None
        rows = iris_frame()[IRIS_FEATURES].iloc[::5]
        frame = client.models.predict("client-rf", rows, proba=True)
        artifact = client.models.download_artifact("client-rf", to=tmp_path / "m.joblib")
        pipeline = joblib.load(io.BytesIO(artifact))
        assert frame["prediction"].tolist() == pipeline.predict(rows).tolist()
        assert frame.filter(like="proba_").to_numpy().tolist() == (
            pipeline.predict_proba(rows).tolist()
        )
    nobody = f"http://127.0.0.1:{free_port()}"
    with Client(nobody) as down, pytest.raises(ServerUnreachableError) as caught:
        down.models.list()
    assert str(caught.value).startswith(f"cannot reach the Ensemble service at {nobody}: ")


def test_the_cli_end_to_end(server: Server, iris_csv: Path, tmp_path: Path) -> None:
    upload = ensemble(server, "datasets", "upload", str(iris_csv), "--name", "iris", "--json")
    assert upload.returncode == 0, upload.stderr
    assert json.loads(upload.stdout)["n_rows"] == 150
    train = ensemble(server, "train", "cli-rf", "--dataset", "iris", "--target", "species",
                     "--kind", "random_forest", "--param", "n_estimators=30",
                     "--random-state", "1", "--wait", "--json")  # fmt: skip
    assert train.returncode == 0, train.stderr
    version = json.loads(train.stdout)
    assert (version["model"], version["version"]) == ("cli-rf", 1)
    assert version["spec"]["params"]["n_estimators"] == 30
    assert "━" not in train.stderr  # no terminal: no progress bar
    rows = tmp_path / "rows.csv"
    iris_frame()[IRIS_FEATURES].head(4).to_csv(rows, index=False)
    out = tmp_path / "out.csv"
    predicted = ensemble(server, "predict", "cli-rf@1", str(rows), "-o", str(out), "--proba")
    assert predicted.returncode == 0, predicted.stderr
    frame = pd.read_csv(out)
    assert frame.columns.tolist()[:2] == ["prediction", "proba_setosa"]
    assert frame["prediction"].tolist() == ["setosa"] * 4
    assert ensemble(server, "alias", "set", "cli-rf", "production", "1").returncode == 0
    metrics = ensemble(server, "metrics", "cli-rf@production")
    assert metrics.returncode == 0, metrics.stderr
    assert "oob_accuracy" in metrics.stdout and "members (30)" in metrics.stdout
    assert any(block in metrics.stdout for block in "▁▂▃▄▅▆▇█")
    shown = json.loads(ensemble(server, "versions", "show", "cli-rf@production", "--json").stdout)
    assert shown["aliases"] == ["production"]
    # 1: a problem answered by the server, its detail printed with each location.
    bad = ensemble(server, "train", "cli-rf", "-d", "iris", "-t", "nope", "-k", "random_forest")
    assert bad.returncode == 1
    columns = "'sepal_length', 'sepal_width', 'petal_length', 'petal_width', 'species'"
    assert bad.stderr.splitlines() == ["error: 1 problem in the request",
                                       f"  target: no column 'nope' in the table (the columns "
                                       f"are {columns})"]  # fmt: skip
    # 2: a usage error; 3: nobody at the URL, one line and no trace.
    assert ensemble(server, "train", "cli-rf", "-d", "iris", "-t", "species").returncode == 2
    down = ensemble(None, "models", "list", url=f"http://127.0.0.1:{free_port()}")
    assert down.returncode == 3 and len(down.stderr.splitlines()) == 1
    assert down.stderr.startswith("error: cannot reach the Ensemble service at http://127.0.0.1:")


def test_the_cli_with_clicks_runner(server: Server, iris_csv: Path) -> None:
    runner = CliRunner()
    env = {"ENSEMBLE_URL": server.url}
    uploaded = runner.invoke(cli, ["datasets", "upload", str(iris_csv), "-n", "runner"], env=env)
    assert uploaded.exit_code == 0, uploaded.output
    assert "runner" in uploaded.output and "sepal_length" in uploaded.output
    listed = runner.invoke(cli, ["--json", "datasets", "list"], env=env)
    assert "runner" in [d["name"] for d in json.loads(listed.output)]
    submitted = runner.invoke(cli, ["train", "big", "-d", "runner", "-t", "species", "-k",
                                    "random_forest", "-p", "n_estimators=5000", "--json"],
                              env=env)  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
    job = json.loads(submitted.output)
    assert job["status"] in ("queued", "running")
    cancelled = runner.invoke(cli, ["jobs", "cancel", job["id"]], env=env)
    assert cancelled.exit_code == 0 and job["id"] in cancelled.output
    waited = runner.invoke(cli, ["jobs", "wait", job["id"], "--json"], env=env)
    assert waited.exit_code == 1 and json.loads(waited.output)["status"] == "cancelled"
    shown = runner.invoke(cli, ["jobs", "list", "--status", "cancelled"], env=env)
    assert job["id"] in shown.output
    kinds = runner.invoke(cli, ["kinds", "--json"], env=env)
    assert "bagging" in [k["kind"] for k in json.loads(kinds.output)["ensemble_kinds"]]
    assert runner.invoke(cli, ["health"], env=env).exit_code == 0
    missing = runner.invoke(cli, ["models", "show", "nobody"], env=env)
    assert missing.exit_code == 1 and "model 'nobody' not found" in missing.output
    assert runner.invoke(cli, ["alias", "set", "m", "a", "zero"], env=env).exit_code == 2


def test_ctrl_c_without_a_terminal_cancels_the_job(server: Server, tmp_path: Path) -> None:
    """Nobody to ask (stdin is not a terminal): Ctrl-C cancels the job, exit status 130.

    On digits, not iris: 5,000 trees of iris were once trained before a loaded full
    suite's Ctrl-C came (the job done, exit status 0); digits' take minutes, and the
    cancel ends them within a second."""
    digits = tmp_path / "digits.csv"
    load_digits(as_frame=True).frame.to_csv(digits, index=False)
    with Client(server.url) as client:
        client.datasets.upload(digits, name="sigint")
    env = {**os.environ, "ENSEMBLE_URL": server.url}
    # A child keeps its parent's signal mask, and an ignored signal stays ignored across
    # exec (Python then installs no KeyboardInterrupt). In a full run the CLI once trained
    # for 103 s, its Ctrl-C never delivered (exit status 0, no cancel reached the server),
    # as if an earlier test in this worker had left SIGINT blocked or ignored: a shell
    # starts a command with it neither.
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "ensemble_client", "train", "sigint", "-d", "sigint", "-t",
             "target", "-k", "random_forest", "-p", "n_estimators=5000", "--wait"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signal.SIGINT, handler)
    with Client(server.url) as client:
        deadline = time.monotonic() + 120
        while not client.jobs.list(model="sigint") and time.monotonic() < deadline:
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
        job = client.jobs.list(model="sigint")[0]
    assert process.returncode == 130, (stderr, f"the test process's SIGINT: {handler}, {blocked}")
    assert job.status == "cancelled"
    assert f"cancelled job {job.id}; no version was made" in stderr


def test_the_ensemble_console_script_is_declared() -> None:
    """``ensemble`` exists once the project is installed; its target is the CLI."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["ensemble"].partition(":")
    assert getattr(import_module(module), name) is import_module("ensemble_client.cli").main


@pytest.fixture(scope="module")
def trained(server: Server, iris_csv: Path) -> str:
    """A model with a version and an alias ``y``, for the refusals below."""
    with Client(server.url) as client:
        client.datasets.upload(iris_csv, name="refusals")
        client.models.train("refused", dataset="refusals", target="species",
                            ensemble="random_forest", params={"n_estimators": 5},
                            progress=False)  # fmt: skip
        client.models.alias("refused", "y", 1)
    return "refused"


USAGE_ERRORS = [
    pytest.param(["predict", "refused", "{rows}", "-o", "{tmp}/missing/out.csv"], {},
                 "--output '{tmp}/missing/out.csv': there is no folder '{tmp}/missing'",
                 id="output-folder-missing"),
    pytest.param(["predict", "refused", "{rows}", "-o", "{tmp}/out.xyz"], {},
                 "cannot tell the format of '{tmp}/out.xyz' from its suffix: end it with "
                 ".csv, .parquet, .pq, .jsonl, .ndjson, .json", id="output-suffix-unknown"),
    pytest.param(["models", "list"], {"ENSEMBLE_API_KEY": "ключ"},
                 "the API key has a non-ASCII character at position 1", id="key-not-ascii"),
    pytest.param(["models", "list"], {"ENSEMBLE_API_KEY": "k\n"},
                 "the API key has a line break at position 2", id="key-with-a-newline"),
    pytest.param(["models", "list"], {"ENSEMBLE_URL": "::::"},
                 "the service URL '::::' cannot be used", id="url-not-a-url"),
    pytest.param(["models", "list"], {"ENSEMBLE_URL": "ftp://{host}"},
                 "the service URL 'ftp://{host}' cannot be used (the scheme is 'ftp')",
                 id="url-ftp"),
    pytest.param(["models", "show", "refused/versions/1"], {},
                 "MODEL 'refused/versions/1' is not a model name", id="model-name-with-a-path"),
    pytest.param(["models", "delete", "refused/aliases/y"], {},
                 "MODEL 'refused/aliases/y' is not a model name", id="delete-reaching-an-alias"),
    pytest.param(["versions", "delete", "refused/aliases/y@1"], {},
                 "MODEL 'refused/aliases/y' is not a model name", id="model-ref-with-a-path"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "env", "message"), USAGE_ERRORS)
def test_a_usage_error_is_one_line_and_exit_2_never_a_traceback(
    server: Server, trained: str, tmp_path: Path, args: list[str], env: dict[str, str],
    message: str,
) -> None:  # fmt: skip
    """Nothing is sent, nothing is written: the line says what to fix."""
    rows = tmp_path / "rows.csv"
    iris_frame()[IRIS_FEATURES].head(4).to_csv(rows, index=False)
    fill = {"rows": str(rows), "tmp": str(tmp_path), "host": server.url.split("://")[1]}
    done = ensemble(server, *[a.format(**fill) for a in args],
                    **{k: v.format(**fill) for k, v in env.items()})  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message.format(**fill)}"), lines
    assert "Traceback" not in done.stderr + done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv"]
    with Client(server.url) as client:
        assert client.models.get(trained).aliases == {"y": 1}


def test_an_unknown_kind_points_to_the_kinds_command(server: Server, trained: str) -> None:
    done = ensemble(server, "train", "typo", "-d", "refusals", "-t", "species",
                    "-k", "random_forrest")  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "see `ensemble kinds`" in done.stderr and "/v1/kinds" not in done.stderr


@pytest.fixture
def other_service(tmp_path: Path) -> Iterator[str]:
    """Python's own file server on a loopback port: it answers 200, but not the service's
    answers (``/v1/models`` is a file of something else)."""
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "models").write_text('{"models": "elsewhere"}')
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{url}/v1/models", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_an_answer_that_is_not_the_services_is_one_line(other_service: str) -> None:
    """An unexpected answer: one line and exit 1; ENSEMBLE_DEBUG=1 shows the traceback."""
    done = ensemble(None, "models", "list", url=other_service)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    start = f"error: the answer of {other_service} is not what this client expects ("
    assert line.startswith(start) and line.endswith("); is it the Ensemble service?")
    debugging = ensemble(None, "models", "list", url=other_service, ENSEMBLE_DEBUG="1")
    assert debugging.returncode == 1 and "Traceback" in debugging.stderr
