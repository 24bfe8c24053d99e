"""The tools policy in process: must-keep rules, fail-safe modes, the catalog in Chroma, metrics."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from ctxwarden.policies.base import Exchange, Services
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.policies.tools.catalog import CATALOG_VERSION
from ctxwarden.policies.tools.policy import ToolsConfig, ToolsPolicy
from ctxwarden.policies.tools.text import describe_tool
from ctxwarden.proxy.config import EmbeddingsConfig, StorageConfig
from ctxwarden.proxy.embeddings import build_embedder
from ctxwarden.proxy.storage import ChromaStore
from tests.tools_fixtures import CountingEmbedder, all_tools, names, tool

_WORDLLAMA = build_embedder(EmbeddingsConfig())


class Metrics:
    def __init__(self) -> None:
        self.points: list[tuple[str, float, dict[str, Any]]] = []

    def add(self, name: str, value: float = 1, **attrs: Any) -> None:
        self.points.append((name, value, attrs))

    record = gauge = add

    def values(self, name: str) -> list[float]:
        return [v for n, v, _ in self.points if n == name]


class BrokenEmbedder:
    name, dim = "broken", 3

    def embed(self, texts: Any) -> Any:
        raise RuntimeError("model file missing")


class BrokenStore:
    def collection(self, name: str, tenant: str | None = None) -> Any:
        raise ConnectionError("chroma unreachable")


def policy(tmp_path, embedder: Any = _WORDLLAMA, store: Any = "chroma", **config: Any) -> ToolsPolicy:
    services = Services(
        tokens=TiktokenCounter(), metrics=Metrics(), embedder=embedder,
        store=ChromaStore(StorageConfig(path=str(tmp_path / "store"))) if store == "chroma" else store,
    )
    return ToolsPolicy(ToolsConfig(**config), services)


def exchange(messages: list[dict[str, Any]], tools: list[dict[str, Any]], session: str = "s", **body: Any) -> Exchange:
    return Exchange(request_id="r", model="gpt-4o", messages=messages, tools=tools,
                    body={"model": "gpt-4o", "messages": messages, "tools": tools, **body}, session_id=session)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def actions(ex: Exchange) -> dict[str, dict[str, Any]]:
    return {a.name: a.detail for a in ex.actions}


async def test_always_keep_and_allowed_tools_are_forwarded(tmp_path):
    p = policy(tmp_path, always_keep=["create_todo", "not_sent_by_client"])
    choice = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
        {"type": "function", "function": {"name": "set_timer"}}, {"type": "function", "function": {"name": "rent_car"}}]}}
    ex = exchange(user("What will the weather be like in Oslo tomorrow?"), all_tools(), tool_choice=choice)
    await p.on_request(ex)
    kept = names(ex.tools)
    assert {"create_todo", "set_timer", "rent_car", "get_weather_forecast"} <= set(kept)
    assert sorted(actions(ex)["filter"]["forced"]) == ["create_todo", "rent_car", "set_timer"]
    assert len(kept) <= 5 + 3


async def test_tools_without_a_name_are_never_dropped(tmp_path):
    p = policy(tmp_path)
    odd = {"type": "web_search_preview"}
    tools = all_tools(40) + [odd]
    ex = exchange(user("Convert 10 euros to dollars"), tools)
    await p.on_request(ex)
    assert any(t is odd for t in ex.tools)
    assert "convert_currency" in names([t for t in ex.tools if "function" in t])


async def test_kept_tools_are_the_clients_dict_objects(tmp_path):
    p = policy(tmp_path)
    tools = all_tools()
    ex = exchange(user("Book a taxi to the airport"), tools)
    await p.on_request(ex)
    assert ex.tools is not tools and all(any(k is t for t in tools) for k in ex.tools)
    assert tools == all_tools()  # the client's list and dicts are untouched


async def test_mid_task_the_latest_turn_steers_the_ranking(tmp_path):
    p = policy(tmp_path, top_k=3)
    vague = user("Do the next step now.")
    alone = exchange(vague, all_tools(), session="alone")
    await p.on_request(alone)
    assert "get_weather_forecast" not in names(alone.tools)
    mid_task = vague + [
        {"role": "assistant", "content": "First I will check the conditions at your destination.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_air_quality", "arguments": '{"city": "Lisbon"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Air quality good. Next: temperature and rain forecast for Lisbon."},
    ]
    ex = exchange(mid_task, all_tools(), session="mid-task")
    await p.on_request(ex)
    relevance = json.loads(actions(ex)["filter"]["relevance"])
    assert max(relevance, key=relevance.get) == "get_weather_forecast"
    assert "get_air_quality" in names(ex.tools)


async def test_without_any_intent_nothing_is_filtered_and_it_says_why(tmp_path):
    p = policy(tmp_path)
    tools = all_tools()
    ex = exchange([{"role": "system", "content": ""}], tools)
    await p.on_request(ex)
    assert ex.tools is tools
    assert actions(ex)["skipped"] == {"reason": "no_intent"}


async def test_a_failing_embedder_falls_back_to_lexical_ranking_and_says_so(tmp_path):
    p = policy(tmp_path, embedder=BrokenEmbedder())
    ex = exchange(user("Track my package, tracking number 1Z999"), all_tools())
    await p.on_request(ex)
    assert "model file missing" in actions(ex)["degraded"]["reason"]
    assert "track_package" in names(ex.tools) and len(ex.tools) <= 5


async def test_an_unreachable_store_is_reported_and_ranking_goes_on_in_memory(tmp_path):
    p = policy(tmp_path, store=BrokenStore())
    ex = exchange(user("Translate this sentence into Italian"), all_tools())
    await p.on_request(ex)
    assert "chroma unreachable" in actions(ex)["store_failed"]["error"]
    assert "translate_text" in names(ex.tools)


async def test_the_catalog_stores_each_definition_once_in_chroma(tmp_path):
    embedder = CountingEmbedder(_WORDLLAMA)
    p = policy(tmp_path, embedder=embedder)
    tools = all_tools()
    await p.on_request(exchange(user("Find hotels in Rome"), tools))
    collection = p.services.store.collection(f"tools_{CATALOG_VERSION}_{embedder.name}")
    stored = collection.get(include=["metadatas", "documents"])
    expected = sum(len(describe_tool(t).texts) for t in tools)
    assert len(stored["ids"]) == expected
    assert not any(stored["documents"])  # vectors only: Chroma would index each text for full-text search
    assert {m["name"] for m in stored["metadatas"]} == set(names(tools))
    # A definition whose stored parts are incomplete is embedded again, and only that one.
    weather = tools[5]
    part_ids = [i for i, m in zip(stored["ids"], stored["metadatas"]) if m["name"] == "get_weather_forecast"]
    collection.delete(ids=part_ids[-1:])
    fresh = policy(tmp_path, embedder=embedder)
    embedder.calls.clear()
    await fresh.on_request(exchange(user("Is it going to snow in Oslo?"), tools))
    assert embedder.calls == [describe_tool(weather).texts, ["Is it going to snow in Oslo?"]]


async def test_an_edited_definition_is_a_new_catalog_entry(tmp_path):
    embedder = CountingEmbedder(_WORDLLAMA)
    p = policy(tmp_path, embedder=embedder)
    tools = all_tools()
    await p.on_request(exchange(user("Find hotels in Rome"), tools))
    edited = [dict(t) for t in tools]
    edited[3] = tool("search_hotels", "Find hotels and apartments in a city for given dates.", ["city", "check_in", "check_out"])
    embedder.calls.clear()
    await p.on_request(exchange(user("Find an apartment in Rome"), edited, session="s2"))
    assert embedder.calls[0] == describe_tool(edited[3]).texts


async def test_metrics_report_tools_in_out_tokens_saved_and_relevance(tmp_path):
    p = policy(tmp_path)
    ex = exchange(user("What is the price of Bitcoin right now?"), all_tools())
    await p.on_request(ex)
    metrics = p.services.metrics
    detail = actions(ex)["filter"]
    assert metrics.values("ctxwarden.tools.in") == [45]
    assert metrics.values("ctxwarden.tools.out") == [len(ex.tools)]
    assert metrics.values("ctxwarden.tools.saved_tokens") == [detail["tokens_saved"]]
    counter = TiktokenCounter()
    assert detail["tokens_before"] == counter.count_tools(all_tools(), "gpt-4o")
    assert detail["tokens_after"] == counter.count_tools(ex.tools, "gpt-4o")
    relevance = json.loads(detail["relevance"])
    assert sorted(metrics.values("ctxwarden.tools.relevance")) == sorted(relevance.values())
    assert max(relevance, key=relevance.get) == "get_crypto_price"
    assert actions(ex)["confusion"] == {"tool_count": 45, "threshold": 30, "tool_tokens": detail["tokens_before"]}


async def test_at_max_tools_nothing_happens(tmp_path):
    p = policy(tmp_path, max_tools=45)
    tools = all_tools()
    ex = exchange(user("Play some jazz"), tools)
    await p.on_request(ex)
    assert ex.tools is tools and ex.actions == []


@pytest.mark.parametrize("provider", ["minilm", "minilm+wordllama"])
def test_offline_minilm_embedders_give_unit_vectors_that_rank_sensibly(provider):
    embedder = build_embedder(EmbeddingsConfig(provider=provider))
    vectors = np.asarray(embedder.embed(["book a flight to Rome", "reserve a plane ticket to Italy", "bake a chocolate cake"]))
    assert vectors.shape == (3, embedder.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


def test_the_ensemble_similarity_is_the_weighted_mean_of_its_parts():
    from ctxwarden.proxy.embeddings import MINILM_ENSEMBLE_WEIGHT

    texts = ["search for flights", "find cheap airline tickets"]
    ensemble = np.asarray(build_embedder(EmbeddingsConfig(provider="minilm+wordllama")).embed(texts))
    minilm = np.asarray(build_embedder(EmbeddingsConfig(provider="minilm")).embed(texts))
    wordllama = np.asarray(_WORDLLAMA.embed(texts))
    expected = MINILM_ENSEMBLE_WEIGHT * minilm[0] @ minilm[1] + (1 - MINILM_ENSEMBLE_WEIGHT) * wordllama[0] @ wordllama[1]
    assert ensemble[0] @ ensemble[1] == pytest.approx(expected, abs=1e-5)


def test_bad_tools_settings_stop_start_up_naming_the_key():
    from ctxwarden.proxy.config import ConfigError, load_settings

    with pytest.raises(ConfigError) as bad:
        load_settings(None, {"policies": {"tools": {"weights": {"description": 0, "segments": 0}, "always_keep": "x"}},
                             "embeddings": {"provider": "minilm-xl"}})
    problems = "\n".join(bad.value.problems)
    assert "policies.tools.weights" in problems and "policies.tools.always_keep" in problems
    assert "embeddings.provider" in problems


# ----------------------------------------------------------------------------- the session's list


def step_of(messages: list[dict[str, Any]], called: str, result: str = "ok") -> list[dict[str, Any]]:
    """The conversation after the assistant called `called` and got `result`."""
    n = sum(1 for m in messages if m.get("role") == "tool")
    return messages + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{n}", "type": "function",
                                                              "function": {"name": called, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": result},
    ]


async def test_the_list_is_append_only_and_every_change_is_reported_with_its_reason(tmp_path):
    p = policy(tmp_path)
    convo = user("What will the weather be like in Oslo tomorrow?")
    ex = exchange(convo, all_tools())
    await p.on_request(ex)
    first = names(ex.tools)
    assert "list_changed" not in actions(ex) and actions(ex)["filter"]["k"] == len(json.loads(actions(ex)["filter"]["relevance"]))
    hidden = next(n for n in reversed(names(all_tools())) if n not in first and n != "transfer_money")
    convo = step_of(convo, hidden)  # a hidden tool the model called anyway
    ex = exchange(convo, all_tools())
    await p.on_request(ex)
    change = actions(ex)["list_changed"]  # the called tool, with this step's ranked batch in the same change
    assert change["reason"] == "called" and change["removed"] == [] and change["added"][0] == hidden
    assert names(ex.tools) == first + change["added"]
    called = names(ex.tools)
    convo = convo + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Now transfer 50 euros to my savings account."}]
    ex = exchange(convo, all_tools())
    await p.on_request(ex)
    grown = names(ex.tools)
    assert grown[: len(called)] == called and "transfer_money" in grown[len(called):]
    assert actions(ex)["list_changed"]["reason"] == "grow"
    ex = exchange(convo, all_tools())  # the same step again: same list, no change
    await p.on_request(ex)
    assert names(ex.tools) == grown and "list_changed" not in actions(ex)
    # The client stops sending a tool: it leaves the list, the rest keeps its order.
    fewer = [t for t in all_tools() if t["function"]["name"] != first[0]]
    ex = exchange(convo, fewer)
    await p.on_request(ex)
    assert names(ex.tools) == grown[1:]
    assert actions(ex)["list_changed"]["removed"] == [first[0]]


async def test_a_compaction_event_is_the_one_moment_the_list_shrinks(tmp_path):
    p = policy(tmp_path)
    convo = user("What will the weather be like in Oslo tomorrow?")
    for tool_name in ("get_horoscope", "play_music", "define_word"):
        convo = step_of(convo, tool_name)
        ex = exchange(convo, all_tools())
        await p.on_request(ex)
    long_list = names(ex.tools)
    convo = [convo[0], {"role": "user", "content": "Summary of earlier work."},
             {"role": "user", "content": "Book a taxi to the airport."}]  # what a compacted history looks like
    ex = exchange(convo, all_tools())
    ex.record("history", "compaction", reason="budget")
    await p.on_request(ex)
    assert actions(ex)["list_changed"]["reason"] == "compaction"
    assert "book_taxi" in names(ex.tools) and "get_horoscope" not in names(ex.tools) and len(ex.tools) < len(long_list)


async def test_without_stable_list_a_new_request_starts_a_new_list(tmp_path):
    p = policy(tmp_path, stable_list=False, query={"task": 0})  # the first request's words out of the query
    convo = user("What will the weather be like in Oslo tomorrow?")
    await p.on_request(exchange(convo, all_tools()))
    convo = convo + [{"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "Track parcel 1Z999AA1."}]
    ex = exchange(convo, all_tools())
    await p.on_request(ex)
    assert "get_weather_forecast" not in names(ex.tools) and "track_package" in names(ex.tools)
    assert actions(ex)["list_changed"]["reason"] == "request"


@pytest.mark.parametrize("cap", [{"max_tools": 8}, {"max_forwarded": 8}])
async def test_a_list_that_would_pass_its_cap_starts_again_from_this_steps_needs(tmp_path, cap):
    p = policy(tmp_path, top_k=2, **cap)
    convo = user("What will the weather be like in Oslo tomorrow?")
    for tool_name in ("get_horoscope", "play_music", "define_word", "set_timer", "calculate", "rent_car", "find_jobs"):
        convo = step_of(convo, tool_name)
    convo = convo + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Track parcel 1Z999AA1."}]
    ex = exchange(convo, all_tools())
    await p.on_request(exchange(convo[:3], all_tools()))
    await p.on_request(ex)
    assert actions(ex)["list_changed"]["reason"] == "full"
    assert "track_package" in names(ex.tools) and "get_horoscope" in names(ex.tools)  # called tools are never dropped
    assert len(ex.tools) <= 8 + 1  # the cap, and the tool the step needed beyond the called ones


async def test_max_forwarded_caps_the_list_but_not_when_filtering_starts(tmp_path):
    p = policy(tmp_path, max_tools=45, max_forwarded=5)  # 45 tools: at max_tools, nothing is filtered
    ex = exchange(user("What will the weather be like in Oslo tomorrow?"), all_tools())
    await p.on_request(ex)
    assert len(ex.tools) == 45
    uncapped = policy(tmp_path, max_tools=30, min_k=8, max_k=12, server_focus=0)
    ex = exchange(user("What will the weather be like in Oslo tomorrow?"), all_tools())
    await uncapped.on_request(ex)
    assert len(ex.tools) >= 8
    best = json.loads(actions(ex)["filter"]["relevance"])
    p = policy(tmp_path, max_tools=30, max_forwarded=5, min_k=8, max_k=12, server_focus=0)
    ex = exchange(user("What will the weather be like in Oslo tomorrow?"), all_tools())
    await p.on_request(ex)
    top5 = sorted(best, key=best.get, reverse=True)[:5]
    assert sorted(names(ex.tools)) == sorted(top5)  # the five most relevant, in the client's order


async def test_session_lists_are_per_tenant_and_bounded(tmp_path):
    p = policy(tmp_path, max_sessions=2)
    base = exchange(user("What will the weather be like in Oslo tomorrow?"), all_tools(), session="same")
    base.tenant = "acme"
    await p.on_request(base)
    other = exchange(user("Track parcel 1Z999AA1."), all_tools(), session="same")
    other.tenant = "globex"
    await p.on_request(other)
    assert "get_weather_forecast" not in names(other.tools) and "list_changed" not in actions(other)
    for s in ("s1", "s2"):  # two more sessions push acme's out of a 2-session memory
        await p.on_request(exchange(user("Play some jazz"), all_tools(), session=s))
    again = exchange(user("What will the weather be like in Oslo tomorrow?") + user("Track parcel 1Z999AA1."), all_tools(), session="same")
    again.tenant = "acme"
    await p.on_request(again)
    assert "list_changed" not in actions(again)  # a fresh list, not a change to a forgotten one


async def test_tools_agents_use_with_a_server_rank_up_for_that_server(tmp_path):
    servers = [tool(f"car__{n}", f"Vehicle control: {d}", []) for n, d in [
        ("start_engine", "start the engine of the vehicle"), ("press_brake_pedal", "press the brake pedal"),
        ("lock_doors", "lock or unlock the doors"), ("set_headlights", "turn the headlights on or off"),
        ("fill_fuel_tank", "fill the fuel tank"), ("check_tire_pressure", "check the tire pressure")]]
    tools = all_tools(40) + servers
    p = policy(tmp_path, top_k=2, sibling_boost=0.0)
    ask = user("Please start the engine of my car.")
    ex = exchange(ask, tools, session="before")
    await p.on_request(ex)
    assert "car__press_brake_pedal" not in names(ex.tools)
    for i in range(4):  # sessions in which agents pressed the brake before starting the engine
        await p.on_request(exchange(step_of(step_of(ask, "car__press_brake_pedal"), "car__start_engine"), tools, session=f"u{i}"))
    ex = exchange(ask, tools, session="after")
    await p.on_request(ex)
    assert "car__press_brake_pedal" in names(ex.tools)
    ex = exchange(ask, tools, session="other-tenant")
    ex.tenant = "globex"
    await p.on_request(ex)
    assert "car__press_brake_pedal" not in names(ex.tools)  # learned per tenant


async def test_past_server_focus_only_the_servers_in_play_join_the_list(tmp_path):
    def server(prefix: str, thing: str) -> list[dict[str, Any]]:
        return [tool(f"{prefix}__{n}", f"{thing.title()} control: {d} of the {thing}", []) for n, d in [
            ("start_engine", "start the engine"), ("stop_engine", "stop the engine"), ("lock_doors", "lock the doors"),
            ("check_fuel_level", "check the fuel level"), ("set_lights", "turn on the lights")]]
    tools = all_tools(40) + server("car", "car") + server("boat", "boat")
    ask = user("Start the engine of my car, then lock the doors of the car.")
    forwarded = {}
    for focus in (0, 2):
        # twins off: the car's and the boat's `start_engine` are twins by name and words (twins.py), and this is about focus
        p = policy(tmp_path / str(focus), min_k=2, max_k=12, gap=1.0, sibling_boost=0.0, usage_boost=0.0,
                   server_focus=focus, search_tool=False, twins=False)
        ex = exchange(ask, tools)
        await p.on_request(ex)
        forwarded[focus] = names(ex.tools)
    assert {"car__start_engine", "car__lock_doors"} <= set(forwarded[2])
    assert sum(not n.startswith("car__") for n in forwarded[0]) > 2  # without focus, other servers score alike
    assert sum(not n.startswith("car__") for n in forwarded[2]) <= 1  # with it: the best two, then the car's only
    assert {n for n in forwarded[0] if n.startswith("car__")} <= set(forwarded[2])


async def test_find_tools_adds_what_it_finds_and_says_what_was_wrong(tmp_path):
    p = policy(tmp_path)
    tools = all_tools() + [tool("get_tide_times", "Get high and low tide times for a beach.", ["beach"])]
    ex = exchange(user("Book a taxi to the airport this afternoon."), tools)
    await p.on_request(ex)
    search = ex.proxy_tools["find_tools"]
    assert search.owner == "tools" and "get_tide_times" not in names(ex.tools)
    assert ex.notes.proxy_tool_rounds == p.config.max_inner_rounds
    before = names(ex.tools)
    text = await search.handler(ex, json.dumps({"query": "tide times at a beach"}))
    assert "- get_tide_times:" in text and "[added]" in text
    assert names(ex.tools)[: len(before)] == before and "get_tide_times" in names(ex.tools)[len(before):]
    assert actions(ex)["search"]["query"] == "tide times at a beach"
    assert "invalid" not in actions(ex) and await search.handler(ex, "{}") and "search_invalid" in actions(ex)
    nxt = exchange(step_of(user("Book a taxi to the airport this afternoon."), "book_taxi"), tools)
    await p.on_request(nxt)
    assert "get_tide_times" in names(nxt.tools)  # kept from the next step on


async def test_no_search_tool_when_tool_choice_rules_it_out_or_it_is_off(tmp_path):
    for kwargs, body in [({}, {"tool_choice": "none"}), ({}, {"tool_choice": {"type": "function", "function": {"name": "book_taxi"}}}),
                         ({"search_tool": False}, {})]:
        p = policy(tmp_path, **kwargs)
        ex = exchange(user("Book a taxi to the airport."), all_tools(), **body)
        await p.on_request(ex)
        assert "find_tools" not in ex.proxy_tools, (kwargs, body)
