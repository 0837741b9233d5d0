"""The floors of the service bench: what any Python HTTP service costs on this machine.

``bare``: a bare ASGI app that reads the request body and answers a fixed JSON document,
the least any app under uvicorn can do per request. ``trivial_fastapi``: one FastAPI
``POST`` route doing the same, the least a FastAPI app can do. Both run under uvicorn with
the service's own options (see :func:`benchmarks.service_bench.floor_service`), and the
service's one-row figures are printed as ratios to them.
"""

from __future__ import annotations

from fastapi import FastAPI, Request, Response
from starlette.types import Receive, Scope, Send

ANSWER = b'{"predictions":[0],"probabilities":[[0.5,0.5]],"warnings":[]}'
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]


async def bare(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the whole body, answers ``ANSWER``; lifespan messages are acknowledged."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": ANSWER})


trivial_fastapi = FastAPI()


@trivial_fastapi.post("/v1/models/{name}/versions/{ref}/predict")
async def predict(name: str, ref: str, request: Request) -> Response:
    await request.body()
    return Response(ANSWER, media_type="application/json")
