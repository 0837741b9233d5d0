"""POST /v1/models/{name}/versions: submit-time checks, 202/201, wait, numbering."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
from fastapi import FastAPI

from app.settings import Settings
from tests.api.conftest import started
from tests.api.support import Api, forest, iris_csv, iris_frame, locs

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


async def test_submit_202_with_location_and_job(api: Api) -> None:
    dataset = await api.iris()
    response = await api.submit("iris-clf", forest(dataset))
    assert response.status_code == 202, response.text
    job = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["status"] in ("queued", "running")
    assert (job["model"], job["version"], job["task"], job["kind"]) == (
        "iris-clf", 1, "classification", "random_forest",
    )  # fmt: skip
    assert job["progress"].keys() == {"done", "total", "stage"}
    assert job["error"] is None and job["finished_at"] is None
    done = await api.wait_job(job["id"])
    assert done["status"] == "succeeded", done
    assert done["started_at"] and done["finished_at"]
    version = await api.client.get("/v1/models/iris-clf/versions/1")
    assert version.status_code == 200


async def test_wait_true_201_with_the_version(api: Api) -> None:
    dataset = await api.iris()
    response = await api.submit(
        "iris-clf", forest(dataset, description="d", tags={"t": "1"}), wait=True
    )
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/v1/models/iris-clf/versions/1"
    version = response.json()
    assert (version["model"], version["version"], version["kind"]) == (
        "iris-clf",
        1,
        "random_forest",
    )
    assert version["spec"]["params"]["n_estimators"] == 10
    assert version["spec"]["params"]["max_depth"] is None  # defaults filled in
    assert version["dataset"]["id"] == dataset and version["dataset"]["n_rows"] == 150
    assert version["target"] == "species"
    assert [f["name"] for f in version["features"]] == [
        "sepal_length", "sepal_width", "petal_length", "petal_width",
    ]  # fmt: skip
    assert version["classes"] == ["setosa", "versicolor", "virginica"]
    assert version["metrics"]["oob"]["n_scored"] > 0
    assert version["metrics"]["holdout"]["n"] == 30
    assert version["training"]["random_state"] == 0
    assert version["training"]["n_estimators"] == 10
    assert version["artifact"]["format"] == "joblib"
    assert {"scikit-learn", "numpy", "python"} <= version["artifact"]["library_versions"].keys()
    assert (version["description"], version["tags"]) == ("d", {"t": "1"})
    assert "signature" not in version


async def test_random_state_chosen_and_recorded_when_absent(api: Api) -> None:
    dataset = await api.iris()
    body = forest(dataset)
    del body["random_state"]
    job = (await api.submit("seedless", body)).json()
    assert isinstance(job["random_state"], int)
    await api.wait_job(job["id"])
    version = (await api.client.get("/v1/models/seedless/versions/1")).json()
    assert version["training"]["random_state"] == job["random_state"]


async def test_same_request_same_model(api: Api) -> None:
    dataset = await api.iris()
    first = await api.train("same", forest(dataset))
    second = await api.train("same", forest(dataset))
    assert first["metrics"]["oob"] == second["metrics"]["oob"]
    one = await api.client.get("/v1/models/same/versions/1/artifact")
    two = await api.client.get("/v1/models/same/versions/2/artifact")
    assert one.headers["x-artifact-sha256"] == two.headers["x-artifact-sha256"]


async def test_task_inferred_and_reported(api: Api) -> None:
    frame = pd.DataFrame(
        {"x": [float(i) for i in range(40)], "y": [i * 0.5 + 0.25 for i in range(40)]}
    )
    dataset = await api.upload_frame(frame, "lin")
    body = {
        "dataset_id": dataset,
        "target": "y",
        "ensemble": {"kind": "bagging", "params": {"n_estimators": 3}},
    }
    response = await api.submit("reg", body)
    assert response.status_code == 202, response.text
    assert response.json()["task"] == "regression"


async def test_versions_are_never_reused(api: Api) -> None:
    dataset = await api.iris()
    for _ in range(2):
        await api.train("numbers", forest(dataset, n_estimators=3))
    assert (await api.client.delete("/v1/models/numbers/versions/2")).status_code == 204
    assert (await api.train("numbers", forest(dataset, n_estimators=3)))["version"] == 3
    assert (await api.client.delete("/v1/models/numbers")).status_code == 204
    assert (await api.train("numbers", forest(dataset, n_estimators=3)))["version"] == 4


# ------------------------------------------------------------------ refused at submit


async def _refused(api: Api, body: dict[str, Any], model: str = "m") -> list[list[Any]]:
    response = await api.submit(model, body)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["status"] == 422 and problem["title"] and problem["detail"]
    jobs = (await api.client.get("/v1/jobs")).json()
    assert jobs == [] or all(j["model"] != model for j in jobs)  # nothing was queued
    return locs(response)


async def test_invalid_model_name_422(api: Api) -> None:
    dataset = await api.iris()
    response = await api.submit("-bad", forest(dataset))
    assert response.status_code == 422
    assert locs(response) == [["path", "name"]]


async def test_unknown_dataset_422(api: Api) -> None:
    assert await _refused(api, forest("ds_000000000000000000000000")) == [["dataset_id"]]


async def test_dataset_by_its_name(api: Api) -> None:
    dataset = await api.iris()
    name = (await api.client.get(f"/v1/datasets/{dataset}")).json()["name"]
    version = await api.train("by-name", forest(name))
    assert version["dataset"]["id"] == dataset
    again = (await api.upload_csv(iris_csv(), name=name)).json()["id"]  # the same table
    version = await api.train("by-name", forest(name))
    assert version["dataset"]["id"] == again  # the newest of one table's uploads
    await api.upload_csv(iris_frame().head(60).to_csv(index=False), name=name)
    response = await api.submit("by-name", forest(name))
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["loc"] == ["dataset_id"] and dataset in error["msg"] and again in error["msg"]
    assert await _refused(api, forest("no-such-name")) == [["dataset_id"]]


async def test_missing_target_and_feature_columns_422(api: Api) -> None:
    dataset = await api.iris()
    body = {**forest(dataset), "target": "colour", "features": ["sepal_length", "nope"]}
    assert await _refused(api, body) == [["target"], ["features", 1]]


async def test_unknown_kind_and_parameter_422(api: Api) -> None:
    dataset = await api.iris()
    body = {**forest(dataset), "ensemble": {"kind": "random_forrest"}}
    assert await _refused(api, body) == [["ensemble", "kind"]]
    body = {**forest(dataset), "ensemble": {"kind": "random_forest", "params": {"trees": 3}}}
    assert await _refused(api, body) == [["ensemble", "params", "trees"]]


async def test_refusals_say_what_was_meant(api: Api) -> None:
    """A misspelt column, kind or parameter: the message names the likely one (issue 20)."""
    dataset = await api.iris()
    body = {
        **forest(dataset, target="Species", features=["sepal_lenght"]),
        "ensemble": {"kind": "random_forrest"},
    }
    response = await api.submit("m", body)
    assert response.status_code == 422, response.text
    errors = {tuple(e["loc"]): e["msg"] for e in response.json()["errors"]}
    assert "did you mean 'species'?" in errors[("target",)]
    assert "'sepal_width', 'petal_length', 'petal_width', 'species'" in errors[("target",)]
    assert "did you mean 'sepal_length'?" in errors[("features", 0)]
    assert "did you mean 'random_forest'?" in errors[("ensemble", "kind")]
    body = {**forest(dataset), "ensemble": {"kind": "random_forest", "params": {"max_dept": 3}}}
    response = await api.submit("m", body)
    (error,) = response.json()["errors"]
    assert error["loc"] == ["ensemble", "params", "max_dept"]
    assert "did you mean 'max_depth'?" in error["msg"]


async def test_value_out_of_bounds_has_the_full_path(api: Api) -> None:
    dataset = await api.iris()
    body = {
        **forest(dataset),
        "ensemble": {
            "kind": "voting",
            "estimators": [
                {"name": "lr", "kind": "logistic_regression"},
                {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 0}},
            ],
        },
    }
    response = await api.submit("m", body)
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"].endswith("/validation")
    assert problem["title"] == "Invalid training request"
    assert problem["errors"] == [
        {
            "loc": ["ensemble", "estimators", 1, "params", "n_estimators"],
            "msg": "must be an integer >= 1 and <= 5000; got 0",
        }
    ]


async def test_kind_that_does_not_fit_the_task_422(api: Api) -> None:
    dataset = await api.iris()
    soft = {
        **forest(dataset),
        "ensemble": {
            "kind": "voting",
            "params": {"voting": "soft"},
            "estimators": [
                {"name": "svm", "kind": "svm"},
                {"name": "nb", "kind": "gaussian_nb"},
            ],
        },
    }
    assert await _refused(api, soft) == [["ensemble", "estimators", 0, "kind"]]
    frame = pd.DataFrame({"x": [float(i) for i in range(30)], "y": [i * 1.5 for i in range(30)]})
    numbers = await api.upload_frame(frame, "numbers")
    nb = {
        "dataset_id": numbers,
        "target": "y",
        "task": "regression",
        "ensemble": {"kind": "bagging", "estimator": {"kind": "gaussian_nb"}},
    }
    assert await _refused(api, nb) == [["ensemble", "estimator", "kind"]]


async def test_target_unfit_for_the_task_422(api: Api) -> None:
    dataset = await api.iris()
    body = {**forest(dataset), "task": "regression"}
    assert await _refused(api, body) == [["target"]]
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "y": ["a", "a", "a", "a"]})
    single = await api.upload_frame(frame, "one-class")
    body = {**forest(single), "target": "y"}
    assert await _refused(api, body) == [["target"]]


async def test_resource_bounds_422(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(max_nesting_depth=2, max_members_per_level=2)):
        dataset = await api.iris()
        deep = {
            **forest(dataset),
            "ensemble": {
                "kind": "bagging",
                "estimator": {"kind": "bagging", "estimator": {"kind": "bagging"}},
            },
        }
        assert await _refused(api, deep) == [["ensemble", "estimator", "estimator", "kind"]]
        wide = {
            **forest(dataset),
            "ensemble": {
                "kind": "voting",
                "estimators": [{"name": f"t{i}", "kind": "decision_tree"} for i in range(3)],
            },
        }
        assert await _refused(api, wide) == [["ensemble", "estimators"]]


async def test_every_problem_at_once(api: Api) -> None:
    body = {
        "dataset_id": "ds_000000000000000000000000",
        "target": "species",
        "ensemble": {
            "kind": "voting",
            "estimators": [{"name": "rf", "kind": "random_forest", "params": {"n_estimators": -1}}],
        },
        "evaluation": {"holdout_fraction": 2},
        "random_state": -5,
        "colour": "blue",
    }
    assert sorted(await _refused(api, body), key=str) == sorted(
        [
            ["colour"],
            ["evaluation", "holdout_fraction"],
            ["random_state"],
            ["dataset_id"],
            ["ensemble", "estimators", 0, "params", "n_estimators"],
        ],
        key=str,
    )


async def test_structure_errors_422(api: Api) -> None:
    assert sorted(await _refused(api, {}), key=str) == [["dataset_id"], ["ensemble"], ["target"]]
    response = await api.client.post(
        "/v1/models/m/versions", content=b"[1", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and locs(response) == [["body"]]
    response = await api.client.post("/v1/models/m/versions", content=b"x=1")
    assert response.status_code == 415


# ------------------------------------------- refused at submit: the data cannot train it


async def _refused_for(api: Api, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Refused at submit, with ``?wait=true`` too, before any job exists."""
    for wait in (False, True):
        response = await api.submit("m", body, wait=wait)
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["code"] == "invalid_spec" and "Traceback" not in response.text
    assert (await api.client.get("/v1/jobs")).json() == []
    errors: list[dict[str, Any]] = problem["errors"]
    return errors


