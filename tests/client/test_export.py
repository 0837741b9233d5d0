"""``client.models.export`` (sync and async) and ``ensemble export`` over the real app:
the bytes checked against their sha256, the facts that come with them, files written
atomically and never when the check fails."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import joblib
import onnxruntime
import pytest
import skops.io
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from app.main import create_app
from ensemble_client import ArtifactIntegrityError, AsyncClient, Client
from ensemble_client.cli import cli
from ensemble_client.cli.app import State
from ensembles.export.onnx_format import feeds
from tests.api.conftest import make_settings
from tests.api.support import IRIS_FEATURES, iris_frame
from tests.client.front import Front

FOREST = {"kind": "random_forest", "params": {"n_estimators": 8}}
HGB = {"kind": "hist_gradient_boosting", "params": {"max_iter": 3}}


@dataclass
class Served:
    front: Front
    http: httpx.Client


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The app behind a front that can corrupt responses, with "iris-rf" and "iris-hgb"."""
    app = create_app(make_settings(tmp_path_factory.mktemp("export") / "data"))
    front = Front(app)
    with TestClient(front, base_url="http://test") as http:
        client = Client(http=http)
        client.datasets.upload(iris_frame(), name="iris")
        for name, spec in (("iris-rf", FOREST), ("iris-hgb", HGB)):
            client.models.train(
                name, dataset="iris", target="species", ensemble=spec, random_state=0,
                progress=False,
            )  # fmt: skip
        yield Served(front, http)


@pytest.fixture
def front(served: Served) -> Front:
    return served.front


@pytest.fixture
def client(served: Served) -> Client:
    return Client(http=served.http)


def run(served: Served, *args: str) -> Result:
    """``ensemble ARGS`` with its client over the app."""
    return CliRunner().invoke(cli, list(args), obj=State(_client=Client(http=served.http)))


def test_the_client_exports_each_format_with_what_comes_with_it(
    client: Client, tmp_path: Path
) -> None:
    rows = iris_frame()[IRIS_FEATURES]
    stored, plain = client.models.export("iris-rf", 1, "joblib")
    assert (plain.format, plain.untrusted_types, plain.fidelity) == ("joblib", None, None)
    model = joblib.load(io.BytesIO(stored))

    data, info = client.models.export("iris-rf", "latest", "skops", to=tmp_path / "m.skops")
    assert (tmp_path / "m.skops").read_bytes() == data
    assert info.sha256 == hashlib.sha256(data).hexdigest()
    assert info.untrusted_types == ("sklearn.tree._tree.Tree",)
    loaded = skops.io.loads(data, trusted=list(info.untrusted_types))
    assert list(loaded.predict(rows)) == list(model.predict(rows))

    graph, described = client.models.export("iris-rf", 1)  # onnx by default
    assert described.format == "onnx" and described.fidelity is not None
    assert described.fidelity.rows == 30 and described.fidelity.rows_from == "holdout"
    assert described.fidelity.max_abs_diff is not None and described.fidelity.max_abs_diff <= 1e-4
    assert described.fidelity.label_agreement == 1.0
    session = onnxruntime.InferenceSession(graph, providers=["CPUExecutionProvider"])
    labels = session.run(None, feeds(rows, IRIS_FEATURES))[0]
    assert list(labels) == list(model.predict(rows))


async def test_the_async_client_exports_the_same(front: Front) -> None:
    transport = httpx.ASGITransport(front.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        data, info = await AsyncClient(http=http).models.export("iris-rf", 1, "skops")
    assert info.sha256 == hashlib.sha256(data).hexdigest() and info.untrusted_types


def test_a_corrupted_download_is_refused_and_nothing_is_written(
    served: Served, front: Front, client: Client, tmp_path: Path
) -> None:
    target = tmp_path / "m.onnx"
    target.write_bytes(b"the previous file")
    front.corrupt = "/export/"
    try:
        with pytest.raises(ArtifactIntegrityError, match="nothing was written"):
            client.models.export("iris-rf", 1, "onnx", to=target)
        result = run(served, "export", "iris-rf@1", "--format", "skops", "-o", str(target))
    finally:
        front.corrupt = None
    assert result.exit_code == 1 and "differs from the announced" in result.output
    assert target.read_bytes() == b"the previous file"  # left as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]  # no partial file


def test_ensemble_export_writes_the_checked_file(served: Served, tmp_path: Path) -> None:
    target = tmp_path / "iris.onnx"
    result = run(served, "export", "iris-rf", "--format", "onnx", "-o", str(target))
    assert result.exit_code == 0, result.output
    sha = hashlib.sha256(target.read_bytes()).hexdigest()
    assert f"wrote {target} (" in result.output and f"sha256 {sha}" in result.output
    assert "ONNX fidelity on 30 holdout rows: max |diff| " in result.output

    skops_file = tmp_path / "iris.skops"
    result = run(served, "export", "iris-rf@1", "-f", "skops", "-o", str(skops_file))
    assert "skops types to trust on load: sklearn.tree._tree.Tree" in result.output


def test_ensemble_export_names_the_part_that_does_not_convert(
    served: Served, tmp_path: Path
) -> None:
    target = tmp_path / "hgb.onnx"
    result = run(served, "export", "iris-hgb", "--format", "onnx", "-o", str(target))
    assert result.exit_code == 1
    assert "ensemble: ensemble (HistGradientBoostingClassifier):" in result.output
    assert not target.exists()
    bad = run(served, "export", "iris-rf", "--format", "pickle", "-o", str(target))
    assert bad.exit_code == 2 and "'pickle' is not one of" in bad.output
