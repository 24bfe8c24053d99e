"""Catalogs of many MCP servers: twins (one function on two servers) travel together, and a server the
session already called ranks its other tools up (twins.py, servers.in_use)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ctxwarden.policies.tools.servers import in_use
from ctxwarden.policies.tools.twins import find_twins, name_words, with_twins
from tests.test_tools_policy import exchange, policy, step_of, user
from tests.tools_fixtures import all_tools, names, tool


def _files(server: str) -> list[dict[str, Any]]:
    return [tool(f"{server}__write_file", "Create a new file or overwrite an existing file with new text content.", ["path", "content"]),
            tool(f"{server}__read_file", "Read the complete contents of a file from the file system.", ["path"]),
            tool(f"{server}__list_directory", "List the files and folders in a directory.", ["path"])]


def _catalog() -> list[dict[str, Any]]:
    search = [tool(f"{s}__search", f"Search {what}.", ["query"]) for s, what in
              [("news", "news stories on the web"), ("stocks", "stock tickers and companies"), ("papers", "scientific papers")]]
    return all_tools(40) + _files("filesystem") + _files("desktop-commander") + search


def test_name_words_leave_the_server_out():
    assert name_words("desktop-commander__write_file") == {"write", "file"}
    assert name_words("hackernews__getUserSubmissions") == {"get", "user", "submissions"}
    assert name_words(None) == frozenset()


async def test_twins_are_the_same_function_on_other_servers_never_a_generic_name(tmp_path):
    p = policy(tmp_path)
    tools = _catalog()
    index, _, _ = p._index(tools, None)
    twins = p.twins(index)
    of = {index.names[i]: {index.names[j] for j in twins[i]} for i in range(len(tools))}
    assert of["filesystem__write_file"] == {"desktop-commander__write_file"}
    assert of["desktop-commander__read_file"] == {"filesystem__read_file"}
    assert not of["news__search"] and not of["stocks__search"]  # `search` alone says nothing about what is searched
    assert not of["filesystem__read_file"] & {"filesystem__write_file", "filesystem__list_directory"}  # siblings aren't twins


def test_without_vectors_or_servers_there_are_no_twins():
    groups = np.array([0, 1])
    assert find_twins(["a__write_file", "b__write_file"], groups, None) == [(), ()]
    vectors = np.array([[1.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    assert find_twins(["write_file_a", "write_file_b"], np.array([-1, -1]), vectors) == [(), ()]
    assert with_twins([1, 0], [(1,), (0,)]) == [1, 0]


async def test_a_twin_of_a_selected_tool_is_forwarded_too(tmp_path):
    tools = _catalog()
    ask = user("Write the meeting notes into a new file notes.txt.")
    forwarded = {}
    for on in (False, True):
        p = policy(tmp_path / str(on), twins=on, min_k=1, max_k=1, search_tool=False)
        ex = exchange(ask, tools)
        await p.on_request(ex)
        forwarded[on] = names(ex.tools)
    pair = {"filesystem__write_file", "desktop-commander__write_file"}
    assert len(pair & set(forwarded[False])) == 1  # one of the two ranks first
    assert pair <= set(forwarded[True])


async def test_find_tools_brings_the_twins_of_what_it_found(tmp_path):
    p = policy(tmp_path, search_results=1)
    tools = _catalog()
    ex = exchange(user("Book a taxi to the airport this afternoon."), tools)
    await p.on_request(ex)
    text = await ex.proxy_tools["find_tools"].handler(ex, json.dumps({"query": "read the contents of a file"}))
    added = {"filesystem__read_file", "desktop-commander__read_file"}
    assert added <= set(names(ex.tools))
    assert all(f"- {n}:" in text for n in added)


def test_in_use_marks_the_called_servers_tools():
    groups = np.array([0, 0, 1, 1, -1, -1])
    assert in_use(groups, [2]).tolist() == [0, 0, 1, 1, 0, 0]
    assert in_use(groups, [4]).tolist() == [0, 0, 0, 0, 1, 0]  # a tool with no server: only itself
    assert in_use(groups, []).tolist() == [0] * 6


async def test_a_request_using_a_server_gets_its_other_tools_ranked_up(tmp_path):
    tools = all_tools(40) + [tool(f"wiki__{n}", d, ["title"]) for n, d in [
        ("search_pages", "Search the encyclopedia for articles matching a query."),
        ("extract_key_facts", "Extract the key facts of an article."),
        ("summarize_article", "Summarize an article for a question."),
        ("get_related_topics", "Topics linked from an article.")]]
    convo = step_of(user("Tell me about the history of the bicycle."), "wiki__search_pages", "Bicycle (article)")
    scores = {}
    for boost in (0.0, 0.3):
        p = policy(tmp_path / str(boost), server_boost=boost, sibling_boost=0.0, usage_boost=0.0, popularity_boost=0.0)
        index, _, _ = p._index(tools, None)
        ranked, _ = p._rank(index, p_step(convo, tools), [index.positions["wiki__search_pages"]], [], None)
        scores[boost] = ranked.scores
    gain = scores[0.3] - scores[0.0]
    wiki = np.array([n.startswith("wiki__") for n in index.names])
    assert np.allclose(gain[wiki], 0.3) and np.allclose(gain[~wiki], 0.0)
    # a new user request may leave the server: its boost holds for the request that called it
    later = [*convo, {"role": "assistant", "content": "It was invented in 1817."}, *user("Now book me a taxi.")]
    ranked, _ = p._rank(index, p_step(later, tools), [index.positions["wiki__search_pages"]], [], None)
    p0 = policy(tmp_path / "p0", server_boost=0.0, sibling_boost=0.0, usage_boost=0.0, popularity_boost=0.0)
    unboosted, _ = p0._rank(p0._index(tools, None)[0], p_step(later, tools), [index.positions["wiki__search_pages"]], [], None)
    assert np.allclose(ranked.scores, unboosted.scores)
    other = [i for i in np.argsort(-scores[0.3], kind="stable") if index.names[i] != "wiki__search_pages"]
    assert {index.names[i] for i in other[:3]} == {"wiki__extract_key_facts", "wiki__summarize_article", "wiki__get_related_topics"}

def p_step(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    from ctxwarden.policies.tools.policy import Step

    return Step(tools, messages, None, "gpt-4o", None, "s", compacted=False)