async def test_holdout_that_leaves_too_few_training_rows_422(api: Api) -> None:
    dataset = await api.iris()
    body = {**forest(dataset), "evaluation": {"holdout_fraction": 0.99}}
    [error] = await _refused_for(api, body)
    assert error["loc"] == ["evaluation", "holdout_fraction"]
    assert error["msg"] == (
        "holding out 0.99 of 150 rows leaves 1 training row for 3 classes (each needs one): "
        "set evaluation.holdout_fraction to at most 0.98, or add rows"
    )


async def test_class_of_a_single_row_422(api: Api) -> None:
    iris = iris_frame()
    table = pd.concat([iris.iloc[0:10], iris.iloc[50:60], iris.iloc[100:101]])
    dataset = await api.upload_frame(table, "one-virginica")
    [error] = await _refused_for(api, forest(dataset))
    assert error["loc"] == ["target"]
    assert error["msg"] == (
        "class 'virginica' has 1 row; the stratified hold-out split needs at least 2 rows of "
        "every class (one to train on, one to hold out): add rows of it, remove it from the "
        "table, or set evaluation.holdout_fraction to 0"
    )
    body = {**forest(dataset), "evaluation": {"holdout_fraction": 0}}
    assert (await api.submit("m", body, wait=True)).status_code == 201


