"""The memory policy's configuration (`policies.memory`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..base import PolicyConfig

Kind = Literal["preference", "fact", "instruction", "constraint"]
KINDS: tuple[str, ...] = ("preference", "fact", "instruction", "constraint")
SCOPES: tuple[str, ...] = ("private", "shared")


class MemoryConfig(PolicyConfig):
    min_score: float = Field(0.7, ge=0, le=2)  # calibrated relevance + bonuses a memory needs to be injected
    top_k: int = Field(5, ge=1, le=50)  # memories injected at most per request
    # ... and only those whose relevance is within `margin` of the most relevant one: memories on the
    # request's topic sit close to the best match; one far below it is about something else even when
    # it passes min_score (bench/memories.py, selection: precision@5 0.59 -> 0.61, recall@5 0.42 -> 0.41,
    # unrelated requests given a block 0.12 either way; 0.10 gave 0.66 / 0.40 but dropped one of two hotel
    # preferences the user kept both of, 0.78 and 0.89 for "find me a hotel"). 1 turns it off.
    margin: float = Field(0.15, ge=0, le=1)
    # Once a user has 20 live memories, one must also stand out from them (select.py, "distinct"): its
    # cosine's z-score over them must reach this + sqrt(2 ln n), about where the best of n unrelated
    # memories lands by chance. Higher: fewer blocks, each more likely on topic. 0.5 was chosen on
    # bench/memories.py (precision@5 0.61 -> 0.93, recall@5 0.41 -> 0.25; 300 ShareGPT requests of one
    # user given a block 92 % -> 15 %) and the dev part of bench/memory_outside.py (its own chit-chat
    # turns given a block 99 % -> 38 %). 1.0 since (harm first): CRI's chit-chat turns given a block
    # 19 % -> 8 % with its dev precision / recall unchanged (0.12 / 0.06), ShareGPT 22 -> 14 blocks of
    # 300; the labelled selection 0.93 / 0.25 -> 1.00 / 0.18, 15 -> 10 blocks (README). -10 turns it off.
    min_distinct: float = Field(1.0, ge=-10, le=10)
    # A memory must also stand out from its own background (background.py): the request's cosine with it,
    # as a z-score over its cosines with 500 ordinary requests, must reach this. It holds from a user's
    # first memory, where the distinct gate cannot. 1.5 chosen on bench/memories.py: 3 x 100 ShareGPT first
    # messages, each run as one new user, 39 -> 27 requests given a block; every labelled selection figure
    # kept (30 memories, and 5-15 of them as a new user). 2.5 gave 15 blocks but lost "I prefer budget
    # hotels" for "Find me a hotel in Rome" (z 1.9 with the static embedder). -10 turns it off.
    min_background_z: float = Field(1.5, ge=-10, le=20)
    # SELECT's choice is read again by this embedder (confirm.py), a contextual one where the policy's is
    # static: a memory is kept only when it passes min_score there too. "none": not read again (also when
    # it is the policy's own embedder, or cannot be built: said once in the log).
    confirm_with: Literal["minilm", "wordllama", "minilm+wordllama", "none"] = "minilm"
    # A memory's vector is its sentence read with the user turn it came from (writer.in_context):
    # unit(sentence + context_weight * turn), for turns of at most CONTEXT_CHARS (policy.py); 0: the
    # sentence alone. 2 chosen on the dev part of bench/memory_outside.py (README, memory).
    context_weight: float = Field(2.0, ge=0, le=20)
    max_tokens: int = Field(300, ge=10)  # tokens the injected block may take
    extract: Literal["local", "llm"] = "local"  # local: typed statements; llm: judge_model, strict JSON
    # The model `extract: llm` asks (required then). Unset in the user's config: poisoning.judge.model,
    # when that judge uses the proxy's upstream (proxy/config.py: inherit_settings).
    judge_model: str | None = None
    judge_timeout_s: float = Field(10, gt=0)
    # A longer user message is read by its head and its tail, ~1,000 characters each (text/window.py): a
    # pasted file costs a bounded time, and what is inside a paste (code, a document, a transcript) is
    # not the user telling about themselves. The user's own words go around it. On 900 ShareGPT first
    # messages sent as one user (bench/memories.py --ordinary), 8,000 wrote 572 memories and
    # blocked 107 requests, 2,000: 393 and 93. No turn of CRI or of the labelled sets is this long.
    analysis_max_chars: int = Field(2_000, ge=200)
    # Also read the tool results of each turn (those after the latest user message) for memories
    # (source "tool"). Off by default: a tool result is not the user's word, and what it says
    # would reach every later request; only `tool_result_kinds` are kept (by default no instruction
    # or constraint: a page saying "always ..." must not become a standing rule).
    tool_results: bool = False
    tool_result_kinds: list[Kind] = ["fact", "preference"]
    # Unset in the user's config: clash.strategy (proxy/config.py: inherit_settings).
    strategy: Literal["prefer_recent", "ask_user", "merge", "keep_existing"] = "prefer_recent"
    recent_s: float = Field(3600, ge=0)  # a memory younger than this scores recent_bonus more ...
    # ... The seed's 0.1 let a user's first memories, while they are under the distinct gate's 20, reach
    # requests about anything within their first hour (a pasted resume's lines, 0.5-0.6 relevant, on
    # "How important is tenacity for building wealth?"): on 900 ShareGPT first messages sent as one user
    # (bench/memories.py --ordinary) 93 requests got a block with it, 67 without. It bought nothing
    # measured: the labelled selection's memories are two days old, and CRI's users are past the gate.
    recent_bonus: float = Field(0.0, ge=0, le=1)
    profile_kinds: list[Kind] = ["instruction", "constraint"]  # kinds that hold whatever the topic ...
    # ... score this much more. The seed's 0.15 made standing rules ("no meetings before 10") reach
    # unrelated requests: 38 % of unrelated requests got a memory on bench/memories.py, 12 % with 0.
    profile_bonus: float = Field(0.0, ge=0, le=1)
    max_users: int = Field(10_000, ge=1)  # users whose memories are held in memory for search (LRU)
    refresh_s: float = Field(5, ge=0)  # re-read a user's memories from the store this often (other replicas' writes)
    max_sessions: int = Field(10_000, ge=1)  # sessions whose injected blocks are remembered (prefix stability)
    session_ttl_s: float = Field(3600, gt=0)  # ... and for how long an idle one is kept

    @model_validator(mode="after")
    def _llm_needs_a_model(self) -> "MemoryConfig":
        if self.extract == "llm" and not self.judge_model:
            raise ValueError("extract: llm needs judge_model (the model that extracts memories; poisoning.judge.model "
                             "is taken when set and served by the proxy's upstream, not by a judge.base_url)")
        return self
