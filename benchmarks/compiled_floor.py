"""The in-process floor: scikit-learn against the compiled engine, per model and request size.

For each reference model (trained by the library, as the service trains it) prints the
median latency of scikit-learn's ``predict_proba`` / ``predict`` on the stored Pipeline
(a DataFrame in, as the service calls it) and of the compiled path (the same frame,
preprocessed, then treelite's GTIL), for one row and for 10,000 rows, their ratio, the
compile and fidelity-check times, and the crossover: the request size from which
scikit-learn is the faster engine (swept here; ``compile_model`` also calibrates it on
the model itself).  If skl2onnx and onnxruntime are importable (``pip install skl2onnx
onnxruntime``: not project dependencies), ONNX Runtime is measured as the other candidate
engine, with its largest difference from scikit-learn.

``--composites`` measures voting, stacking and bagging ensembles instead, whose tree
members are compiled (:mod:`ensembles.inference.composite`); ``--libraries`` a 100-round
XGBoost and LightGBM classifier fitted directly on breast_cancer, the "sklearn" columns
then being the library's own ``predict_proba`` on the same (unprocessed) rows;
``--batch`` sets the large request size.

    .venv/bin/python benchmarks/compiled_floor.py [--repeats 200] [--batch-repeats 20]
        [--batch 10000] [--composites | --libraries] [--json results.json]

Single-process, no network; a few minutes at most on 2 cores.  Medians, with the
interquartile range beside them.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn import datasets
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from ensembles import (
    EvaluationSpec,
    parse_estimator_spec,
    resolve_ensemble,
    select_training_data,
    table_from_frame,
    train,
)
from ensembles.inference import Engine, Servable, compile_model, prepare

SEED = 42
BATCH = 10_000
SWEEP = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
MODELS: list[tuple[str, str, dict[str, Any]]] = [  # (label, dataset, ensemble spec)
    ("random_forest", "breast_cancer", {"kind": "random_forest", "params": {"n_estimators": 100}}),
    ("extra_trees", "breast_cancer", {"kind": "extra_trees", "params": {"n_estimators": 100}}),
    (
        "gradient_boosting",
        "breast_cancer",
        {"kind": "gradient_boosting", "params": {"n_estimators": 100}},
    ),
    (
        "hist_gradient_boosting",
        "breast_cancer",
        {"kind": "hist_gradient_boosting", "params": {"max_iter": 100}},
    ),
    ("random_forest", "diabetes", {"kind": "random_forest", "params": {"n_estimators": 100}}),
]
_MEMBERS = [
    {"name": "lr", "kind": "logistic_regression"},
    {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 50}},
    {"name": "nb", "kind": "gaussian_nb"},
]
COMPOSITES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "soft voting lr+rf50+nb",
        "breast_cancer",
        {"kind": "voting", "params": {"voting": "soft"}, "estimators": _MEMBERS},
    ),
    ("stacking lr+rf50+nb -> lr", "breast_cancer", {"kind": "stacking", "estimators": _MEMBERS}),
    ("bagging of 50 trees", "breast_cancer", {"kind": "bagging", "params": {"n_estimators": 50}}),
]
LOADERS = {"breast_cancer": datasets.load_breast_cancer, "diabetes": datasets.load_diabetes}


def timings(call: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """(median, interquartile range) in microseconds."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    q1, median, q3 = np.percentile(np.asarray(out) * 1e6, [25, 50, 75])
    return float(median), float(q3 - q1)


def sklearn_call(pipeline: Pipeline, classifier: bool, X: pd.DataFrame) -> Callable[[], Any]:
    return (lambda: pipeline.predict_proba(X)) if classifier else (lambda: pipeline.predict(X))


def compiled_call(served: Servable, engine: Engine, X: pd.DataFrame) -> Callable[[], Any]:
    """The compiled engine's answer with the service's own preprocessing."""
    classifier = served.signature.task == "classification"
    return lambda: engine.answer(served.transform(X), with_proba=classifier)


def crossover(served: Servable, engine: Engine, X: pd.DataFrame) -> int | None:
    """The smallest swept size at which scikit-learn is at least as fast (None: never)."""
    pipeline = served.pipeline
    classifier = served.signature.task == "classification"
    for size in SWEEP:
        rows = X.iloc[np.arange(size) % len(X)]
        repeats = 15 if size <= 256 else 5
        ours, _ = timings(compiled_call(served, engine, rows), repeats)
        theirs, _ = timings(sklearn_call(pipeline, classifier, rows), repeats)
        if theirs <= ours:
            return size
    return None