async def test_knn_with_more_neighbours_than_rows_422(api: Api) -> None:
    dataset = await api.iris()
    body = {
        **forest(dataset),
        "ensemble": {
            "kind": "bagging",
            "params": {"n_estimators": 5},
            "estimator": {"kind": "knn", "params": {"n_neighbors": 500}},
        },
    }
    [error] = await _refused_for(api, body)
    assert error["loc"] == ["ensemble", "estimator", "params", "n_neighbors"]
    assert error["msg"].startswith("n_neighbors=500, but this knn is fitted on at most 120 rows")
    assert error["msg"].endswith("set n_neighbors to at most 120")


async def test_folds_the_classes_cannot_fill_422(api: Api) -> None:
    frame = pd.DataFrame({"x": [float(i) for i in range(8)], "y": ["a", "b"] * 4})
    dataset = await api.upload_frame(frame, "tiny")
    body = {
        "dataset_id": dataset,
        "target": "y",
        "ensemble": {"kind": "random_forest", "params": {"n_estimators": 3}},
        "evaluation": {"holdout_fraction": 0, "cv_folds": 6},
    }
    [error] = await _refused_for(api, body)
    assert error["loc"] == ["evaluation", "cv_folds"]
    assert error["msg"].endswith("set cv_folds to at most 4")


