"""ENSEMBLE_PREDICT_THREADS and ENSEMBLE_PREDICT_PART_ROWS: how many threads a big
prediction request may be answered on, and the least rows of a part; bad values stop the
start naming the variable, and the versions the service loads take what they say."""

from __future__ import annotations

import pytest

from app.server.launcher import EXIT_SETTINGS, load_settings
from app.settings import MAX_PREDICT_THREADS, Settings, available_cpus
from ensembles.inference.row_parts import DEFAULT_MIN_ROWS, RowParts


def test_auto_is_this_process_s_share_of_the_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ENSEMBLE_PREDICT_THREADS", "ENSEMBLE_PREDICT_PART_ROWS", "ENSEMBLE_WORKERS"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert settings.predict_threads == "auto"
    assert settings.row_parts == RowParts(available_cpus(), DEFAULT_MIN_ROWS)
    monkeypatch.setenv("ENSEMBLE_WORKERS", str(available_cpus() + 1))
    assert Settings().row_parts.threads == 1  # more processes than CPUs: one thread each


@pytest.mark.parametrize(("value", "expected"), [("1", 1), (" 3 ", 3), ("AUTO", "auto")])
def test_predict_threads_is_a_number_or_auto(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: int | str
) -> None:
    monkeypatch.setenv("ENSEMBLE_PREDICT_THREADS", value)
    monkeypatch.setenv("ENSEMBLE_PREDICT_PART_ROWS", "500")
    settings = Settings()
    assert settings.predict_threads == expected
    if isinstance(expected, int):
        assert settings.row_parts == RowParts(expected, 500)


THREADS_RULE = (
    "ENSEMBLE_PREDICT_THREADS is the number of threads one big prediction request may be "
    f"answered on: a whole number from 1 to {MAX_PREDICT_THREADS}, or auto (the CPUs this "
    "process may use divided by ENSEMBLE_WORKERS)"
)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        *(
            ("ENSEMBLE_PREDICT_THREADS", v)
            for v in ["0", "-2", str(MAX_PREDICT_THREADS + 1), "1.5", "two", ""]
        ),
        *(("ENSEMBLE_PREDICT_PART_ROWS", v) for v in ["0", "-1", "many"]),
    ],
)
def test_a_bad_value_stops_the_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as stopped:
        load_settings()
    assert stopped.value.code == EXIT_SETTINGS
    error = capsys.readouterr().err
    assert error.startswith(f"invalid setting {variable}: ")
    if variable == "ENSEMBLE_PREDICT_THREADS":
        assert error == f"invalid setting {variable}: {THREADS_RULE}\n"
