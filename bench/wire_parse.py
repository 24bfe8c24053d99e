"""What the Responses and Messages adapters cost on the ~12k-token, 50-tool agent request.

    python bench/wire_parse.py [--n 200]

The request is overhead.py's `agent_request()` written in each API's shape (bench/_api_wire.py).
Per API, median of `--n` runs, in ms:

- json.loads: the body's bytes read (the floor every parse pays);
- loads + parse: json.loads then `parse_request`; parse: `parse_request` alone (the body loaded);
- render, unchanged: `render_request` with the parsed messages and tools in new lists (as the
  handler passes them), nothing edited;
- render, one edited: the last message replaced by an edited copy (its content + " x").
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable

from _api_wire import request_body
from overhead import agent_request

from ctxwarden.proxy.wire import anthropic as anthropic_wire
from ctxwarden.proxy.wire import responses as responses_wire

WIRES = {"responses": responses_wire, "messages": anthropic_wire}


def median_ms(fn: Callable[[], Any], n: int) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def edited(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = messages[-1]
    content = last.get("content")
    return [*messages[:-1], {**last, "content": (content if isinstance(content, str) else "") + " x"}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    chat = agent_request()
    print(f"~12k-token agent request: {len(chat['messages'])} messages, {len(chat['tools'])} tools; "
          f"median of {args.n}, ms")
    print(f"  {'API':10} {'bytes':>7} {'json.loads':>10} {'loads+parse':>11} {'parse':>7} {'render same':>11} {'render edit':>11}")
    for api, wire in WIRES.items():
        raw = json.dumps(request_body(api, chat)).encode()
        body = json.loads(raw)
        parsed = wire.parse_request(body)
        same = list(parsed.messages)
        one = edited(parsed.messages)
        tools = list(parsed.tools or [])
        assert wire.render_request(body, parsed, same, tools)["tools"] == body["tools"]
        assert wire.render_request(body, parsed, one, tools)["tools"] == body["tools"]
        loads = median_ms(lambda: json.loads(raw), args.n)
        loads_parse = median_ms(lambda: wire.parse_request(json.loads(raw)), args.n)
        parse = median_ms(lambda: wire.parse_request(body), args.n)
        render_same = median_ms(lambda: wire.render_request(body, parsed, list(same), list(tools)), args.n)
        render_one = median_ms(lambda: wire.render_request(body, parsed, list(one), list(tools)), args.n)
        print(f"  {api:10} {len(raw):7} {loads:10.3f} {loads_parse:11.3f} {parse:7.3f} {render_same:11.3f} {render_one:11.3f}")


if __name__ == "__main__":
    main()
