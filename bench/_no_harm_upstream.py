"""A recording upstream for bench/no_harm.py and bench/message_size.py.

    python bench/_no_harm_upstream.py --port N

POST /v1/chat/completions answers one plain assistant message (ANSWER) and keeps the request
body it received under the request's `x-bench-id` header (the proxy passes a client's other
headers through; it reads only x-ctxwarden-* ones). GET /_take/<id> returns the bodies received
under that id (a JSON list, empty when the proxy never called the upstream) and forgets them.
GET /_count tells how many chat calls arrived in all. Nothing is streamed: the benches send plain
requests, as most clients do.
"""

from __future__ import annotations

import argparse
import json
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ANSWER = "Here is a short answer to your request."

received: dict[str, list[dict]] = {}
calls = {"n": 0}


async def chat(request: Request) -> Response:
    raw = await request.body()
    try:
        body = json.loads(raw)
    except ValueError:
        body = {"unparsed": raw[:200].decode("utf-8", "replace")}
    calls["n"] += 1
    key = request.headers.get("x-bench-id")
    if key:
        received.setdefault(key, []).append(body)
    model = body.get("model", "fake") if isinstance(body, dict) else "fake"
    return JSONResponse({
        "id": f"chatcmpl-bench{calls['n']}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER, "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18}})


async def take(request: Request) -> Response:
    return JSONResponse(received.pop(request.path_params["key"], []))


async def count(request: Request) -> Response:
    return JSONResponse({"calls": calls["n"], "held": len(received)})


async def models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": "gpt-4o", "object": "model", "created": 0, "owned_by": "bench"}]})


async def embeddings(request: Request) -> Response:
    body = json.loads(await request.body() or b"{}")
    inputs = body.get("input") or []
    inputs = [inputs] if isinstance(inputs, str) else inputs
    return JSONResponse({"object": "list", "model": body.get("model"), "usage": {"prompt_tokens": 0, "total_tokens": 0},
                         "data": [{"object": "embedding", "index": i, "embedding": [1.0, 0.5, float(len(t) % 7)]}
                                  for i, t in enumerate(inputs)]})


app = Starlette(routes=[
    Route("/v1/chat/completions", chat, methods=["POST"]),
    Route("/v1/models", models, methods=["GET"]),
    Route("/v1/embeddings", embeddings, methods=["POST"]),
    Route("/_take/{key}", take, methods=["GET"]),
    Route("/_count", count, methods=["GET"]),
])


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
