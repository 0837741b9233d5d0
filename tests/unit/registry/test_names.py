from __future__ import annotations

import pytest

from ensembles.errors import SpecError
from ensembles.registry import validate_alias, validate_model_name


@pytest.mark.parametrize("name", ["iris", "Iris-clf_2.0", "0", "a" * 128])
def test_valid_model_names(name: str) -> None:
    assert validate_model_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "-x", ".hidden", "..", "a/b", "a\\b", "a b", "a" * 129, "iris\n", "é", None]
)
def test_invalid_model_names_are_refused_at_the_model_field(name: object) -> None:
    with pytest.raises(SpecError) as raised:
        validate_model_name(name)
    assert raised.value.problems[0].loc == ("model",)


@pytest.mark.parametrize("alias", ["production", "p", "Stage_2-b", "a" * 64])
def test_valid_aliases(alias: str) -> None:
    assert validate_alias(alias) == alias


@pytest.mark.parametrize("alias", ["", "2nd", "_x", "a.b", "a" * 65, "prod\n", "latest"])
def test_invalid_aliases_are_refused_at_the_alias_field(alias: str) -> None:
    with pytest.raises(SpecError) as raised:
        validate_alias(alias)
    assert raised.value.problems[0].loc == ("alias",)


def test_latest_is_reserved_with_a_reason() -> None:
    with pytest.raises(SpecError, match="reserved"):
        validate_alias("latest")
