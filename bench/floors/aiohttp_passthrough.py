"""A second floor: the same pass-through on aiohttp (server and client).

    python bench/floors/aiohttp_passthrough.py --upstream http://127.0.0.1:9000/v1 --port 9101
"""
import argparse
import asyncio
import json

import uvloop
from aiohttp import ClientSession, TCPConnector, web

parser = argparse.ArgumentParser()
parser.add_argument("--upstream", required=True)
parser.add_argument("--port", type=int, required=True)
args = parser.parse_args()
URL = args.upstream.rstrip("/") + "/chat/completions"


async def chat(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    headers = {"content-type": "application/json", "authorization": request.headers.get("authorization", "")}
    upstream = await request.app["client"].post(URL, data=body, headers=headers)
    if not json.loads(body).get("stream"):
        return web.Response(body=await upstream.read(), status=upstream.status, content_type="application/json")
    out = web.StreamResponse(status=upstream.status, headers={"content-type": "text/event-stream"})
    await out.prepare(request)
    async for chunk in upstream.content.iter_any():
        await out.write(chunk)
    await out.write_eof()
    return out


async def health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def client_ctx(app: web.Application):
    app["client"] = ClientSession(connector=TCPConnector(limit=100))
    yield
    await app["client"].close()

app = web.Application()
app.cleanup_ctx.append(client_ctx)
app.add_routes([web.post("/v1/chat/completions", chat), web.get("/healthz", health)])
asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)
