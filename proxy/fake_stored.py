"""The fake upstream's Files, Batches and Vector stores: OpenAI's shapes, the fields a client reads.

Enough for the client keys' stored-object rules (keys/owned.py) to be tried end to end with the
official SDK: a file uploaded, read and deleted; a batch made from it, which completes at once with
an output file of its own; a vector store made from files. Kept in the fake's `stored` with its
Responses and conversations (read and deleted by its `_stored_object`).
"""

from __future__ import annotations

import re
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

_FILENAME = re.compile(rb'filename="([^"]{1,200})"')


def stored_routes(fake: Any) -> list[Route]:
    async def upload(request: Request) -> Response:
        raw = await request.body()
        await fake._record(request)
        named = _FILENAME.search(raw)
        return JSONResponse(_keep(fake, "file", {"bytes": len(raw), "purpose": "batch",
                                                 "filename": named.group(1).decode("utf-8", "replace") if named else "upload"},
                                  content=raw))

    async def content(request: Request) -> Response:
        await fake._record(request)
        kept = fake.stored.get(request.path_params["object_id"])
        if kept is None or kept.get("object") != "file":
            return await fake._stored_object(request)  # the 404, as the fake answers one
        return Response(fake.contents.get(kept["id"], b""), media_type="application/octet-stream")

    async def batch(request: Request) -> Response:
        body = await fake._record(request) or {}
        output = _keep(fake, "file", {"bytes": 2, "purpose": "batch_output", "filename": "output.jsonl"}, content=b"{}")
        return JSONResponse(_keep(fake, "batch", {"metadata": body.get("metadata"), "endpoint": body.get("endpoint"),
                                                  "input_file_id": body.get("input_file_id"),
                                                  "completion_window": body.get("completion_window"), "status": "completed",
                                                  "output_file_id": output["id"], "error_file_id": None}))

    async def vector_store(request: Request) -> Response:
        body = await fake._record(request) or {}
        return JSONResponse(_keep(fake, "vector_store", {"name": body.get("name"), "file_ids": body.get("file_ids") or [],
                                                         "status": "completed"}))

    return [
        Route("/v1/files", upload, methods=["POST"]),
        Route("/v1/files/{object_id}", fake._stored_object, methods=["GET", "DELETE"]),
        Route("/v1/files/{object_id}/content", content, methods=["GET"]),
        Route("/v1/batches", batch, methods=["POST"]),
        Route("/v1/batches/{object_id}", fake._stored_object, methods=["GET"]),
        Route("/v1/vector_stores", vector_store, methods=["POST"]),
        Route("/v1/vector_stores/{object_id}", fake._stored_object, methods=["GET", "DELETE"]),
    ]


def _keep(fake: Any, kind: str, fields: dict[str, Any], content: bytes | None = None) -> dict[str, Any]:
    fake.counter += 1
    prefix = {"file": "file-fake", "batch": "batch_fake", "vector_store": "vs_fake"}[kind]
    kept = {"id": f"{prefix}{fake.counter}", "object": kind, "created_at": int(time.time()), **fields}
    fake.stored[kept["id"]] = kept
    if content is not None:
        fake.contents[kept["id"]] = content
    return kept
