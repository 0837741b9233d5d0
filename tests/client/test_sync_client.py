"""The synchronous client over the app: the same operations as the async one, sent with
an ``httpx.Client`` (Starlette's TestClient is one, over the ASGI app)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from ensemble_client import AuthenticationError, Client, NotFoundError, PermissionDeniedError
from tests.api.conftest import make_settings
from tests.api.support import IRIS_FEATURES, iris_frame

FOREST = {"kind": "random_forest", "params": {"n_estimators": 15}}


def test_the_sync_client_has_the_same_surface(tmp_path: Path) -> None:
    """``Client`` over the app (Starlette's TestClient is an httpx.Client)."""
    app = create_app(make_settings(tmp_path / "data"))
    with TestClient(app, base_url="http://test") as http:
        client = Client(http=http)
        iris = client.datasets.upload(iris_frame(), name="iris")
        version = client.models.train(
            "iris-rf", dataset="iris", target="species", ensemble=FOREST, random_state=0,
            progress=False,
        )  # fmt: skip
        assert version.dataset.id == iris.id and version.metrics.oob is not None
        frame = client.models.predict("iris-rf", iris_frame()[IRIS_FEATURES].head(3))
        assert frame["prediction"].tolist() == ["setosa"] * 3
        with pytest.raises(NotFoundError):
            client.jobs.get("job_missing")
        job = client.jobs.list(model="iris-rf")[0]
        assert client.jobs.wait(job, progress=False).status == "succeeded"


def test_api_keys_from_the_argument_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path / "data", api_keys="k-read:read,k-admin:admin")
    with TestClient(create_app(settings), base_url="http://test") as http:
        monkeypatch.delenv("ENSEMBLE_API_KEY", raising=False)
        with pytest.raises(AuthenticationError) as caught:
            Client(http=http).models.list()
        assert (caught.value.status, caught.value.code) == (401, "unauthenticated")
        monkeypatch.setenv("ENSEMBLE_API_KEY", "k-read")
        reader = Client(http=http)
        assert reader.models.list() == []
        with pytest.raises(PermissionDeniedError) as denied:
            reader.datasets.upload(iris_frame(), name="iris")
        assert denied.value.status == 403
        admin = Client(http=http, api_key="k-admin")  # the argument wins
        assert admin.datasets.upload(iris_frame(), name="iris").n_rows == 150
