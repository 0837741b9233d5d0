"""``ensemble train``: submit a training job from flags or a JSON spec, and follow it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ensemble_client.cli import render
from ensemble_client.cli.app import PROBLEM, State, cli, echo_problem, json_option, model_name
from ensemble_client.cli.waiting import follow
from ensemble_client.errors import job_error
from ensemble_client.models import Job

pass_state = click.make_pass_decorator(State, ensure=True)


def parse_pairs(values: tuple[str, ...], option: str, as_json: bool) -> dict[str, Any]:
    """``k=v`` pairs; with ``as_json`` each value parsed as JSON when it parses (200,
    0.5, true, null, "[1, 2]"), else kept as a string (gini, sqrt)."""
    out: dict[str, Any] = {}
    for item in values:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=option)
        if as_json:
            try:
                out[key] = json.loads(value)
            except json.JSONDecodeError:
                out[key] = value
        else:
            out[key] = value
    return out


def read_spec(path: Path) -> dict[str, Any]:
    """A JSON file: an ensemble spec (``{"kind": ...}``) or a whole training request
    (``{"ensemble": {...}, "target": ..., ...}``), as a training request."""
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--spec") from None
    if not isinstance(document, dict):
        raise click.BadParameter(f"{path}: not a JSON object", param_hint="--spec")
    return document if "ensemble" in document else {"ensemble": document}


def training_request(
    spec_file: Path | None, kind: str | None, params: dict[str, Any]
) -> dict[str, Any]:
    if (spec_file is None) == (kind is None):
        raise click.UsageError("give either --kind (with --param KEY=VALUE ...) or --spec FILE")
    if spec_file is not None:
        request = read_spec(spec_file)
        ensemble = dict(request["ensemble"])
    else:
        request, ensemble = {}, {"kind": kind}
    if params:
        ensemble["params"] = {**dict(ensemble.get("params") or {}), **params}
    request["ensemble"] = ensemble
    return request


@cli.command()
@click.argument("model", callback=model_name)
@click.option("--dataset", "-d", help="Dataset id, or a name (its newest dataset).")
@click.option("--target", "-t", help="The column to predict.")
@click.option("--kind", "-k", help="Ensemble kind, e.g. random_forest (see `ensemble kinds`).")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="A parameter of the kind; values are JSON when they parse.")  # fmt: skip
@click.option("--spec", "spec_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A JSON file: the ensemble spec, or a whole training request.")  # fmt: skip
@click.option("--feature", "features", multiple=True, help="A feature column (repeat; "
              "default: every column but the target).")  # fmt: skip
@click.option("--task", type=click.Choice(["classification", "regression"]))
@click.option("--holdout", type=click.FloatRange(0, 1, max_open=True),
              help="Share of rows held out for scoring [server default: 0.2].")  # fmt: skip
@click.option("--cv", "cv_folds", type=click.IntRange(min=0), help="Cross-validation folds.")
@click.option("--random-state", type=click.IntRange(min=0), help="Seed of every random choice.")
@click.option("--description", help="Free text stored with the version.")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="A label (repeat).")
@click.option("--wait", "-w", is_flag=True, help="Follow the job with a progress bar until "
              "it ends; Ctrl-C asks whether to cancel it.")  # fmt: skip
@json_option
@pass_state
def train(
    state: State,
    model: str,
    dataset: str | None,
    target: str | None,
    kind: str | None,
    params: tuple[str, ...],
    spec_file: Path | None,
    features: tuple[str, ...],
    task: str | None,
    holdout: float | None,
    cv_folds: int | None,
    random_state: int | None,
    description: str | None,
    tags: tuple[str, ...],
    wait: bool,
) -> None:
    """Train a new version of MODEL.

    \b
    ensemble train iris-rf --dataset iris --target species \\
        --kind random_forest --param n_estimators=200 --wait
    ensemble train iris-stack --dataset iris --target species --spec stack.json
    """
    request = training_request(spec_file, kind, parse_pairs(params, "--param", as_json=True))
    dataset = dataset or request.pop("dataset_id", None)
    target = target or request.pop("target", None)
    if not dataset or not target:
        raise click.UsageError("give --dataset and --target (or put them in the --spec file)")
    request.pop("dataset_id", None)
    request.pop("target", None)
    evaluation = dict(request.get("evaluation") or {})
    if holdout is not None:
        evaluation["holdout_fraction"] = holdout
    if cv_folds is not None:
        evaluation["cv_folds"] = cv_folds
    given = {
        "features": list(features) or None,
        "task": task,
        "evaluation": evaluation or None,
        "random_state": random_state,
        "description": description,
        "tags": parse_pairs(tags, "--tag", as_json=False) or None,
    }
    request.update({k: v for k, v in given.items() if v is not None})
    ensemble = request.pop("ensemble")
    job = state.client.models.train(
        model, dataset=dataset, target=target, ensemble=ensemble, wait=False, **request
    )
    if not wait:
        _submitted(state, job)
        return
    ended = follow(state, job)
    if ended.status != "succeeded":
        error = job_error(ended)
        echo_problem(error.detail, error.errors)
        if state.json:
            render.echo_json(ended)
        raise click.exceptions.Exit(PROBLEM)
    version = state.client.versions.get(ended.model, ended.version)
    if state.json:
        render.echo_json(version)
        return
    out = render.console()
    out.print(render.version_title(version))
    scores = render.scores_table(version.metrics)
    if scores is not None:
        out.print(scores)


def _submitted(state: State, job: Job) -> None:
    if state.json:
        render.echo_json(job)
        return
    out = render.console()
    out.print(render.jobs_table([job]))
    out.print(f"follow it: ensemble jobs wait {job.id}")
