"""Models, versions, aliases and artifacts."""

from __future__ import annotations

import hashlib
import io
from collections.abc import AsyncIterator
from pathlib import Path

import joblib
import pytest
from fastapi import FastAPI
from sklearn.pipeline import Pipeline

from tests.api.conftest import make_settings, serve_copy, started, train_once
from tests.api.support import Api, forest, locs


async def _two_versions(api: Api) -> str:
    dataset = await api.iris()
    await api.train("iris-clf", forest(dataset, n_estimators=3))
    await api.train("iris-clf", forest(dataset, n_estimators=4))
    return dataset


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A data folder with versions 1 and 2 of iris-clf, trained once for the module, and
    the id of their dataset."""
    folder = tmp_path_factory.mktemp("models") / "data"
    return folder, train_once(folder, _two_versions)


@pytest.fixture
async def served(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[FastAPI, Api]]:
    """The app of a test (as tests/api/conftest.py's): on a copy of the trained folder for
    a test that asks for ``two_versions``, else on an empty one."""
    if "two_versions" in request.fixturenames:
        pairs = serve_copy(request.getfixturevalue("trained")[0], tmp_path)
    else:
        pairs = started(make_settings(tmp_path / "data"))
    async for pair in pairs:
        yield pair


@pytest.fixture
def two_versions(trained: tuple[Path, str]) -> str:
    """iris-clf versions 1 and 2 (forests of 3 and 4 trees) in the test's app; their
    dataset's id."""
    return trained[1]


async def test_list_and_get_models(api: Api, two_versions: str) -> None:
    await api.train("other", forest(two_versions, n_estimators=3))
    listed = await api.client.get("/v1/models")
    assert listed.status_code == 200
    body = listed.json()
    assert [m["name"] for m in body] == ["iris-clf", "other"]
    assert body[0]["latest_version"] == 2 and body[0]["aliases"] == {}
    assert body[0]["created_at"].endswith("Z")
    one = await api.client.get("/v1/models/iris-clf")
    assert one.status_code == 200 and one.json()["latest_version"] == 2


async def test_unknown_model_404_and_bad_name_422(api: Api) -> None:
    for path in ("/v1/models/nope", "/v1/models/nope/versions", "/v1/models/nope/versions/1"):
        response = await api.client.get(path)
        assert response.status_code == 404, path
        assert response.json()["code"] == "not_found"
    bad = await api.client.get("/v1/models/bad%20name")
    assert bad.status_code == 422 and locs(bad) == [["path", "name"]]


async def test_versions_newest_first_and_by_reference(api: Api, two_versions: str) -> None:
    versions = await api.client.get("/v1/models/iris-clf/versions")
    assert [v["version"] for v in versions.json()] == [2, 1]
    latest = await api.client.get("/v1/models/iris-clf/versions/latest")
    assert latest.json()["version"] == 2
    first = await api.client.get("/v1/models/iris-clf/versions/1")
    assert first.json()["spec"]["params"]["n_estimators"] == 3
    missing = await api.client.get("/v1/models/iris-clf/versions/9")
    assert missing.status_code == 404
    no_alias = await api.client.get("/v1/models/iris-clf/versions/staging")
    assert no_alias.status_code == 404


async def test_aliases(api: Api, two_versions: str) -> None:
    put = await api.client.put("/v1/models/iris-clf/aliases/production", json={"version": 1})
    assert put.status_code == 200
    assert put.json() == {"model": "iris-clf", "alias": "production", "version": 1}
    by_alias = await api.client.get("/v1/models/iris-clf/versions/production")
    assert by_alias.json()["version"] == 1
    assert by_alias.json()["aliases"] == ["production"]
    model = await api.client.get("/v1/models/iris-clf")
    assert model.json()["aliases"] == {"production": 1}
    moved = await api.client.put("/v1/models/iris-clf/aliases/production", json={"version": 2})
    assert moved.status_code == 200
    assert (await api.client.get("/v1/models/iris-clf/versions/production")).json()["version"] == 2
    deleted = await api.client.delete("/v1/models/iris-clf/aliases/production")
    assert deleted.status_code == 204
    assert (await api.client.get("/v1/models/iris-clf/versions/production")).status_code == 404
    gone = await api.client.delete("/v1/models/iris-clf/aliases/production")
    assert gone.status_code == 404


async def test_alias_errors(api: Api, two_versions: str) -> None:
    latest = await api.client.put("/v1/models/iris-clf/aliases/latest", json={"version": 1})
    assert latest.status_code == 422 and locs(latest) == [["path", "alias"]]
    bad = await api.client.put("/v1/models/iris-clf/aliases/9lives", json={"version": 1})
    assert bad.status_code == 422 and locs(bad) == [["path", "alias"]]
    body = await api.client.put("/v1/models/iris-clf/aliases/prod", json={"version": 0})
    assert body.status_code == 422 and locs(body) == [["version"]]
    missing = await api.client.put("/v1/models/iris-clf/aliases/prod", json={"version": 7})
    assert missing.status_code == 404
    no_model = await api.client.put("/v1/models/nope/aliases/prod", json={"version": 1})
    assert no_model.status_code == 404


async def test_two_models_may_share_an_alias_name(api: Api, two_versions: str) -> None:
    await api.train("other", forest(two_versions, n_estimators=3))
    for name, version in (("iris-clf", 2), ("other", 1)):
        response = await api.client.put(
            f"/v1/models/{name}/aliases/production", json={"version": version}
        )
        assert response.status_code == 200
    assert (await api.client.get("/v1/models/other/versions/production")).json()["version"] == 1


async def test_delete_aliased_version_409_then_after_moving_204(
    api: Api, two_versions: str
) -> None:
    await api.client.put("/v1/models/iris-clf/aliases/production", json={"version": 1})
    conflict = await api.client.delete("/v1/models/iris-clf/versions/1")
    assert conflict.status_code == 409
    assert conflict.json()["code"] == "conflict" and "production" in conflict.json()["detail"]
    await api.client.put("/v1/models/iris-clf/aliases/production", json={"version": 2})
    assert (await api.client.delete("/v1/models/iris-clf/versions/1")).status_code == 204
    assert (await api.client.get("/v1/models/iris-clf/versions/1")).status_code == 404
    assert (await api.client.delete("/v1/models/iris-clf/versions/1")).status_code == 404
    not_number = await api.client.delete("/v1/models/iris-clf/versions/latest")
    assert not_number.status_code == 422 and locs(not_number) == [["path", "ref"]]


async def test_delete_model(api: Api, two_versions: str) -> None:
    assert (await api.client.delete("/v1/models/iris-clf")).status_code == 204
    assert (await api.client.get("/v1/models/iris-clf")).status_code == 404
    assert (await api.client.get("/v1/models")).json() == []
    assert (await api.client.delete("/v1/models/iris-clf")).status_code == 404


async def test_artifact_is_a_plain_pipeline_with_its_sha256(api: Api, two_versions: str) -> None:
    response = await api.client.get("/v1/models/iris-clf/versions/latest/artifact")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/octet-stream"
    digest = hashlib.sha256(response.content).hexdigest()
    assert response.headers["x-artifact-sha256"] == digest
    version = (await api.client.get("/v1/models/iris-clf/versions/2")).json()
    assert version["artifact"]["sha256"] == digest
    assert version["artifact"]["size_bytes"] == len(response.content)
    pipeline = joblib.load(io.BytesIO(response.content))
    assert isinstance(pipeline, Pipeline)
    modules = {type(step).__module__.split(".")[0] for _, step in pipeline.steps}
    assert modules == {"sklearn"}
    missing = await api.client.get("/v1/models/iris-clf/versions/5/artifact")
    assert missing.status_code == 404


async def test_dataset_deletion_leaves_versions_working(api: Api, two_versions: str) -> None:
    assert (await api.client.delete(f"/v1/datasets/{two_versions}")).status_code == 204
    row = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}
    response = await api.predict("iris-clf", "latest", {"instances": [row]})
    assert response.status_code == 200
    assert response.json()["predictions"] == ["setosa"]


