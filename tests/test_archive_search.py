"""Search inside archived texts (policies/history/archive_search.py): chunks by content type, BM25
ranking that finds identifiers, stable order, caching and the text handed back to the model."""

from __future__ import annotations

import json
import random
import time

import pytest
from hypothesis import given, settings, strategies as st

from ctxwarden.policies.history import archive_search
from ctxwarden.policies.history.archive_search import RENDER_CHARS, ArchiveSearch, Hit, chunks, render_hits

# ---------------------------------------------------------------------------- archived texts, seeded


def orders(n: int, first_id: int, seed: int) -> str:
    rng = random.Random(seed)
    return json.dumps({"total": n, "page": 1, "orders": [{
        "id": f"ORD-{first_id + i}",
        "customer": {"id": f"C{rng.randint(100, 999)}", "name": rng.choice(["Ada Lee", "Bo Chan", "Cyra Diaz"])},
        "amount": round(rng.uniform(5, 900), 2),
        "status": rng.choice(["paid", "open", "refunded"]),
        "items": [{"sku": f"SKU-{rng.randint(1, 300)}", "qty": rng.randint(1, 4)} for _ in range(rng.randint(1, 3))],
    } for i in range(n)]})


def worker_log(seed: int, lines: int = 400, special: str | None = None) -> str:
    rng = random.Random(seed)
    out = [f"2024-05-01T12:{i // 60 % 60:02d}:{i % 60:02d} INFO worker-{rng.randint(1, 40)} "
           f"job {rng.randint(1, 10**6)} done in {rng.randint(1, 900)} ms" for i in range(lines)]
    if special:
        out[lines // 2] = special
    return "\n".join(out)


def python_source(seed: int, functions: int = 25) -> str:
    rng = random.Random(seed)
    out = ["import json", "from decimal import Decimal", ""]
    for k in range(functions):
        name = f"{rng.choice(['compute', 'load', 'apply'])}_{rng.choice(['invoice', 'refund', 'tax'])}_{seed}_{k}"
        out += ["", f"def {name}(record):", f'    """Step {k}."""', "    total = Decimal(0)"]
        out += [f"    total += Decimal(record.amount) * {rng.randint(1, 99)}" for _ in range(rng.randint(4, 12))]
        out += ["    return total", ""]
    return "\n".join(out)


def prose(seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(f"Meeting note {i}: the team discussed topic {rng.randint(1, 400)} and the weather in town "
                    f"{rng.randint(1, 50)}." for i in range(270))


def archive(n_docs: int = 200, target_at: int = 137) -> dict[str, str]:
    """About 20 KB per text: order lists (other ids), worker logs, code and notes; one order list
    holds ORD-4711 deep inside."""
    docs: dict[str, str] = {}
    for d in range(n_docs):
        kind = d % 4
        if d == target_at:
            docs[f"ar_{d:03d}"] = orders(120, 4600, seed=d)  # ORD-4711 is orders[111]
        elif kind == 0:
            docs[f"ar_{d:03d}"] = orders(110, 10_000 + d * 200, seed=d)
        elif kind == 1:
            docs[f"ar_{d:03d}"] = worker_log(d, special="2024-05-01T12:03:20 WARN worker-1717 heartbeat missed"
                                             if d == 41 else None)
        elif kind == 2:
            docs[f"ar_{d:03d}"] = python_source(d, functions=48)
        else:
            docs[f"ar_{d:03d}"] = prose(d)
    return docs


@pytest.fixture(scope="module")
def docs() -> dict[str, str]:
    return archive()


@pytest.fixture(scope="module")
def searcher(docs) -> ArchiveSearch:
    search = ArchiveSearch()
    search.search(docs, "warm up", 1)
    return search


# ---------------------------------------------------------------------------- finding things


@pytest.mark.parametrize("query", ["order 4711", "the order with id ORD-4711", "ORD-4711", "ord-4711 status?"])
def test_a_json_item_deep_in_an_array_is_the_top_hit(searcher, docs, query):
    hits = searcher.search(docs, query, 5)
    assert hits[0].ref == "ar_137"
    assert hits[0].chunk.startswith('orders[111]: {"id":"ORD-4711",')
    assert hits[0].score > hits[1].score


def test_a_log_line_is_found_by_its_worker_name(searcher, docs):
    hits = searcher.search(docs, "what happened to worker-1717", 3)
    assert hits[0].ref == "ar_041" and "WARN worker-1717 heartbeat missed" in hits[0].chunk
    assert hits[0].chunk.startswith("lines ")


def test_a_function_is_found_by_its_name(searcher, docs):
    source = docs["ar_090"]
    name = source.split("def ", 8)[8].split("(")[0]
    hits = searcher.search(docs, name, 3)
    assert hits[0].ref == "ar_090" and f"def {name}(record):" in hits[0].chunk


def test_results_are_stable_across_instances_and_insertion_order():
    docs = archive(40, target_at=20)
    reversed_docs = dict(reversed(list(docs.items())))
    first, again = ArchiveSearch(), ArchiveSearch()
    for query in ("order 4711", "Ada Lee refunded", "topic 42", "total Decimal", "worker-7 job"):
        hits = first.search(docs, query, 8)
        assert hits and hits == again.search(reversed_docs, query, 8) == first.search(docs, query, 8)


def test_ties_rank_in_ref_then_chunk_order():
    same = '{"rows": [{"name": "alpha"}, {"name": "alpha"}]}'
    hits = ArchiveSearch().search({"ar_b": same, "ar_a": same}, "alpha", 4)
    assert [(h.ref, h.chunk[:7]) for h in hits] == [("ar_a", "rows[0]"), ("ar_a", "rows[1]"), ("ar_b", "rows[0]"),
                                                    ("ar_b", "rows[1]")]
    assert len({h.score for h in hits}) == 1


@pytest.mark.parametrize("query", ["", "   ", "!!! ??? ...", "the of and", "zzqxw-nothing", "\x00\x01", "🙂" * 50])
def test_empty_or_garbage_queries_find_nothing_without_crashing(searcher, docs, query):
    assert searcher.search(docs, query, 5) == []


def test_no_docs_or_empty_docs_find_nothing():
    search = ArchiveSearch()
    assert search.search({}, "order 4711", 5) == []
    assert search.search({"ar_x": ""}, "order 4711", 5) == []
    assert search.search({"ar_x": "order 4711"}, "order 4711", 0) == []
    assert search.search({"ar_x": "---\n\n...", "ar_y": "{}"}, "order", 3) == []  # no words at all


# ---------------------------------------------------------------------------- chunks


def test_json_chunks_are_items_with_their_path_plus_the_scalars():
    found = chunks(orders(5, 100, seed=1))
    assert found[0] == 'top-level: {"total":5,"page":1}'
    assert [c.split(": ", 1)[0] for c in found[1:]] == [f"orders[{i}]" for i in range(5)]
    assert json.loads(found[3].split(": ", 1)[1])["id"] == "ORD-102"


def test_log_code_and_text_chunks():
    log = chunks(worker_log(1, lines=23))
    assert len(log) == 5 and log[0].startswith("lines 1-5:") and log[-1].startswith("lines 21-23:")
    source = python_source(3, functions=3)
    code = chunks(source)
    defs = [line for line in source.splitlines() if line.startswith("def ")]
    assert len(code) == 4 and code[0].startswith("lines 1-4:\nimport json\n")
    assert [c.split("\n")[1] for c in code[1:]] == defs  # one chunk per function, from its def
    text = chunks(prose(2))
    assert len(text) > 5 and all(len(c) <= archive_search.CHUNK_CHARS for c in text)
    assert all(250 <= len(c) <= 700 for c in text[:-1])


def test_a_transcript_is_cut_per_message_and_its_json_results_per_item():
    rows = [{"id": i, "sku": f"SKU-{i:05d}", "name": f"Widget {i}"} for i in range(60)]
    clipped = json.dumps({"results": rows})[:1500] + " … [3000 more characters]"
    transcript = "\n".join([
        "user: find widgets for the Porto store",
        'assistant called search_catalog({"q": "widgets"})',
        "tool search_catalog result: " + json.dumps({"total": 2, "results": rows[:2]}),
        "tool search_catalog result: " + clipped,
        "assistant: I found 60 widgets. The cheapest is Widget 3.",
    ])
    found = chunks(transcript)
    assert found[0] == "user: find widgets for the Porto store"
    assert 'tool search_catalog result top-level: {"total":2}' in found
    assert 'tool search_catalog result results[1]: {"id":1,"sku":"SKU-00001","name":"Widget 1"}' in found
    salvaged = [c for c in found if c.startswith("tool search_catalog result results[") and "SKU-000" in c]
    assert len(salvaged) > 20  # the clipped result's whole items
    hits = ArchiveSearch().search({"hs_span": transcript}, "SKU-00017", 2)
    assert hits[0].chunk.endswith('{"id":17,"sku":"SKU-00017","name":"Widget 17"}')


# ---------------------------------------------------------------------------- speed and caching


def test_repeated_searches_over_200_texts_of_20_kb_are_fast(docs, searcher):
    assert 200 * 18_000 < sum(map(len, docs.values())) < 200 * 25_000
    started = time.perf_counter()
    for query in ("order 4711", "worker-1717", "Ada Lee", "topic 42 weather"):
        assert searcher.search(docs, query, 5)
    assert (time.perf_counter() - started) / 4 < 0.1


def test_chunking_is_cached_per_text(monkeypatch):
    calls = []
    real = archive_search._pieces
    monkeypatch.setattr(archive_search, "_pieces", lambda text: calls.append(text) or real(text))
    search = ArchiveSearch()
    docs = {"ar_1": orders(30, 1, seed=1), "ar_2": worker_log(2, lines=50)}
    search.search(docs, "ORD-7", 3)
    search.search(docs, "worker", 3)
    assert len(calls) == 2
    search.search({**docs, "ar_3": prose(3)}, "ORD-7", 3)  # a new text: only it is cut
    assert len(calls) == 3


# ---------------------------------------------------------------------------- rendering


def test_render_hits_names_refs_and_stays_within_its_bound():
    hits = [Hit(f"ar_{i}", f"orders[{i}]: " + "x" * 3000, 10.0 - i) for i in range(10)]
    text = render_hits(hits)
    assert len(text) <= RENDER_CHARS
    lines = text.splitlines()
    assert lines[1].startswith("ref=ar_0: orders[0]: ") and lines[2].startswith("ref=ar_1: ")
    assert render_hits([]) == "no archived content matches the query."
    short = render_hits(hits, limit=500)
    assert len(short) <= 500 and [line[:9] for line in short.splitlines()[1:]] == ["ref=ar_0:"]


# ---------------------------------------------------------------------------- an id asked about, in a long chunk


def _link_page(fact: str, at: int) -> str:
    """A fetched web page as an agent's tool gets it: a run of links with no sentence end, so its
    chunks are the longest there are (CHUNK_CHARS), and one line of it states a record."""
    links = [f"* [Section {i}](/news/section-{i})" for i in range(300)]
    links.insert(at, fact)
    return "Contents of https://example.org/news:\n" + " ".join(links)


def _records_among_pages() -> dict[str, str]:
    """20 short results that each state another reference's code in the same words, 40 pages of
    unrelated rows, and one long page holding the reference asked about."""
    rng = random.Random(5)
    docs = {f"ar_{i:02d}": f"Confirmation code for reference REF-{rng.randint(100000, 999999)}: {rng.randint(100, 999)}-X."
            for i in range(20)}
    for d in range(40):
        docs[f"ar_bg{d:02d}"] = " ".join(f"Row {d}-{i}: the station at km {rng.randint(1, 900)} reported "
                                         f"{rng.randint(1, 50)} trains on time." for i in range(40))
    docs["ar_page"] = _link_page("confirmation code for reference REF-298115: E08-MYGW", at=110)
    return docs


QUESTION = "What is the confirmation code for reference REF-298115?"


def test_the_chunk_holding_the_id_asked_about_ranks_first_however_long_it_is():
    # BM25 alone ranked the 20 short results first: they share the question's other words, and the
    # page's 2,000-character chunk is scored down for its length.
    docs = _records_among_pages()
    chunk = next(c for c in chunks(docs["ar_page"]) if "REF-298115" in c)
    assert len(chunk) > 1900
    hits = ArchiveSearch().search(docs, QUESTION, 5)
    assert hits[0].ref == "ar_page" and "E08-MYGW" in hits[0].chunk
    assert [h.ref for h in hits[1:]] == ["ar_00", "ar_01", "ar_02", "ar_03"]  # then the rest, by BM25


def test_a_long_hit_is_shown_around_what_the_query_names():
    docs = _records_among_pages()
    hits = ArchiveSearch().search(docs, QUESTION, 1)
    assert hits[0].chunk.index("E08-MYGW") > archive_search.HIT_CHARS  # past what a head would show
    shown = render_hits(hits, query=QUESTION)
    assert "REF-298115: E08-MYGW" in shown and "ref=ar_page: …" in shown
    assert len(shown.splitlines()[1]) <= len("ref=ar_page: ") + archive_search.HIT_CHARS
    assert "E08-MYGW" not in render_hits(hits)  # no query: the head, as before
    labelled = Hit("ar_y", "results[41]: " + "x " * 750 + "REF-298115: E08-MYGW " + "y " * 200, 1.0)
    line = render_hits([labelled], query=QUESTION).splitlines()[1]  # where the part is stays in view
    assert line.startswith("ref=ar_y: results[41]: …") and "E08-MYGW" in line
    short = Hit("ar_x", "REF-298115 is near the start " + "x" * 3000, 1.0)
    assert render_hits([short], query=QUESTION).splitlines()[1].startswith("ref=ar_x: REF-298115 is near")


@settings(max_examples=300, deadline=None)
@given(chunk=st.text(alphabet=st.sampled_from(list("ab ref-12:\n[]résumé🙂")), max_size=4000),
       query=st.text(alphabet=st.sampled_from(list("ab ref-12 ?")), max_size=40))
def test_a_shown_hit_is_bounded_and_made_of_the_chunk(chunk, query):
    line = render_hits([Hit("ar_f", chunk, 1.0)], query=query).split("\n", 1)[1]
    shown = line[len("ref=ar_f: "):]
    assert len(shown) <= archive_search.HIT_CHARS
    for piece in shown.split("…"):  # what is not an ellipsis the hit added is the chunk's own text
        assert piece in chunk