def onnx_candidate(pipeline: Pipeline, classifier: bool, X: pd.DataFrame) -> dict[str, Any]:
    """ONNX Runtime through skl2onnx, when installed: speed and exactness.

    Rows are cast to float32 first, as scikit-learn's trees see them; the model is
    converted for float64 input where skl2onnx and ONNX Runtime accept it, else float32.
    """
    try:
        import onnxruntime as ort  # type: ignore[import-not-found, unused-ignore]
        from skl2onnx import to_onnx  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return {"skipped": "skl2onnx / onnxruntime not installed"}
    estimator = pipeline[-1]
    Xt = np.asarray(pipeline[:-1].transform(X), dtype=np.float64)
    X32 = Xt.astype(np.float32)
    errors = []
    for dtype in (np.float64, np.float32):
        rows = X32.astype(dtype)
        started = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                options = {id(estimator): {"zipmap": False}} if classifier else None
                onx = to_onnx(estimator, rows[:1], options=options)
                session_options = ort.SessionOptions()
                session_options.intra_op_num_threads = 1
                session = ort.InferenceSession(
                    onx.SerializeToString(), session_options, providers=["CPUExecutionProvider"]
                )
                name = session.get_inputs()[0].name
                outputs = session.run(None, {name: rows})
        except Exception as exc:  # any converter or runtime refusal is the finding
            errors.append(f"{dtype.__name__}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            continue
        compile_s = time.perf_counter() - started
        got = np.asarray(outputs[1] if classifier else outputs[0], dtype=np.float64)
        want = estimator.predict_proba(Xt) if classifier else estimator.predict(Xt)
        got = got.reshape(np.shape(want))
        one = rows[:1]
        return {
            "input": dtype.__name__,
            "compile_ms": compile_s * 1e3,
            "max_abs_diff": float(np.abs(got - want).max()),
            "one_row_us": timings(partial(session.run, None, {name: one}), 200)[0],
            "batch_us": timings(partial(session.run, None, {name: rows}), 10)[0],
        }
    return {"error": "; ".join(e[:100] for e in errors)}


def measure(label: str, dataset: str, raw: dict[str, Any], args: argparse.Namespace) -> Any:
    frame = LOADERS[dataset](as_frame=True).frame
    data = select_training_data(table_from_frame(frame), "target")
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    evaluation = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
    model = train(data, spec, evaluation, SEED)
    pipeline, classifier = model.pipeline, data.task == "classification"
    engine, report = compile_model(pipeline, data.task, data.X, SEED)
    result: dict[str, Any] = {"model": f"{label} ({dataset})", "fidelity": report.as_dict()}
    if engine is None:
        return result
    served = prepare(pipeline, model.signature, None)  # for its preprocessing only
    rng = np.random.default_rng(SEED)
    batch = data.X.iloc[rng.integers(0, len(data.X), args.batch)].reset_index(drop=True)
    singles = [data.X.iloc[[i]] for i in rng.integers(0, len(data.X), 16)]
    cycle = iter(np.resize(np.arange(len(singles)), args.repeats * 2).tolist())

    def one(call: Callable[[pd.DataFrame], Callable[[], Any]]) -> Callable[[], Any]:
        """The call on a different single row each time (as requests come)."""
        calls = [call(x) for x in singles]

        def run() -> Any:
            return calls[next(cycle)]()

        return run

    result["one_row"] = {
        "sklearn_us": timings(one(lambda x: sklearn_call(pipeline, classifier, x)), args.repeats),
        "compiled_us": timings(one(lambda x: compiled_call(served, engine, x)), args.repeats),
    }
    n = args.batch_repeats
    result["batch"] = {
        "sklearn_us": timings(sklearn_call(pipeline, classifier, batch), n),
        "compiled_us": timings(compiled_call(served, engine, batch), n),
    }
    Xt1 = served.transform(singles[0])
    result["engine_only_one_row_us"] = timings(lambda: engine.predict(Xt1), args.repeats)[0]
    result["crossover_swept"] = crossover(served, engine, batch)
    result["onnxruntime"] = onnx_candidate(pipeline, classifier, batch)
    return result


LIBRARIES = (("xgboost", "XGBClassifier"), ("lightgbm", "LGBMClassifier"))


def measure_library(module: str, name: str, args: argparse.Namespace) -> Any:
    """A 100-round library classifier: its own predict_proba against the compiled engine."""
    import importlib

    frame = LOADERS["breast_cancer"](as_frame=True).frame
    X, y = frame.drop(columns="target"), frame["target"].to_numpy()
    quiet = {"verbose": -1} if module == "lightgbm" else {}
    estimator = getattr(importlib.import_module(module), name)(
        n_estimators=100, random_state=SEED, **quiet
    )
    pipeline = Pipeline([("columns", FunctionTransformer()), ("model", estimator)]).fit(X, y)
    engine, report = compile_model(pipeline, "classification", X, SEED)
    label = f"{module} 100 (breast_cancer)"
    result: dict[str, Any] = {"model": label, "fidelity": report.as_dict()}
    if engine is None:
        return result
    rng = np.random.default_rng(SEED)
    Xn = X.to_numpy()
    batch = Xn[rng.integers(0, len(Xn), args.batch)]
    singles = [Xn[[i]] for i in rng.integers(0, len(Xn), 16)]

    def cycling(call: Callable[[NDArray[Any]], Any]) -> Callable[[], Any]:
        rows = iter(np.resize(np.arange(len(singles)), args.repeats * 2).tolist())
        return lambda: call(singles[next(rows)])

    def ours(rows: NDArray[Any]) -> Any:
        return engine.answer(rows, with_proba=True)

    result["one_row"] = {
        "sklearn_us": timings(cycling(estimator.predict_proba), args.repeats),
        "compiled_us": timings(cycling(ours), args.repeats),
    }
    result["batch"] = {
        "sklearn_us": timings(partial(estimator.predict_proba, batch), args.batch_repeats),
        "compiled_us": timings(partial(ours, batch), args.batch_repeats),
    }
    result["engine_only_one_row_us"] = timings(partial(engine.predict, singles[0]), args.repeats)[0]
    result["crossover_swept"] = next(
        (
            size
            for size in SWEEP
            if timings(partial(estimator.predict_proba, batch[:size]), 15)[0]
            <= timings(partial(ours, batch[:size]), 15)[0]
        ),
        None,
    )
    result["onnxruntime"] = {"skipped": "not measured for the boosting libraries"}
    return result


def show(results: list[dict[str, Any]], batch: int) -> None:
    head = (
        f"{'model':40} {'rows':>6} {'sklearn p50':>12} {'compiled p50':>13} {'ratio':>7}"
        f"  {'(IQR sk / compiled, us)':>24}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        f = r["fidelity"]
        if "one_row" not in r:
            print(f"{r['model']:40} refused: {f['reason']}")
            continue
        for label, key in (("1", "one_row"), (f"{batch:,}", "batch")):
            (sk, sk_iqr), (co, co_iqr) = r[key]["sklearn_us"], r[key]["compiled_us"]
            print(
                f"{r['model']:40} {label:>6} {sk:>10.0f}us {co:>11.0f}us {sk / co:>6.1f}x"
                f"  {sk_iqr:>11.0f} / {co_iqr:.0f}"
            )
    print()
    print(
        f"{'model':40} {'compile':>8} {'check':>8} {'max |diff|':>11} {'rows chk':>9}"
        f" {'engine 1 row':>13} {'crossover':>18}"
    )
    for r in results:
        f = r["fidelity"]
        if "one_row" not in r:
            continue
        swept = r["crossover_swept"]
        cross = f"{f['crossover_rows']} cal / {swept if swept is not None else '>4096'} swept"
        print(
            f"{r['model']:40} {f['compile_seconds'] * 1e3:>6.1f}ms"
            f" {f['check_seconds'] * 1e3:>6.0f}ms {f['max_abs_diff']:>11.2g}"
            f" {f['n_rows_checked']:>9} {r['engine_only_one_row_us']:>11.0f}us {cross:>18}"
        )
    print()
    print("ONNX Runtime (skl2onnx), the other candidate:")
    for r in results:
        o = r.get("onnxruntime", {})
        if "max_abs_diff" in o:
            verdict = "within 1e-9" if o["max_abs_diff"] <= 1e-9 else "REFUSED by the 1e-9 rule"
            print(
                f"  {r['model']:40} {o['input']} in: 1 row {o['one_row_us']:.0f}us,"
                f" {batch:,} rows {o['batch_us'] / 1e3:.1f}ms, compile {o['compile_ms']:.0f}ms,"
                f" max |diff| {o['max_abs_diff']:.2g}: {verdict}"
            )
        else:
            print(f"  {r['model']:40} {o.get('error') or o.get('skipped')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200, help="single-row repeats")
    parser.add_argument("--batch-repeats", type=int, default=20, help="10,000-row repeats")
    parser.add_argument("--batch", type=int, default=BATCH, help="rows of the large request")
    parser.add_argument("--composites", action="store_true", help="voting, stacking, bagging")
    parser.add_argument("--libraries", action="store_true", help="XGBoost and LightGBM, 100")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    started = time.perf_counter()
    models = COMPOSITES if args.composites else MODELS
    if args.libraries:
        with warnings.catch_warnings():  # feature names: fitted on a frame, asked with arrays
            warnings.simplefilter("ignore", UserWarning)
            results = [measure_library(module, name, args) for module, name in LIBRARIES]
    else:
        results = [measure(label, dataset, raw, args) for label, dataset, raw in models]
    show(results, args.batch)
    print(f"\n({time.perf_counter() - started:.0f} s; medians; ratio = sklearn / compiled)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
