"""The same-stack floor: a bare pass-through on starlette + uvicorn + one pooled httpx client.

    python bench/floors/passthrough.py --upstream http://127.0.0.1:9000/v1 --port 9100

What any proxy on this stack costs at least; bench/overhead.py reports ctxwarden as a ratio to it.
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
URL = args.upstream.rstrip("/") + "/chat/completions"


async def chat(request):
    body = await request.body()
    headers = {"content-type": "application/json", "authorization": request.headers.get("authorization", "")}
    upstream = await client.send(client.build_request("POST", URL, content=body, headers=headers),
                                 stream=bool(json.loads(body).get("stream")))
    if upstream.headers.get("content-type", "").startswith("text/event-stream"):
        return StreamingResponse(upstream.aiter_raw(), media_type="text/event-stream", background=None)
    return Response(await upstream.aread(), upstream.status_code, media_type="application/json")


async def health(request):
    return Response("ok")

app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/healthz", health)])
uvicorn.run(app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools", log_level="error", access_log=False)
