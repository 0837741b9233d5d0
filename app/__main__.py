"""``python -m app``: serve on $HOST:$PORT (default 127.0.0.1:8000), like ``make run``."""

from __future__ import annotations

import os

import uvicorn

from app.settings import Settings


def main() -> None:
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=os.environ.get("HOST", "127.0.0.1"),
        port=int(os.environ.get("PORT", "8000")),
        timeout_graceful_shutdown=Settings().shutdown_timeout_s,
    )


if __name__ == "__main__":
    main()
