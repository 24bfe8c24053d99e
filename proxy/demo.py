"""`ctxwarden demo`: a scripted agent conversation through the real proxy against a local fake
upstream, printed as a table of what each policy did. No API key, no network."""

from __future__ import annotations

import contextlib
import json
import os
import random
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import httpx

from ctxwarden.policies.text.tokens import TiktokenCounter

from .app import create_app
from .config import load_settings
from .fake_upstream import FakeUpstream
from .local_server import LocalServer

SYSTEM = {"role": "system", "content": "You are a travel agent. Use the tools when they help; answer briefly."}

TOOL_NAMES = [
    ("search_flights", "Search flights between two cities on a date"), ("book_hotel", "Book a hotel room in a city"),
    ("get_weather", "Weather forecast for a city"), ("convert_currency", "Convert an amount between currencies"),
    ("translate_text", "Translate text between languages"), ("find_restaurants", "Find restaurants near a place"),
    ("track_package", "Track a parcel by its tracking number"), ("stock_quote", "Latest stock price for a ticker"),
    ("send_email", "Send an email to a recipient"), ("calendar_add", "Add an event to the calendar"),
]


def _tools(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        name, desc = TOOL_NAMES[i] if i < len(TOOL_NAMES) else (f"internal_tool_{i}", f"Internal utility number {i} for back-office data")
        out.append({"type": "function", "function": {"name": name, "description": desc,
                                                      "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}})
    return out


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _scenes() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(title, request body, scripted upstream reply)."""
    rng = random.Random(3)
    words = "flight seat price departure gate terminal fare class baggage airline delay connection".split()
    bulky = " ".join(f"{rng.choice(words)} {rng.randint(10, 999)}" for _ in range(2300))  # past budget.compress of the 8k window
    history = [SYSTEM]
    for i in range(14):
        history += [{"role": "user", "content": f"Step {i}: what about option {i} for the Paris trip on day {i + 1}?"},
                    {"role": "assistant", "content": (
                        "Great question, happy to help with that! I had a good look at everything available for "
                        "your trip and there are quite a few things worth considering here before deciding. "
                        f"Option {i} costs {100 + 7 * i} euros and leaves at {8 + i % 10}:00. "
                        "Let me know if you would like me to look into anything else at all, I am always glad to help.")}]
    history.append({"role": "user", "content": "Summarise the cheapest option."})
    return [
        ("plain question", {"messages": [SYSTEM, {"role": "user", "content": "What is the capital of France?"}]},
         {"content": "Paris."}),
        ("45 tools offered", {"messages": [SYSTEM, {"role": "user", "content": "Search flights from Madrid to Paris on May 3"}],
                              "tools": _tools(45)}, {"content": "I found 3 flights."}),
        ("bulky tool result", {"messages": [SYSTEM, {"role": "user", "content": "Find flights to Paris"},
                                            _call("c1", "search_flights", {"to": "Paris"}),
                                            {"role": "tool", "tool_call_id": "c1", "content": bulky},
                                            {"role": "user", "content": "Which one is cheapest?"}]},
         {"content": "The 9:40 flight is cheapest."}),
        ("29-message history", {"messages": history}, {"content": "Option 0, at 100 euros."}),
        ("changed preference", {"messages": [SYSTEM,
                                             {"role": "user", "content": "I want budget hotels under $50 a night."},
                                             {"role": "assistant", "content": "Noted: budget hotels under $50."},
                                             {"role": "user", "content": "Actually, I want a luxury 5-star hotel."}]},
         {"content": "Here are three 5-star hotels."}),
        ("agent loop", {"messages": _weather_loop(3)}, {"content": "The weather service keeps timing out; I'll say so."}),
        ("agent loop, on after the note", {"messages": _weather_loop(4)}, {"content": "Let me try again."}),
        ("hallucinated answer", {"messages": [SYSTEM, {"role": "user", "content": "Where is the Eiffel Tower?"}]},
         {"content": "The Eiffel Tower is located in London."}),
    ]


def _weather_loop(calls: int) -> list[dict]:
    """An agent calling the same tool with the same arguments `calls` times, the same error each time."""
    return [SYSTEM, {"role": "user", "content": "Weather in Paris?"},
            *[m for i in range(calls) for m in (_call(f"w{i}", "get_weather", {"city": "Paris"}),
                                                {"role": "tool", "tool_call_id": f"w{i}", "content": "error: timeout"})]]


def _scene_block(title: str, sent: int, up: int | None, actions: str, answer: str) -> str:
    """One scene, whole: the answer and the actions are wrapped, never cut."""
    tokens = f"{sent} tokens sent, {up} forwarded" if up is not None else f"{sent} tokens sent, answered by the proxy"
    lines = [f"▸ {title}  ({tokens})",
             textwrap.fill(actions.replace(",", ", ") or "(none)", 100, initial_indent="    actions: ",
                           subsequent_indent=" " * 13, break_long_words=False, break_on_hyphens=False),
             textwrap.fill(answer or "(empty)", 100, initial_indent="    answer:  ", subsequent_indent=" " * 13)]
    return "\n".join(lines)


def run_demo() -> int:
    import logging

    logging.getLogger().setLevel(logging.ERROR)  # the scenes are the output; policy logs would interleave
    with contextlib.suppress(ImportError):
        import bm25s  # noqa: F401  (its import sets its logger to DEBUG: import it first, then quiet it)
    logging.getLogger("bm25s").setLevel(logging.ERROR)
    workdir = Path(tempfile.mkdtemp(prefix="ctxwarden-demo-"))
    os.environ.setdefault("CTXWARDEN_ADMIN_KEY", "demo-admin-key")
    fake = FakeUpstream()
    counter = TiktokenCounter()
    with LocalServer(fake.app()) as upstream:
        settings = load_settings(None, {
            "upstream": {"base_url": f"{upstream.url}/v1", "api_key_env": None},
            "storage": {"path": str(workdir / "store")},
            "models": {"demo-model": {"context_window": 8000}},
            "policies": {"history": {"max_messages": 20, "keep_recent": 6}},
        })
        with LocalServer(create_app(settings)) as proxy:
            admin = {"authorization": f"Bearer {os.environ['CTXWARDEN_ADMIN_KEY']}"}
            httpx.post(f"{proxy.url}/admin/kb/documents", headers=admin, json={"documents": [
                {"id": "eiffel", "text": "The Eiffel Tower is located in Paris, France."}]})
            # No addresses here: these two servers stop with the demo, so their URLs would be dead links.
            print("ctxwarden demo — the real proxy in front of a local fake upstream (no API key, no network)\n")
            for title, body, reply in _scenes():
                fake.reply(**reply)
                before = len(fake.chat_requests)
                request = {"model": "demo-model", **body}
                r = httpx.post(f"{proxy.url}/v1/chat/completions", json=request, timeout=60)
                sent_tokens = counter.count_messages(request["messages"], "gpt-4o") + counter.count_tools(request.get("tools"), "gpt-4o")
                fake.script.clear()  # a scene the proxy answered itself leaves its reply unused
                forwarded = fake.chat_requests[before:]
                up = forwarded[0] if forwarded else None
                up_tokens = (counter.count_messages(up["messages"], "gpt-4o") + counter.count_tools(up.get("tools"), "gpt-4o")) if up else 0
                data = r.json()
                answer = (data.get("choices") or [{}])[0].get("message", {}).get("content") if r.status_code == 200 else \
                    f"{r.status_code} {data.get('error', {}).get('code')}"
                print(_scene_block(title, sent_tokens, up_tokens if up else None,
                                   r.headers.get("x-ctxwarden-actions") or "", (answer or "").replace("\n", " ")))
            print("\n'forwarded' is what the upstream received; the actions are the x-ctxwarden-actions header.")
    print("The demo's servers have stopped. To watch your own traffic: `ctxwarden serve`, point your agent at\n"
          "http://127.0.0.1:8787/v1, and open http://127.0.0.1:8787/dashboard (the admin key is CTXWARDEN_ADMIN_KEY).\n"
          "Every setting: config/ctxwarden.yaml.")
    return 0
