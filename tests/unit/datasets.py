"""Small bundled datasets as the library's TrainingData (they load offline)."""

from __future__ import annotations

from functools import cache

import pandas as pd
from sklearn import datasets

from ensembles.data import TrainingData, select_training_data, table_from_frame

LOADERS = {
    "iris": datasets.load_iris,
    "wine": datasets.load_wine,
    "breast_cancer": datasets.load_breast_cancer,
    "diabetes": datasets.load_diabetes,
    "digits": datasets.load_digits,
}


@cache
def frame(name: str) -> pd.DataFrame:
    return LOADERS[name](as_frame=True).frame


def training_data(name: str) -> TrainingData:
    return select_training_data(table_from_frame(frame(name)), "target")
