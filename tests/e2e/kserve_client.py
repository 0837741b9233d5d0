"""Run by ``.venv-kserve``'s interpreter (see tests/e2e/toolenv.py), never imported by the
project's tests: KServe's own REST client and pydantic data models against a server.

``python kserve_client.py URL MODEL`` with ``{"features": [...], "rows": [[...]],
"options": {...}, "headers": {...}}`` on stdin prints a JSON object: what the client's
health and readiness calls said, the outputs of three inferences (one FP64 tensor per
feature as JSON; one 2-D tensor as binary data with binary outputs; the same JSON request
posted raw), and the message of the client's error for a request missing inputs.  Every document the
server sent, and every request the client built, is validated with
``kserve.protocol.rest.v2_datamodels`` on the way.
"""

import asyncio
import json
import sys

import httpx
import numpy as np
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig
from kserve.protocol.infer_type import RequestedOutput
from kserve.protocol.rest import v2_datamodels as models


def _outputs(response):
    return {o.name: o.as_numpy().tolist() for o in response.outputs}


async def main() -> None:
    url, model = sys.argv[1], sys.argv[2]
    job = json.load(sys.stdin)
    headers = job.get("headers") or {}
    rows = np.asarray(job["rows"], dtype=np.float64)
    features, options = job["features"], job["options"]
    out = {}
    client = InferenceRESTClient(RESTConfig(protocol="v2", timeout=60))
    out["live"] = await client.is_server_live(url, headers=dict(headers))
    out["ready"] = await client.is_server_ready(url, headers=dict(headers))
    out["model_ready"] = await client.is_model_ready(url, model, headers=dict(headers))
    out["unknown_model_ready"] = await client.is_model_ready(
        url, "no-such-model", headers=dict(headers)
    )

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        models.ServerMetadataResponse.model_validate((await http.get("/v2")).json())
        models.ServerLiveResponse.model_validate((await http.get("/v2/health/live")).json())
        models.ServerReadyResponse.model_validate((await http.get("/v2/health/ready")).json())
        metadata = (await http.get(f"/v2/models/{model}")).json()
        models.ModelMetadataResponse.model_validate(metadata)
        ready = (await http.get(f"/v2/models/{model}/versions/1/ready")).json()
        models.ModelReadyResponse.model_validate(ready)
        out["metadata"] = metadata

        # One FP64 tensor per feature, as JSON.
        inputs = []
        for j, name in enumerate(features):
            tensor = InferInput(name, [len(rows)], "FP64")
            tensor.set_data_from_numpy(rows[:, j].copy(), binary_data=False)
            inputs.append(tensor)
        request = InferRequest(model, inputs, request_id="kserve-json", parameters=options)
        body, length = request.to_rest()
        assert length is None
        models.InferenceRequest.model_validate(body)
        response = await client.infer(url, request, model_name=model, headers=dict(headers))
        out["json"] = _outputs(response)
        out["json_id"] = response.id

        # The same request posted raw: the answer's JSON validated as the protocol's.
        raw = await http.post(f"/v2/models/{model}/infer", json=body)
        models.InferenceResponse.model_validate(raw.json())

        # One 2-D tensor as binary data; every output back as binary.
        matrix = InferInput("input-0", list(rows.shape), "FP64")
        matrix.set_data_from_numpy(rows, binary_data=True)
        wanted = [RequestedOutput(o["name"], {"binary_data": True}) for o in metadata["outputs"]]
        request = InferRequest(model, [matrix], parameters=options, request_outputs=wanted)
        response = await client.infer(url, request, model_name=model, headers=dict(headers))
        out["binary"] = _outputs(response)

        # A request missing inputs: the client's error carries the server's message.
        bad = InferInput(features[0], [1], "BYTES")
        bad.set_data_from_numpy(np.array(["x"], dtype=object), binary_data=False)
        try:
            await client.infer(
                url, InferRequest(model, [bad]), model_name=model, headers=dict(headers)
            )
        except httpx.HTTPStatusError as exc:
            out["error"] = {"status": exc.response.status_code, "message": str(exc)}
    await client.close()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
