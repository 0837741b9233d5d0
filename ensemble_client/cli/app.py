"""The ``ensemble`` command: its root group, shared options, and exit statuses.

Exit status 0 on success, 1 when the server answered a problem (its ``detail`` printed)
or anything else failed, 2 for a usage error (click's own, or one line saying what to fix:
a bad URL, key, model name or output file), 3 when the server cannot be reached, 130 when
interrupted (Ctrl-C). Never a traceback, unless ``--debug`` (``ENSEMBLE_DEBUG=1``) asks
for it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from ensemble_client.client import Client
from ensemble_client.errors import (
    ApiError,
    ArtifactIntegrityError,
    InvalidArgumentError,
    MissingDependencyError,
    ProblemItem,
    ServerUnreachableError,
    WaitTimeoutError,
)
from ensemble_client.names import MODEL_NAME_RULE, is_model_name

OK, PROBLEM, USAGE, UNREACHABLE, INTERRUPTED = 0, 1, 2, 3, 130
F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    """What every command shares: where the service is, and how to print."""

    url: str | None = None
    api_key: str | None = None
    json: bool = False
    debug: bool = False
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


def for_cli(message: str) -> str:
    """A server's message as advice for the CLI user: the command, not the route."""
    if "GET /v1/kinds" in message:
        return message.replace("GET /v1/kinds", "`ensemble kinds`")
    if "unknown kind" in message and "ensemble kinds" not in message:
        return f"{message}; see `ensemble kinds`"
    return message


def echo_problem(detail: str, errors: list[ProblemItem]) -> None:
    """A problem on stderr: its detail, then each location and message."""
    click.echo(f"error: {for_cli(detail)}", err=True)
    for item in errors[:50]:
        where = ".".join(str(part) for part in item.loc) or "(request)"
        click.echo(f"  {where}: {for_cli(item.msg)}", err=True)


def _problem(state: State, exc: ApiError) -> None:
    echo_problem(exc.detail, exc.errors)
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
        except InvalidArgumentError as exc:
            fail(str(exc), USAGE)
        except (KeyboardInterrupt, click.Abort):
            click.echo("interrupted", err=True)
            ctx.exit(INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException):
            raise
        except ValidationError as exc:
            _not_understood(state, exc)
        except Exception as exc:
            if state.debug:
                raise
            fail(f"{type(exc).__name__}: {_first_line(exc)} (--debug shows the traceback)",
                 PROBLEM)  # fmt: skip
        finally:
            state.close()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _not_understood(state: State, exc: ValidationError) -> None:
    """An answer that is not the service's (another service at the URL, or a client
    older than the service)."""
    if state.debug:
        raise exc
    url = state._client.url if state._client is not None else "the service"
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    what = f"{where}: {first['msg']}" if where else first["msg"]
    fail(f"the answer of {url} is not what this client expects ({what}); is it the "
         "Ensemble service?", PROBLEM)  # fmt: skip


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
@click.option(
    "--debug",
    is_flag=True,
    envvar="ENSEMBLE_DEBUG",
    show_envvar=True,
    help="Show the traceback of an unexpected error.",
)
@json_option
@click.version_option(package_name="ensemble-service", prog_name="ensemble")
@click.pass_context
def cli(ctx: click.Context, url: str | None, api_key: str | None, debug: bool) -> None:
    """Train, version and serve ensemble models with the Ensemble service.

    \b
    ensemble datasets upload iris.csv --name iris
    ensemble train iris-rf --dataset iris --target species --kind random_forest --wait
    ensemble predict iris-rf rows.csv --proba
    """
    state = ctx.ensure_object(State)
    state.url, state.api_key, state.debug = url, api_key, debug


def check_model_name(name: str, argument: str = "MODEL") -> str:
    """``name`` if the service accepts it as a model name; else exit 2 before sending
    anything (``x/aliases/y`` would otherwise reach another route)."""
    if not is_model_name(name):
        fail(f"{argument} {name!r} is not a model name: {MODEL_NAME_RULE}", USAGE)
    return name


def model_name(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``callback=`` of a MODEL argument: checked as the service would."""
    return check_model_name(value, (param.human_readable_name or "MODEL").upper())


def split_ref(value: str) -> tuple[str, str]:
    """``MODEL[@REF]`` as (model, ref); the ref defaults to ``latest``."""
    model, at, ref = value.rpartition("@")
    if not at:
        return check_model_name(value), "latest"
    if not model or not ref:
        raise click.BadParameter(f"{value!r} is not MODEL or MODEL@REF")
    return check_model_name(model), ref
