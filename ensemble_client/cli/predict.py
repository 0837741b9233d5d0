"""``ensemble predict`` and ``ensemble metrics``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ensemble_client import Prediction
from ensemble_client.cli import render
from ensemble_client.cli.app import USAGE, State, cli, fail, json_option, split_ref
from ensemble_client.tables import check_writable_suffix, read_table, write_table

pass_state = click.make_pass_decorator(State, ensure=True)
MAX_ROWS_SHOWN = 1000


@cli.command()
@click.argument("model_ref", metavar="MODEL[@REF]")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the predictions here (.csv, .parquet, .jsonl, .json; - for CSV "
              "on stdout) instead of printing a table.")  # fmt: skip
@click.option("--proba", is_flag=True, help="Class probabilities (proba_<class> columns).")
@click.option("--votes", is_flag=True, help="Members' votes per class, and agreement.")
@click.option("--std", is_flag=True, help="Spread of the members' predictions (regression).")
@click.option("--voting", type=click.Choice(["hard", "soft"]), help="How members combine.")
@click.option("--explain", is_flag=True,
              help="Why: each row's largest contributions of the input columns.")  # fmt: skip
@click.option("--top", type=click.IntRange(min=1), default=None,
              help="With --explain: the server keeps K contributions per row and class, the "
              "rest as (other); K shown (default 3).")  # fmt: skip
@json_option
@pass_state
def predict(
    state: State,
    model_ref: str,
    file: Path,
    output: str | None,
    proba: bool,
    votes: bool,
    std: bool,
    voting: str | None,
    explain: bool,
    top: int | None,
) -> None:
    """Predict the rows of FILE (CSV, Parquet or JSON Lines) with MODEL (at REF: a
    version number, latest or an alias); one output row per input row, in order.

    \b
    ensemble predict iris-rf@production flowers.csv -o predictions.csv --proba
    ensemble predict iris-rf flowers.csv --explain --top 2
    """
    model, ref = split_ref(model_ref)
    if output not in (None, "-"):
        check_output(output)
    try:
        rows = read_table(file)
    except (ValueError, OSError) as exc:  # pandas' parser errors are ValueErrors
        raise click.BadParameter(f"cannot read {file}: {exc}", param_hint="FILE") from None
    client = state.client
    result = client.models.predict_result(
        model,
        rows,
        ref,
        proba=proba,
        votes=votes,
        std=std,
        voting=voting,
        explain=explain,
        top=top,
    )
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    frame = result.to_frame(rows.index)
    if output == "-":
        frame.to_csv(sys.stdout, index=False)
    elif output is not None:
        try:
            write_table(frame, output)
        except OSError as exc:
            fail(f"--output {output!r}: cannot write it ({exc.strerror or exc})", USAGE)
        click.echo(f"wrote {len(frame)} predictions of {model} v{result.version} to {output}",
                   err=True)  # fmt: skip
    if state.json:
        render.echo_json(result)
    elif output is None:
        shown = frame.head(MAX_ROWS_SHOWN)
        columns = ["row", *map(str, shown.columns)]
        cells = [[str(i), *row] for i, row in zip(shown.index, shown.itertuples(index=False),
                                                  strict=True)]  # fmt: skip
        out = render.console()
        out.print(render.table(f"{model} v{result.version}", columns, cells))
        if len(frame) > MAX_ROWS_SHOWN:
            out.print(f"... {len(frame) - MAX_ROWS_SHOWN} more rows: write them with -o FILE")
    if explain and result.explanations is not None and not state.json:
        render.console().print(explanation_table(result, list(rows.index), top or 3))


def explanation_table(result: Prediction, index: list[Any], top: int) -> Any:
    """Per row, the explained output of its predicted class (regression: its value): the
    base, the output, and the largest contributions with their signs."""
    explained = result.explanations
    assert explained is not None
    cells = []
    for i, label in enumerate(result.predictions[:MAX_ROWS_SHOWN]):
        largest = explained.largest(i, top)
        key = str(label) if str(label) in largest else next(iter(largest))
        base = explained.base_values
        output = explained.outputs[i]
        cells.append([
            str(index[i]),
            str(label),
            "" if key is None else key,
            base[key] if isinstance(base, dict) and key is not None else base,
            output[key] if isinstance(output, dict) and key is not None else output,
            ", ".join(f"{name} {value:+.4g}" for name, value in largest[key]),
        ])  # fmt: skip
    exact = "exact" if explained.exact else "estimate"
    title = f"why: {explained.method} ({exact}) in {explained.space} space"
    columns = ["row", "prediction", "explained", "base", "output", "largest contributions"]
    return render.table(title, columns, cells)


def check_output(output: str) -> None:
    """Before predicting: a format known by its suffix, in a folder that exists."""
    check_writable_suffix(output)  # InvalidArgumentError: exit 2 listing the suffixes
    folder = Path(output).parent
    if not folder.is_dir():
        fail(f"--output {output!r}: there is no folder {str(folder)!r}; create it or write "
             "elsewhere", USAGE)  # fmt: skip


@cli.command()
@click.argument("model_ref", metavar="MODEL[@REF]")
@json_option
@pass_state
def metrics(state: State, model_ref: str) -> None:
    """A version's quality: scores (OOB, hold-out, CV, train), each member's own score,
    and its curves (OOB score against members) as sparklines."""
    model, ref = split_ref(model_ref)
    version = state.client.versions.get(model, ref)
    if state.json:
        render.echo_json({"model": version.model, "version": version.version,
                          "metrics": version.metrics})  # fmt: skip
        return
    out = render.console()
    out.print(render.version_title(version))
    for part in (render.scores_table(version.metrics), render.members_table(version.metrics)):
        if part is not None:
            out.print(part)
    for curve in version.metrics.all_curves():
        out.print(render.curve_line(curve))
    for note in version.metrics.notes:
        out.print(f"note: {note}")
