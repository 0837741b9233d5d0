"""The training fork server starts before ``python -m app`` imports the library, so its
preload (seconds of CPU) runs beside the server's own start and the first job submitted
once the service is ready does not wait for it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import app.__main__ as main_module
from app.jobs import fork_server
from app.jobs.executors import ProcessExecutor
from app.main import executor_for
from app.server import launcher
from app.settings import Settings


def test_python_m_app_starts_the_fork_server_before_the_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order: list[str] = []
    monkeypatch.setattr(main_module, "load_settings", Settings)
    monkeypatch.setattr(main_module, "start_fork_server", lambda s: order.append("fork server"))
    monkeypatch.setattr(main_module, "check_dependencies", lambda s: order.append("checks"))

    def serve(settings: Settings, host: str, port: int) -> int:
        order.append("serve")
        return 0

    monkeypatch.setattr(main_module, "serve", serve)
    with pytest.raises(SystemExit):
        main_module.main()
    assert order == ["fork server", "checks", "serve"]


@pytest.mark.parametrize(
    ("env", "started"),
    [
        ({}, True),
        ({"ENSEMBLE_WORKERS": "2"}, False),
        ({"ENSEMBLE_DASK_SCHEDULER": "tcp://127.0.0.1:8786"}, False),
        ({"ENSEMBLE_PRELOAD_TRAINING": "false"}, False),
        ({"ENSEMBLE_PRELOAD_TRAINING": "true"}, True),
    ],
)
def test_the_fork_server_starts_early_only_for_a_process_that_trains_locally(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], started: bool
) -> None:
    for name in ("ENSEMBLE_WORKERS", "ENSEMBLE_DASK_SCHEDULER", "ENSEMBLE_PRELOAD_TRAINING"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    calls: list[int] = []
    monkeypatch.setattr(fork_server, "start", lambda: calls.append(1))
    launcher.start_fork_server(Settings())
    assert calls == ([1] if started else [])


@pytest.mark.parametrize("preload", [True, False])
def test_the_runners_warm_up_starts_the_fork_server_only_when_it_preloads(
    monkeypatch: pytest.MonkeyPatch, preload: bool
) -> None:
    """Without preload the fork server is left to the first job (multiprocessing starts
    it with the first process): a server that never trains never starts it."""
    monkeypatch.delenv("ENSEMBLE_DASK_SCHEDULER", raising=False)
    monkeypatch.setenv("ENSEMBLE_PRELOAD_TRAINING", str(preload).lower())
    calls: list[int] = []
    monkeypatch.setattr(fork_server, "start", lambda: calls.append(1))
    executor = executor_for(Settings())
    executor.warm_up()
    assert calls == ([1] if preload else [])


def test_a_fork_server_that_cannot_start_early_is_left_to_the_runner(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("ENSEMBLE_WORKERS", raising=False)
    monkeypatch.delenv("ENSEMBLE_DASK_SCHEDULER", raising=False)

    def failing() -> None:
        raise OSError("no more processes")

    monkeypatch.setattr(fork_server, "start", failing)
    launcher.start_fork_server(Settings())  # logged, not raised
    assert "the job runner will retry" in caplog.text


def test_the_launcher_does_not_import_the_library() -> None:
    """What runs before the fork server starts stays light: the library (scikit-learn,
    pandas) is imported by the checks, after it."""
    library = "{'sklearn', 'pandas', 'ensembles'}"
    code = f"import sys, app.server.launcher; print(sorted({library} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    assert fork_server.PRELOAD == ["app.jobs.worker"]
    assert ProcessExecutor()._context.get_start_method() == "forkserver"