# Names that would climb out of a folder, hide a file, or smuggle a separator or a NUL,
# as they arrive in a URL path (percent-encoded where a client would have to; a literal
# ".." segment is resolved by the client before it is sent).
PATH_NAMES = [".hidden", "%2e%2e", "a%5Cb", "a%00b", "-x", "x" * 129, "%C3%A9"]


@pytest.mark.parametrize("name", PATH_NAMES)
async def test_unsafe_model_names_are_refused_before_any_path(
    app: FastAPI, api: Api, name: str
) -> None:
    data_dir = Path(app.state.settings.data_dir)
    before = sorted(p for p in data_dir.rglob("*") if "locks" not in p.parts)
    calls = [
        ("POST", f"/v1/models/{name}/versions", {"json": {"dataset_id": "x"}}),
        ("GET", f"/v1/models/{name}", {}),
        ("DELETE", f"/v1/models/{name}", {}),
        ("GET", f"/v1/models/{name}/versions/1/artifact", {}),
        ("POST", f"/v1/models/{name}/versions/latest/predict", {"json": {"instances": []}}),
        ("PUT", f"/v1/models/{name}/aliases/prod", {"json": {"version": 1}}),
    ]
    # An encoded separator never reaches a route (app.edge): a 404 naming the path.
    separator = "%5c" in name.lower()
    status, loc = (404, ["path"]) if separator else (422, ["path", "name"])
    for method, path, kwargs in calls:
        response = await api.client.request(method, path, **kwargs)
        assert response.status_code == status, f"{method} {path}: {response.text}"
        assert loc in locs(response), path
    after = sorted(p for p in data_dir.rglob("*") if "locks" not in p.parts)
    assert after == before  # nothing was created, anywhere


@pytest.mark.parametrize("alias", ["a.b", "%2e%2e", "_x", "latest", "a" * 65])
async def test_unsafe_aliases_and_refs_are_refused(api: Api, alias: str) -> None:
    for method, path, kwargs in [
        ("PUT", f"/v1/models/m/aliases/{alias}", {"json": {"version": 1}}),
        ("DELETE", f"/v1/models/m/aliases/{alias}", {}),
    ]:
        response = await api.client.request(method, path, **kwargs)
        assert response.status_code == 422, f"{method} {path}"
        assert locs(response) == [["path", "alias"]]
    if alias != "latest":
        response = await api.client.get(f"/v1/models/m/versions/{alias}")
        assert response.status_code == 422 and locs(response) == [["path", "ref"]]
