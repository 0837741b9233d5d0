"""``ensemble export MODEL[@REF] --format F -o FILE``: a version in a portable format."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from ensemble_client.cli.app import State, cli, json_option, split_ref
from ensemble_client.exports import FORMATS, ExportFormat

pass_state = click.make_pass_decorator(State, ensure=True)


@cli.command("export")
@click.argument("model_ref", metavar="MODEL[@REF]")
@click.option(
    "--format", "-f", "fmt", type=click.Choice(FORMATS), required=True, help="File format."
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    required=True,
    help="Where to write the file (atomically; nothing is written if its sha256 differs).",
)
@json_option
@pass_state
def export(state: State, model_ref: str, fmt: ExportFormat, output: Path) -> None:
    """Download a version as joblib, skops or ONNX, checked against its sha256.

    \b
    ensemble export iris-rf@production --format onnx -o iris.onnx
    ensemble export iris-rf --format skops -o iris.skops
    """
    model, ref = split_ref(model_ref)
    data, info = state.client.models.export(model, ref, fmt, to=output)
    if state.json:
        click.echo(json.dumps({"file": str(output), "size": len(data), **asdict(info)}))
        return
    click.echo(f"wrote {output} ({len(data)} bytes, sha256 {info.sha256})")
    if info.untrusted_types is not None:
        listed = ", ".join(info.untrusted_types) or "(none)"
        click.echo(f"skops types to trust on load: {listed}")
    if info.fidelity is not None:
        f = info.fidelity
        agreement = "" if f.label_agreement is None else f", label agreement {f.label_agreement:g}"
        diff = "n/a" if f.max_abs_diff is None else f"{f.max_abs_diff:.3g}"
        click.echo(f"ONNX fidelity on {f.rows} {f.rows_from} rows: max |diff| {diff}{agreement}")
