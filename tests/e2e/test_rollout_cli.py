"""Weighted aliases and shadows through the client and the ``ensemble`` CLI, against a
real server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ensemble_client import Client, NotFoundError
from ensemble_client.cli import cli
from ensemble_client.cli.rollout import parse_targets
from tests.api.support import IRIS_FEATURES, iris_frame
from tests.e2e.server import Server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("rollout-e2e")
    started = Server(folder / "data", folder / "server.log").start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def three_versions(server: Server) -> str:
    with Client(server.url) as client:
        client.datasets.upload(iris_frame(), name="iris")
        for trees in (3, 4, 5):
            client.models.train(
                "roll", dataset="iris", target="species", ensemble="random_forest",
                params={"n_estimators": trees}, random_state=trees, progress=False,
            )  # fmt: skip
    return server.url


def test_the_client_sets_weights_and_reads_the_shadow(three_versions: str) -> None:
    with Client(three_versions) as client:
        alias = client.models.set_alias("roll", "canary", versions={1: 0.9, 2: 0.1}, shadow=3)
        assert (alias.version, alias.versions, alias.shadow) == (1, {1: 0.9, 2: 0.1}, 3)
        assert client.models.get_alias("roll", "canary") == alias
        rows = iris_frame()[IRIS_FEATURES].head(4)
        for _ in range(3):
            client.models.predict("roll", rows, ref="canary")
        deadline = time.monotonic() + 60
        while (stats := client.models.shadow_stats("roll", "canary")).requests < 3:
            assert time.monotonic() < deadline, stats
            time.sleep(0.05)
        assert (stats.shadow, stats.requests, stats.rows, stats.errors) == (3, 3, 12, 0)
        assert stats.label_agreement is not None and 0 <= stats.label_agreement <= 1
        plain = client.models.set_alias("roll", "canary", 2)
        assert (plain.version, plain.versions, plain.shadow) == (2, None, None)
        with pytest.raises(NotFoundError):
            client.models.shadow_stats("roll", "canary")


def test_the_cli_sets_weights_and_shows_the_shadow(three_versions: str) -> None:
    runner = CliRunner()
    env = {"ENSEMBLE_URL": three_versions}
    weighted = runner.invoke(
        cli, ["alias", "set", "roll", "prod", "1=0.75", "2=0.25", "--shadow", "3", "--json"],
        env=env,
    )  # fmt: skip
    assert weighted.exit_code == 0, weighted.output
    assert json.loads(weighted.output) == {
        "model": "roll", "alias": "prod", "version": 1,
        "versions": {"1": 0.75, "2": 0.25}, "shadow": 3,
    }  # fmt: skip
    human = runner.invoke(cli, ["alias", "set", "roll", "prod", "1=0.75", "2=0.25"], env=env)
    assert human.exit_code == 0 and "v1 0.75, v2 0.25" in human.output
    shadowed = runner.invoke(cli, ["alias", "set", "roll", "prod", "1", "--shadow", "2"], env=env)
    assert shadowed.exit_code == 0 and "(shadow v2)" in shadowed.output
    stats = runner.invoke(cli, ["alias", "shadow", "roll", "prod", "--json"], env=env)
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.output)["shadow"] == 2
    table = runner.invoke(cli, ["alias", "shadow", "roll", "prod"], env=env)
    assert table.exit_code == 0 and "label agreement" in table.output
    # 1: the server's 422, each location printed; 2: usage errors.
    bad = runner.invoke(cli, ["alias", "set", "roll", "prod", "1=0.5", "2=0.4"], env=env)
    assert bad.exit_code == 1 and "versions: the weights must sum to 1" in bad.output
    unknown = runner.invoke(cli, ["alias", "set", "roll", "prod", "1=0.5", "9=0.5"], env=env)
    assert unknown.exit_code == 1 and "versions.9: model 'roll' has no version 9" in unknown.output
    for args in (["1=half"], ["1", "2"], ["zero"], []):
        assert runner.invoke(cli, ["alias", "set", "roll", "prod", *args], env=env).exit_code == 2
    plain = runner.invoke(cli, ["alias", "set", "roll", "prod", "2", "--json"], env=env)
    assert json.loads(plain.output) == {"model": "roll", "alias": "prod", "version": 2}
    none = runner.invoke(cli, ["alias", "shadow", "roll", "prod"], env=env)
    assert none.exit_code == 1 and "has no shadow" in none.output


def test_targets_parse_as_one_version_or_weights(tmp_path: Path) -> None:
    assert parse_targets(("3",)) == (3, None)
    assert parse_targets(("3=0.9", "4=0.1")) == (None, {3: 0.9, 4: 0.1})
