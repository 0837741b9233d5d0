"""The ``ensemble`` command: its root group, shared options, and exit statuses.

Exit status 0 on success, 1 when the server answered a problem (its ``detail`` printed),
2 for a usage error (click's own), 3 when the server cannot be reached (one line, no
trace), 130 when interrupted (Ctrl-C).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from ensemble_client.client import Client
from ensemble_client.errors import (
    ApiError,
    ArtifactIntegrityError,
    MissingDependencyError,
    ServerUnreachableError,
    WaitTimeoutError,
)

OK, PROBLEM, USAGE, UNREACHABLE, INTERRUPTED = 0, 1, 2, 3, 130
F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    """What every command shares: where the service is, and how to print."""

    url: str | None = None
    api_key: str | None = None
    json: bool = False
    _client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.url, self.api_key)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(State).json = True


def json_option(command: F) -> F:
    """``--json`` on a command: print JSON for scripts instead of tables."""
    option = click.option(
        "--json",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print JSON instead of tables.",
    )
    return option(command)


def fail(message: str, code: int) -> None:
    """Print one line on stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(code)


def _problem(state: State, exc: ApiError) -> None:
    click.echo(f"error: {exc.detail}", err=True)
    for item in exc.errors[:50]:
        where = ".".join(str(part) for part in item.loc) or "(request)"
        click.echo(f"  {where}: {item.msg}", err=True)
    if state.json:
        sys.stdout.write(json.dumps(exc.problem.model_dump(mode="json"), indent=2) + "\n")


class Group(click.Group):
    """A click group that turns the client's exceptions into exit statuses."""

    def invoke(self, ctx: click.Context) -> Any:
        state = ctx.ensure_object(State)
        try:
            return super().invoke(ctx)
        except ApiError as exc:
            _problem(state, exc)
            ctx.exit(PROBLEM)
        except ServerUnreachableError as exc:
            click.echo(f"error: {exc}".replace("\n", " "), err=True)
            ctx.exit(UNREACHABLE)
        except (MissingDependencyError, ArtifactIntegrityError, WaitTimeoutError) as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(PROBLEM)
        except (KeyboardInterrupt, click.Abort):
            click.echo("interrupted", err=True)
            ctx.exit(INTERRUPTED)
        finally:
            state.close()


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="ENSEMBLE_URL",
    show_envvar=True,
    help="The service's base URL [default: http://127.0.0.1:8000].",
)
@click.option(
    "--api-key", envvar="ENSEMBLE_API_KEY", show_envvar=True, help="An API key of the service."
)
@json_option
@click.version_option(package_name="ensemble-service", prog_name="ensemble")
@click.pass_context
def cli(ctx: click.Context, url: str | None, api_key: str | None) -> None:
    """Train, version and serve ensemble models with the Ensemble service.

    \b
    ensemble datasets upload iris.csv --name iris
    ensemble train iris-rf --dataset iris --target species --kind random_forest --wait
    ensemble predict iris-rf rows.csv --proba
    """
    state = ctx.ensure_object(State)
    state.url, state.api_key = url, api_key


def split_ref(value: str) -> tuple[str, str]:
    """``MODEL[@REF]`` as (model, ref); the ref defaults to ``latest``."""
    model, at, ref = value.rpartition("@")
    if not at:
        return value, "latest"
    if not model or not ref:
        raise click.BadParameter(f"{value!r} is not MODEL or MODEL@REF")
    return model, ref
