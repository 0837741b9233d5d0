"""The ``ensemble`` command line, over the client (click + rich).

Its commands live in modules by topic; importing them registers them on the root group.
"""

from ensemble_client.cli import export, predict, resources, rollout, train
from ensemble_client.cli.app import cli

__all__ = ["cli", "export", "main", "predict", "resources", "rollout", "train"]


def main() -> None:
    """The console script ``ensemble`` (also ``python -m ensemble_client``)."""
    cli(prog_name="ensemble")