async def test_every_problem_with_the_rows_at_once(api: Api) -> None:
    dataset = await api.iris()
    body = {
        **forest(dataset),
        "ensemble": {
            "kind": "stacking",
            "params": {"cv": 5},
            "estimators": [
                {"name": "near", "kind": "knn", "params": {"n_neighbors": 100}},
                {"name": "tree", "kind": "decision_tree"},
            ],
        },
        "evaluation": {"holdout_fraction": 0.5, "cv_folds": 5},
    }
    errors = await _refused_for(api, body)
    assert [e["loc"] for e in errors] == [["ensemble", "estimators", 0, "params", "n_neighbors"]]
    assert "the 75 training rows left after holding out 75 of 150" in errors[0]["msg"]
    assert errors[0]["msg"].endswith("set n_neighbors to at most 60")


# ------------------------------------------------ failed in training: a 422 problem, or a bug


async def test_refusal_of_scikit_learn_in_fit_fails_the_job_with_a_422_problem(api: Api) -> None:
    """l1_ratio > 0 with the default solver: scikit-learn refuses it only in fit."""
    dataset = await api.iris()
    body = {
        **forest(dataset),
        "ensemble": {
            "kind": "bagging",
            "params": {"n_estimators": 3},
            "estimator": {"kind": "logistic_regression", "params": {"l1_ratio": 0.5}},
        },
    }
    submitted = await api.submit("l1", body)
    assert submitted.status_code == 202, submitted.text
    job = await api.wait_job(submitted.json()["id"])
    assert job["status"] == "failed"
    error = job["error"]
    assert (error["code"], error["status"], error["type"]) == (
        "training_failed", 422, "/problems/training-failed"
    )  # fmt: skip
    assert error["detail"] == (
        "scikit-learn could not fit this model: "
        "Solver lbfgs supports only 'l2' or None penalties, got elasticnet penalty."
    )
    assert error["errors"] == [
        {
            "loc": ["ensemble", "estimator", "params", "solver"],
            "msg": "Solver lbfgs supports only 'l2' or None penalties, got elasticnet penalty.",
        }
    ]
    waited = await api.submit("l1", body, wait=True)
    assert waited.status_code == 422, waited.text
    assert waited.headers["content-type"] == "application/problem+json"
    problem = waited.json()
    own = ("instance", "request_id")  # the answer's request, not the job's
    assert {k: problem[k] for k in error if k not in own} == {
        k: v for k, v in error.items() if k not in own
    }
    assert problem["instance"].startswith("/v1/jobs/") and "Traceback" not in waited.text
    assert (await api.client.get("/v1/models/l1")).status_code == 404


