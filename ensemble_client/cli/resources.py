"""Commands over the service's resources: datasets, jobs, models, versions, aliases,
kinds and health."""

from __future__ import annotations

from pathlib import Path

import click

from ensemble_client.cli import render
from ensemble_client.cli.app import PROBLEM, State, cli, json_option, model_name, split_ref
from ensemble_client.cli.waiting import follow

pass_state = click.make_pass_decorator(State, ensure=True)


def _show(state: State, value: object, *tables: object) -> None:
    if state.json:
        render.echo_json(value)
        return
    out = render.console()
    for item in tables:
        out.print(item)


# --- datasets --------------------------------------------------------------------------


@cli.group()
def datasets() -> None:
    """Upload, list, show and delete tables."""


@datasets.command("upload")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", "-n", help="A name for the table [default: the file's stem].")
@json_option
@pass_state
def datasets_upload(state: State, file: Path, name: str | None) -> None:
    """Upload a CSV, Parquet or JSON Lines FILE."""
    dataset = state.client.datasets.upload(file, name=name)
    _show(state, dataset, *render.dataset_tables(dataset))


@datasets.command("list")
@json_option
@pass_state
def datasets_list(state: State) -> None:
    """Every dataset, newest first."""
    found = state.client.datasets.list()
    _show(state, found, render.datasets_table(found))


@datasets.command("show")
@click.argument("dataset")
@json_option
@pass_state
def datasets_show(state: State, dataset: str) -> None:
    """A dataset by id, or the newest of that name, with its columns."""
    found = state.client.datasets.resolve(dataset)
    _show(state, found, *render.dataset_tables(found))


@datasets.command("delete")
@click.argument("dataset")
@json_option
@pass_state
def datasets_delete(state: State, dataset: str) -> None:
    """Delete a dataset by id (or the newest of that name)."""
    found = state.client.datasets.resolve(dataset)
    state.client.datasets.delete(found.id)
    _show(state, {"deleted": found.id}, f"deleted dataset {found.id} ({found.name or 'unnamed'})")


# --- jobs ------------------------------------------------------------------------------


@cli.group()
def jobs() -> None:
    """Follow and cancel training jobs."""


@jobs.command("list")
@click.option("--status", type=click.Choice(["queued", "running", "succeeded", "failed",
                                             "cancelled"]))  # fmt: skip
@click.option("--model", help="Only this model's jobs.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@json_option
@pass_state
def jobs_list(state: State, status: str | None, model: str | None, limit: int) -> None:
    """Jobs, newest first."""
    found = state.client.jobs.list(status=status, model=model, limit=limit)
    _show(state, found, render.jobs_table(found))


@jobs.command("show")
@click.argument("job_id")
@json_option
@pass_state
def jobs_show(state: State, job_id: str) -> None:
    """A job's status, progress and error."""
    job = state.client.jobs.get(job_id)
    _show(state, job, render.jobs_table([job]))


@jobs.command("cancel")
@click.argument("job_id")
@json_option
@pass_state
def jobs_cancel(state: State, job_id: str) -> None:
    """Ask a queued or running job to stop."""
    job = state.client.jobs.cancel(job_id)
    _show(state, job, render.jobs_table([job]))


@jobs.command("wait")
@click.argument("job_id")
@json_option
@pass_state
def jobs_wait(state: State, job_id: str) -> None:
    """Follow a job with a progress bar until it ends (Ctrl-C asks to cancel it); exit
    status 1 unless it succeeded."""
    job = follow(state, state.client.jobs.get(job_id))
    _show(state, job, render.jobs_table([job]))
    if job.status != "succeeded":
        raise click.exceptions.Exit(PROBLEM)


# --- models, versions, aliases -----------------------------------------------------------


@cli.group()
def models() -> None:
    """List, show and delete models."""


@models.command("list")
@json_option
@pass_state
def models_list(state: State) -> None:
    """Every model with its latest version and aliases."""
    found = state.client.models.list()
    _show(state, found, render.models_table(found))


@models.command("show")
@click.argument("model", callback=model_name)
@json_option
@pass_state
def models_show(state: State, model: str) -> None:
    """A model and its versions."""
    found = state.client.models.get(model)
    if state.json:
        render.echo_json(found)
        return
    _show(state, found, render.models_table([found]),
          render.versions_table(state.client.versions.list(model)))  # fmt: skip


@models.command("delete")
@click.argument("model", callback=model_name)
@json_option
@pass_state
def models_delete(state: State, model: str) -> None:
    """Delete a model with every version and alias."""
    state.client.models.delete(model)
    _show(state, {"deleted": model}, f"deleted model {model}")


@cli.group()
def versions() -> None:
    """List, show and delete a model's versions."""


@versions.command("list")
@click.argument("model", callback=model_name)
@json_option
@pass_state
def versions_list(state: State, model: str) -> None:
    """A model's versions, newest first."""
    found = state.client.versions.list(model)
    _show(state, found, render.versions_table(found))


@versions.command("show")
@click.argument("model_ref", metavar="MODEL[@REF]")
@json_option
@pass_state
def versions_show(state: State, model_ref: str) -> None:
    """A version (number, latest or alias): spec, data, metrics and artifact."""
    model, ref = split_ref(model_ref)
    found = state.client.versions.get(model, ref)
    if state.json:
        render.echo_json(found)
        return
    out = render.console()
    out.print(render.version_title(found))
    out.print(render.versions_table([found]))
    scores = render.scores_table(found.metrics)
    if scores is not None:
        out.print(scores)
    out.print(f"artifact: {found.artifact.format}, {found.artifact.size_bytes} bytes, "
              f"sha256 {found.artifact.sha256}")  # fmt: skip


@versions.command("delete")
@click.argument("model_version", metavar="MODEL@VERSION")
@json_option
@pass_state
def versions_delete(state: State, model_version: str) -> None:
    """Delete one version (move or delete its aliases first)."""
    model, ref = split_ref(model_version)
    if not ref.isdigit():
        raise click.BadParameter("give the version number: MODEL@3", param_hint="MODEL@VERSION")
    state.client.versions.delete(model, int(ref))
    _show(state, {"deleted": {"model": model, "version": int(ref)}},
          f"deleted {model} v{ref}")  # fmt: skip


@cli.group()
def alias() -> None:
    """Point a model's aliases at its versions."""


# `alias set` and `alias shadow` (weights, shadows): ensemble_client/cli/rollout.py.


@alias.command("remove")
@click.argument("model")
@click.argument("name", metavar="ALIAS")
@json_option
@pass_state
def alias_remove(state: State, model: str, name: str) -> None:
    """Remove ALIAS of MODEL (the version stays)."""
    state.client.models.remove_alias(model, name)
    _show(state, {"removed": {"model": model, "alias": name}}, f"removed {model}@{name}")


# --- the service -----------------------------------------------------------------------


@cli.command()
@json_option
@pass_state
def kinds(state: State) -> None:
    """Every ensemble and base-learner kind a spec may name."""
    catalog = state.client.kinds()
    rows = [
        (k.kind, k.family, ", ".join(k.tasks), k.description)
        for k in [*catalog.ensemble_kinds, *catalog.base_kinds]
    ]
    _show(state, catalog, render.table(None, ["kind", "family", "tasks", "description"], rows))


@cli.command()
@json_option
@pass_state
def health(state: State) -> None:
    """Whether the service is ready (exit status 1 naming the failing check if not)."""
    ready = state.client.ready()
    rows = [(name, result) for name, result in ready.checks.items()]
    _show(state, ready, f"{state.client.url}: {ready.status}",
          render.table(None, ["check", "result"], rows))  # fmt: skip
