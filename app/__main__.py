"""``python -m app``: serve on $HOST:$PORT (default 127.0.0.1:8000) with
ENSEMBLE_WORKERS server processes, like ``make run`` (see :mod:`app.server.launcher`)."""

from __future__ import annotations

import os
import sys

from app.server.launcher import check_dependencies, load_settings, serve, start_fork_server


def main() -> None:
    settings = load_settings()
    # Before the checks import the library (seconds): the fork server preloads it beside.
    start_fork_server(settings)
    check_dependencies(settings)
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "8000"))
    sys.exit(serve(settings, host, port))


if __name__ == "__main__":
    main()