async def test_bug_while_training_stays_a_500_without_a_trace(app: FastAPI, api: Api) -> None:
    """A job document that skipped the submit checks (a bug of ours, made for real: the
    runner trains what the registry holds) fails as "internal", not as the user's."""
    dataset = await api.iris()
    accepted = await api.submit("ok", forest(dataset))
    document = dict(await _document(app, accepted.json()["id"]))
    document["ensemble"] = {"kind": "random_forest", "params": {"n_estimators": "many"}}
    registry = app.state.services.registry
    job = registry.submit_job("bug", document)
    ended = await api.wait_job(job.id)
    assert ended["status"] == "failed"
    error = ended["error"]
    assert (error["code"], error["status"]) == ("internal", 500)
    assert error["detail"] == "unexpected error while training (ValueError); it has been logged"
    assert "many" not in str(error) and "Traceback" not in str(error)


async def _document(app: FastAPI, job_id: str) -> dict[str, Any]:
    job = app.state.services.registry.get_job(job_id)
    request: dict[str, Any] = job.request
    return request


# ----------------------------------------------------------------------- silent no more


async def test_adaboost_that_stops_early_says_so(api: Api) -> None:
    dataset = await api.iris()
    body = {
        **forest(dataset),
        "ensemble": {
            "kind": "adaboost",
            "params": {"n_estimators": 50},
            "estimator": {"kind": "decision_tree", "params": {"max_depth": None}},
        },
    }
    version = await api.train("ada", body)
    assert version["spec"]["params"]["n_estimators"] == 50
    assert version["training"]["n_estimators"] == 1
    assert version["metrics"]["notes"][0] == (
        "AdaBoost stopped after 1 of 50 members: member 1 fits the training rows perfectly "
        "(weighted error 0), so there is nothing left to boost"
    )


async def test_queue_full_429(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(max_concurrent_jobs=1, max_queued_jobs=1)):
        dataset = await api.iris()
        slow = forest(dataset, n_estimators=3000)
        first = await api.submit("q", slow)
        second = await api.submit("q", slow)
        third = await api.submit("q", slow)
        assert (first.status_code, second.status_code) == (202, 202)
        assert third.status_code == 429
        assert third.json()["code"] == "queue_full"
        assert int(third.headers["retry-after"]) > 0
        for response in (first, second):
            await api.client.post(f"/v1/jobs/{response.json()['id']}/cancel")
