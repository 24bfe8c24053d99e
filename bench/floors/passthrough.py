"""The same-stack floor: a bare pass-through on starlette + uvicorn + one pooled httpx client.

    python bench/floors/passthrough.py --upstream http://127.0.0.1:9000/v1 --port 9100

What any proxy on this stack costs at least; bench/overhead.py reports ctxwarden as a ratio to it.
It relays the three agent APIs: /v1/chat/completions, /v1/responses and /v1/messages (with the
client's x-api-key and anthropic-* headers).
"""
import argparse
import json

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

parser = argparse.ArgumentParser()
parser.add_argument("--upstream", required=True)
parser.add_argument("--port", type=int, required=True)
args = parser.parse_args()
client = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=100, max_keepalive_connections=100))
BASE = args.upstream.rstrip("/")
PASSED = ("authorization", "x-api-key", "anthropic-version", "anthropic-beta")


def relay(path):
    url = BASE + path

    async def handle(request):
        body = await request.body()
        headers = {"content-type": "application/json"}
        headers.update((k, request.headers[k]) for k in PASSED if k in request.headers)
        upstream = await client.send(client.build_request("POST", url, content=body, headers=headers),
                                     stream=bool(json.loads(body).get("stream")))
        if upstream.headers.get("content-type", "").startswith("text/event-stream"):
            return StreamingResponse(upstream.aiter_raw(), media_type="text/event-stream", background=None)
        return Response(await upstream.aread(), upstream.status_code, media_type="application/json")
    return handle


async def health(request):
    return Response("ok")

app = Starlette(routes=[*(Route(f"/v1{path}", relay(path), methods=["POST"]) for path in ("/chat/completions", "/responses", "/messages")),
                        Route("/healthz", health)])
uvicorn.run(app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools", log_level="error", access_log=False)
