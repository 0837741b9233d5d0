"""``ensemble alias set`` (one version, or several by weight, and a shadow) and
``ensemble alias shadow`` (how the shadow compares): commands of the ``alias`` group."""

from __future__ import annotations

import click

from ensemble_client.cli import render
from ensemble_client.cli.app import State, json_option
from ensemble_client.cli.resources import alias
from ensemble_client.models import Alias, ShadowStats

pass_state = click.make_pass_decorator(State, ensure=True)


def parse_targets(values: tuple[str, ...]) -> tuple[int | None, dict[int, float] | None]:
    """``3`` as (3, None); ``3=0.9 4=0.1`` as (None, {3: 0.9, 4: 0.1}); BadParameter else."""
    if len(values) == 1 and "=" not in values[0]:
        return _number(values[0]), None
    weights: dict[int, float] = {}
    for value in values:
        number, equals, weight = value.partition("=")
        if not equals:
            raise click.BadParameter(f"{value!r}: give VERSION=WEIGHT for each version")
        try:
            weights[_number(number)] = float(weight)
        except ValueError:
            raise click.BadParameter(f"{value!r}: the weight is not a number") from None
    return None, weights


def _number(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise click.BadParameter(f"{text!r} is not a version number")
    return int(text)


def _alias_line(result: Alias) -> str:
    if result.versions:
        split = ", ".join(f"v{v} {w:.4g}" for v, w in result.versions.items())
        line = f"{result.model}@{result.alias} → {split}"
    else:
        line = f"{result.model}@{result.alias} → v{result.version}"
    return line + (f" (shadow v{result.shadow})" if result.shadow is not None else "")


@alias.command("set")
@click.argument("model")
@click.argument("name", metavar="ALIAS")
@click.argument("targets", metavar="VERSION | VERSION=WEIGHT...", nargs=-1, required=True)
@click.option("--shadow", type=click.IntRange(min=1), help="A version that also gets the rows.")
@json_option
@pass_state
def alias_set(
    state: State, model: str, name: str, targets: tuple[str, ...], shadow: int | None
) -> None:
    """Point ALIAS of MODEL at one VERSION, or split it by weight (3=0.9 4=0.1).

    \b
    ensemble alias set iris-rf production 3
    ensemble alias set iris-rf production 3=0.9 4=0.1 --shadow 5
    """
    version, weights = parse_targets(targets)
    result = state.client.models.set_alias(model, name, version, versions=weights, shadow=shadow)
    if state.json:  # as the server put it: no weights or shadow where there are none
        render.echo_json(result.model_dump(mode="json", exclude_none=True))
    else:
        render.console().print(_alias_line(result))


@alias.command("shadow")
@click.argument("model")
@click.argument("name", metavar="ALIAS")
@json_option
@pass_state
def alias_shadow(state: State, model: str, name: str) -> None:
    """How the shadow of ALIAS compares with its answers, since it was set."""
    stats = state.client.models.shadow_stats(model, name)
    if state.json:
        render.echo_json(stats)
        return
    render.console().print(_stats_table(stats))


def _stats_table(stats: ShadowStats) -> object:
    if "mean_abs_difference" in stats.model_fields_set:  # the alias is a regression
        measure = ("mean abs difference", stats.mean_abs_difference)
    else:
        measure = ("label agreement", stats.label_agreement)
    rows = [
        ("shadow", f"v{stats.shadow}"),
        ("since", render.when(stats.since)),
        ("requests", stats.requests),
        ("rows", stats.rows),
        (measure[0], "-" if measure[1] is None else render.number(measure[1])),
        ("errors", stats.errors),
        ("dropped", stats.dropped),
    ]
    return render.table(f"{stats.model}@{stats.alias} shadow", ("", "value"), rows)
