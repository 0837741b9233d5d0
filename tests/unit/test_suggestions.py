"""Did you mean …? in the messages naming an unknown column, kind or parameter (issue 20)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ensembles.builders import FeatureColumn
from ensembles.data import read_table, select_training_data, table_from_rows
from ensembles.errors import DataError, PredictionInputError, SpecError
from ensembles.inference import check_rows, check_table
from ensembles.signature import ModelSignature
from ensembles.specs import parse_estimator_spec
from ensembles.suggestions import closest, did_you_mean, hint
from ensembles.validation import resolve_ensemble


def test_same_name_in_another_case_comes_before_close_spellings() -> None:
    assert closest("Species", ["species", "specie", "x"]) == ["species"]
    assert closest("random_forrest", ["random_forest", "extra_trees"]) == ["random_forest"]
    assert closest("zzz", ["species"]) == []
    assert did_you_mean("zzz", ["species"]) == ""
    assert hint("columns", "a", []) == " (there are no columns)"
    many = hint("columns", "c0", [f"c{i}" for i in range(1, 30)])
    assert "and 9 more)" in many and "'c20'" in many and "'c21'" not in many


def test_a_missing_target_or_feature_lists_the_columns_and_the_likely_one() -> None:
    table = table_from_rows(["Petal", "species"], [[1.0, "a"], [2.0, "b"]])
    with pytest.raises(DataError) as caught:
        select_training_data(table, "Species", ["petal"])
    target, feature = (p.msg for p in caught.value.problems)
    assert target == (
        "no column 'Species' in the table; did you mean 'species'? "
        "(the columns are 'Petal', 'species')"
    )
    assert "did you mean 'Petal'?" in feature


def test_unknown_kind_and_parameter_suggest_the_known_one() -> None:
    raw = {"kind": "voting", "estimators": [{"name": "t", "kind": "decison_tree"}]}
    with pytest.raises(SpecError) as caught:
        resolve_ensemble(parse_estimator_spec(raw), "classification")
    assert "did you mean 'decision_tree'?" in caught.value.problems[0].msg
    raw = {"kind": "random_forest", "params": {"n_estimator": 5}}
    with pytest.raises(SpecError) as caught:
        resolve_ensemble(parse_estimator_spec(raw), "classification")
    assert "did you mean 'n_estimators'?" in caught.value.problems[0].msg


SIGNATURE = ModelSignature(
    "classification",
    "random_forest",
    (FeatureColumn("sepal_length", "float64", False),),
    ("a", "b"),
    "soft",
)


def test_a_prediction_row_without_a_column_names_the_sent_one_it_resembles() -> None:
    signature = SIGNATURE
    with pytest.raises(PredictionInputError) as caught:
        check_rows(signature, [{"Sepal_Length": 1.0}])
    assert [p.msg for p in caught.value.problems] == [
        "missing column 'sepal_length'; did you mean 'Sepal_Length'?"
    ]
    columnar = {"columns": ["sepal_lenght"], "data": [[1.0]]}
    with pytest.raises(PredictionInputError) as caught:
        check_rows(signature, columnar)
    assert caught.value.problems[0].msg.endswith("did you mean 'sepal_lenght'?")
    with pytest.raises(PredictionInputError) as caught:
        check_table(signature, pa.table({"SEPAL_LENGTH": [1.0, 2.0]}))
    assert {p.msg for p in caught.value.problems} == {
        "missing column 'sepal_length'; did you mean 'SEPAL_LENGTH'?"
    }


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"\x00" * 64, "binary data (a NUL byte at byte 0)"),
        (b"a,b\n1,\x00\n", "binary data (a NUL byte at byte 6)"),
        (b"PK\x03\x04\x14\x00\x00\x00\xff", "a zip archive"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "a PNG image"),
        (b"a,b\n\xff\xfe,1\n", "byte 4 (line 2 of the file) is not valid UTF-8"),
    ],
)
def test_a_binary_file_is_not_a_csv_table(content: bytes, says: str) -> None:
    with pytest.raises(DataError) as caught:
        read_table(content, filename="t.csv")
    (problem,) = caught.value.problems
    assert problem.msg.startswith("not a CSV table: ") and says in problem.msg
    with pytest.raises(DataError) as caught:
        read_table(content, filename="t.jsonl")
    assert caught.value.problems[0].msg.startswith("not a JSON Lines table: ")
