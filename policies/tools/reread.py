"""`find_tools`' second reading: the best matches of the model's query read again by a contextual embedder.

The policy ranks tools with a static word-vector model (wordllama by default): ~0.1 ms a text, fast
enough to rank a 500-tool catalog on every request, but it reads a query as a bag of topic words. A
search is rarer and explicit: the model wrote what it wants ("server: web scraping. tool: fetch a URL
as plain text"), and a contextual model trained on query-passage pairs (MiniLM) reads that better.
So the first ranking's top `search_candidates` tools are read again: each one's score gains
`search_reader_weight` times the MiniLM cosine of the query and the tool's definition, and the
results are the best of that sum.

Measured on the dev tasks (weight 0 is no second reading), first with 30 candidates read by their
first 1,000 characters:
- LiveMCPBench, real agents' own search words (bench/mcp_tools.py): the tool the agent called next
  among the search's results 0.622 → 0.671 at weight 1-2 (0.683 at 4-8); calls that found their tool
  available 0.902 → 0.910 (1), 0.915 (2), 0.917 (4);
- BFCL, whose searches are the user's turn (bench/tool_agent.py, cold / warm): 0.930 / 0.949 →
  0.941 / 0.953 (1), 0.939 / 0.945 (2), 0.928 / 0.943 (4).
Weight 2 is the compromise: a real agent's search reads better, the user's turn about as before. 15, 30
or 60 candidates gave the same figures; the first search over a catalog then cost 2-4 s, so the
defaults read 15 candidates by their first 300 characters (0.1-0.35 s): LiveMCPBench 0.912, probes
0.671; BFCL 0.932 / 0.951. Held-out, run once: LiveMCPBench 0.824 → 0.840, BFCL 0.923 / 0.937 →
0.941 / 0.946.

Cost: the query (~6 ms on one core) and the candidates' definitions the embedder has not read
before (its cache keeps them by text), and only in the `find_tools` round, never in the selection of
an ordinary request.
"""

from __future__ import annotations

import numpy as np

from ..base import Embedder, embed_array

# A contextual model's cost grows with length (it reads at most 256 tokens, ~1,000 characters of prose):
# a tool is read by the head of its definition (its name and first clauses say what it does; 300 and 500
# gave the figures of 1,000 at a fraction of the cost), a query by what a model writes as one.
QUERY_CHARS = 600
DOCUMENT_CHARS = 300


def reread(embedder: Embedder, query: str, documents: list[str], weight: float) -> np.ndarray:
    """What the second reading adds to each candidate's score: weight × cosine(query, its definition).
    CPU-bound: run it in a worker thread."""
    if not documents:
        return np.zeros(0, dtype=np.float32)
    vectors = embed_array(embedder, [query[:QUERY_CHARS], *(d[:DOCUMENT_CHARS] for d in documents)])
    vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    return weight * (vectors[1:] @ vectors[0])
