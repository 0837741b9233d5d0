"""``python -m ensemble_client``: the ``ensemble`` command line."""

from ensemble_client.cli import main

main()
