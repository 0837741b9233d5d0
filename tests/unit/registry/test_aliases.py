"""Aliases: set, move, delete; 404s; 409 when deleting an aliased version."""

from __future__ import annotations

import pytest

from ensembles.errors import ConflictError, NotFoundError, SpecError
from ensembles.registry import SqlRegistry

from .support import publish


@pytest.fixture
def three(registry: SqlRegistry) -> SqlRegistry:
    for _ in range(3):
        publish(registry, "iris")
    return registry


def test_set_move_and_delete(three: SqlRegistry) -> None:
    assert three.set_alias("iris", "production", 1).aliases == {"production": 1}
    assert three.set_alias("iris", "staging", 3).aliases == {"production": 1, "staging": 3}
    assert three.set_alias("iris", "production", 2).aliases == {"production": 2, "staging": 3}
    assert three.get_version("iris", 2).aliases == ["production"]
    assert three.get_version("iris", 1).aliases == []
    three.delete_alias("iris", "production")
    assert three.get_model("iris").aliases == {"staging": 3}
    with pytest.raises(NotFoundError, match="no alias 'production'"):
        three.get_version("iris", "production")


def test_aliases_are_scoped_to_their_model(three: SqlRegistry) -> None:
    publish(three, "other")
    three.set_alias("iris", "production", 3)
    three.set_alias("other", "production", 1)
    assert three.get_version("iris", "production").version == 3
    assert three.get_version("other", "production").version == 1
    with pytest.raises(NotFoundError, match="model 'other' has no version 3"):
        three.set_alias("other", "production", 3)


def test_not_found_cases(three: SqlRegistry) -> None:
    with pytest.raises(NotFoundError, match="model 'nope' not found"):
        three.set_alias("nope", "production", 1)
    with pytest.raises(NotFoundError, match="no version 9"):
        three.set_alias("iris", "production", 9)
    with pytest.raises(NotFoundError, match="no alias 'production'"):
        three.delete_alias("iris", "production")
    with pytest.raises(NotFoundError, match="model 'nope' not found"):
        three.delete_alias("nope", "production")


@pytest.mark.parametrize("alias", ["latest", "1st", "a b"])
def test_reserved_or_malformed_aliases_are_refused(three: SqlRegistry, alias: str) -> None:
    with pytest.raises(SpecError):
        three.set_alias("iris", alias, 1)
    with pytest.raises(SpecError):
        three.delete_alias("iris", alias)


def test_deleting_an_aliased_version_is_a_conflict_naming_the_alias(three: SqlRegistry) -> None:
    three.set_alias("iris", "production", 2)
    three.set_alias("iris", "canary", 2)
    with pytest.raises(ConflictError, match="'canary', 'production'") as raised:
        three.delete_version("iris", 2)
    assert "move or delete the alias first" in raised.value.detail
    assert three.load_model("iris", 2) is not None
    three.set_alias("iris", "production", 3)
    three.delete_alias("iris", "canary")
    three.delete_version("iris", 2)
    assert [v.version for v in three.list_versions("iris")] == [3, 1]


@pytest.mark.parametrize("number", [10**15, 2**63, 10**400])
def test_numbers_beyond_the_registrys_integers_name_no_version(
    three: SqlRegistry, number: int
) -> None:
    """Callers that skip the request models' bounds get a 404, not a driver overflow."""
    with pytest.raises(NotFoundError, match="has no version"):
        three.set_alias("iris", "production", number)
    with pytest.raises(NotFoundError, match="has no version"):
        three.delete_version("iris", number)
    with pytest.raises(NotFoundError, match="has no version"):
        three.get_version("iris", number)
