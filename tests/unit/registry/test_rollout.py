"""Weighted aliases and shadows in the registry, on SQLite and PostgreSQL: what is kept,
what integrity they get, and shadow counts that add up across writers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ensembles.errors import ConflictError, NotFoundError
from ensembles.registry import SqlRegistry
from ensembles.routing import RouteError, ShadowCounts

from .support import publish


@pytest.fixture
def three(registry: SqlRegistry) -> SqlRegistry:
    for _ in range(3):
        publish(registry, "iris")
    return registry


def test_weights_and_shadow_are_kept_and_replaced(three: SqlRegistry) -> None:
    model = three.set_alias("iris", "prod", weights={1: 0.25, 2: 0.75}, shadow=3)
    assert model.aliases == {"prod": 2}  # the heaviest
    found = three.get_alias("iris", "prod")
    assert (found.version, found.weights, found.shadow) == (2, {1: 0.25, 2: 0.75}, 3)
    assert three.resolve_alias("iris", "prod") == found
    assert three.get_version("iris", 1).aliases == ["prod"]
    assert [v.aliases for v in three.list_versions("iris")] == [[], ["prod"], ["prod"]]
    for number in (1, 2):
        with pytest.raises(ConflictError, match="alias 'prod'"):
            three.delete_version("iris", number)
    with pytest.raises(ConflictError, match="shadow of alias 'prod'"):
        three.delete_version("iris", 3)
    three.set_alias("iris", "prod", 1)
    plain = three.get_alias("iris", "prod")
    assert (plain.version, plain.weights, plain.shadow) == (1, None, None)
    assert three.resolve_alias("iris", "prod") is None  # nothing to route
    three.delete_version("iris", 3)
    with pytest.raises(NotFoundError, match="has no shadow"):
        three.shadow_stats("iris", "prod")


def test_unknown_versions_name_their_field(three: SqlRegistry) -> None:
    with pytest.raises(RouteError) as caught:
        three.set_alias("iris", "prod", weights={1: 0.5, 8: 0.5}, shadow=9)
    assert [p.loc for p in caught.value.problems] == [("versions", "8"), ("shadow",)]
    with pytest.raises(NotFoundError):
        three.get_alias("iris", "prod")


def test_shadow_counts_add_up_and_restart_with_another_shadow(three: SqlRegistry) -> None:
    three.set_alias("iris", "prod", 1, shadow=2)
    epoch = three.get_alias("iris", "prod").shadow_epoch
    assert epoch is not None
    batch = ShadowCounts(requests=1, rows=4, compared=4, agreements=3, abs_difference=0.5)

    def add(_: int) -> bool:
        return three.add_shadow_counts("iris", "prod", epoch, batch)

    with ThreadPoolExecutor(8) as pool:  # concurrent writers, as several processes are
        assert all(pool.map(add, range(40)))
    stats = three.shadow_stats("iris", "prod")
    assert (stats.shadow, stats.requests, stats.rows, stats.agreements) == (2, 40, 160, 120)
    assert stats.abs_difference == pytest.approx(20.0)
    three.set_alias("iris", "prod", weights={1: 1.0}, shadow=2)  # the same shadow: kept
    assert three.shadow_stats("iris", "prod").requests == 40
    three.set_alias("iris", "prod", 1, shadow=3)  # another: from zero, old counts refused
    assert three.shadow_stats("iris", "prod").requests == 0
    assert not three.add_shadow_counts("iris", "prod", epoch, batch)
    assert three.shadow_stats("iris", "prod").requests == 0
    three.delete_model("iris")
    with pytest.raises(NotFoundError):
        three.shadow_stats("iris", "prod")
