"""The policy surface: Exchange, verdicts, Answer and the services a policy may use.

A policy sees one chat-completion exchange. On the way in it may replace `ex.messages` or
`ex.tools` (assign new lists; never mutate the client's dicts in place, so the proxy can tell
an untouched request and forward its bytes unchanged). On the way out it judges the answer.

This module is the whole contract between the proxy and the policies: `policies/` never
imports `proxy/`; the proxy hands every policy a `Services` bundle instead.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar, Literal, Protocol, Sequence, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from .errors import check_name
from .messages import Message, Tool

Pressure = Literal["none", "compress", "aggressive"]


# ----------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Reject:
    """Refuse the request (or answer) with an OpenAI-shaped error."""

    status: int
    code: str
    message: str
    param: str | None = None
    type: str = "invalid_request_error"


@dataclass(frozen=True)
class Respond:
    """Answer the client from the proxy (upstream not called), marked as such: the body carries
    `"ctxwarden": {"author": "proxy", "reason": reason}` and the text's first words say so."""

    content: str
    reason: str = ""  # machine-readable cause, e.g. "loops.stop"
    finish_reason: str = "stop"  # "content_filter" where the proxy cut a run short (a stopped loop)


@dataclass(frozen=True)
class Block:
    """Withhold an answer: the client gets `notice` with finish_reason "content_filter"."""

    reason: str
    notice: str


Verdict = Reject | Respond | Block


# ----------------------------------------------------------------------------- services


class TokenCounter(Protocol):
    def count_text(self, text: str, model: str) -> int: ...
    def count_message(self, message: Message, model: str) -> int: ...
    def count_messages(self, messages: Sequence[Message], model: str) -> int: ...
    def count_tools(self, tools: Sequence[Tool] | None, model: str) -> int: ...


class Embedder(Protocol):
    """Text → unit-length vectors. Synchronous and CPU-bound: call it via asyncio.to_thread."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def embed_array(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """The vectors as one float32 array (len(texts), dim): through the embedder's own `embed_array` when
    it has one (the proxy's do), never as Python floats on the way (a request with hundreds of tools
    embeds thousands of segments: as lists ~3x the peak memory and ~2.7x the time)."""
    fast = getattr(embedder, "embed_array", None)
    if callable(fast):
        return fast(list(texts))
    return np.asarray(embedder.embed(list(texts)), dtype=np.float32)


class Store(Protocol):
    """Persistent vector collections (Chroma). Always pass your own embeddings."""

    def collection(self, name: str, tenant: str | None = None) -> Any: ...


class Metrics(Protocol):
    """Counters (`add`), histograms (`record`) and gauges, exported at /metrics and to the telemetry
    exporter. Names are dotted (`ctxwarden.<policy>.<what>`; dots become underscores in Prometheus).
    Durations: measure in milliseconds with a name ending in `_ms` (`ctxwarden.x.duration_ms`); the
    proxy exports it in seconds, the base unit, as the same name ending in `_seconds`
    (`ctxwarden_x_duration_seconds`, value / 1000, buckets for latencies). Label values should be
    few: every distinct combination is a series of its own."""

    def add(self, name: str, value: float = 1, **attributes: Any) -> None: ...
    def record(self, name: str, value: float, **attributes: Any) -> None: ...
    def gauge(self, name: str, value: float, **attributes: Any) -> None: ...


# complete(model, messages, **kwargs) → the assistant's text. Raises on failure.
Complete = Callable[..., Awaitable[str]]
# complete_raw(model, messages, **kwargs) → the upstream's whole response JSON (choices, usage), for
# callers that account tokens (the poisoning judge). Raises on failure, like `complete`.
CompleteRaw = Callable[..., Awaitable[dict[str, Any]]]


@dataclass
class Services:
    tokens: TokenCounter
    metrics: Metrics
    embedder: Embedder | None = None
    store: Store | None = None
    complete: Complete | None = None
    complete_raw: CompleteRaw | None = None
    context_window: Callable[[str], int] = lambda model: 128_000
    versions: Any = None  # content versions every replica sees (a state.Versions: the state backend); None: none
    embedder_named: Callable[[str], Embedder] | None = None  # another embedder by provider ("minilm"); may raise
    # Objects the policies of one pipeline share (e.g. the scratchpad history and archive both use).
    # A policy's own copy of Services (its own embedder) keeps the same dict, so sharing survives it.
    shared: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- exchange


@dataclass
class ProxyTool:
    """A tool the proxy adds to the request and answers itself (e.g. context_recall)."""

    definition: Tool
    handler: Callable[["Exchange", str], Awaitable[str]]  # (exchange, raw JSON arguments) → tool result
    owner: str = ""  # the policy whose actions report this tool (e.g. "archive" for context_recall)

    @property
    def name(self) -> str:
        return self.definition["function"]["name"]


@dataclass
class Action:
    policy: str
    name: str  # e.g. "summarize" → reported as "history.summarize"
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.policy}.{self.name}"


@dataclass
class BudgetNote:
    """The request's token count as the budget policy measured it."""

    tokens_before: int = 0
    tokens_after: int | None = None
    window: int = 0
    components: dict[str, int] = field(default_factory=dict)
    compress_at: int | None = None  # request tokens at which compaction starts (budget.compress × window)
    target_at: int | None = None  # ... and down to which it compacts (budget.target × window)
    aggressive_at: int | None = None
    reject_at: int | None = None  # past this after the policies ran, the request is refused (budget.reject × window)


@dataclass
class RequestNotes:
    """What the proxy and the policies of one request leave each other: typed, one field a fact."""

    upstream_headers: dict[str, str] = field(default_factory=dict)  # set by the proxy: what it forwards with
    verdict_by: str | None = None  # the policy whose verdict ended the exchange (set by the pipeline)
    proxy_tool_rounds: int | None = None  # how many proxy-tool rounds this request may take (None: the proxy's)
    budget: BudgetNote | None = None
    history: dict[str, int] | None = None  # tokens_before, tokens_after, blocks: when history compacted
    answer_checked: bool = False  # poisoning judged the answer; `answer_kind` is its type when poisoned
    answer_kind: str | None = None
    validation: dict[str, Any] | None = None  # the answer's quality scores, as poisoning reported them
    extra: dict[str, Any] = field(default_factory=dict)  # third-party policies: key by your policy name
    started: float = 0.0  # time.perf_counter() when the proxy received the request (set by the proxy)
    usage_added: bool = False  # the proxy asked a stream for usage the client did not ask for (and strips it)
    session_docs: dict[str, str] | None = None  # the session's state as the shared backend holds it (None: local)
    # set by the proxy when the client disconnects: work in worker threads checks it (deadline.Deadline) and stops
    cancelled: threading.Event = field(default_factory=threading.Event)
    # notes to the model the pipeline appends after every request policy ran (messages.append_note), so no
    # later policy takes a note for the user's latest words; in the order given
    end_notes: list[str] = field(default_factory=list)
    wire: Any = None  # the request in its API's own shape, as the proxy parsed it (the proxy's; policies never read it)
    api: str = "chat"  # the API the client spoke: chat | responses | messages (reports and the dashboard)
    usage: dict[str, int] = field(default_factory=dict)  # tokens the upstream reported for this request (the proxy's)
    # (the forwarded message list, its messages' keys): made by the pipeline within the request's memo, so a
    # session's step keys only its new messages; the proxy's prefix watch compares them with the last step's
    forwarded_keys: tuple[list, list[str]] | None = None
    # (a copy of a message list, the sum of its messages' tokens): left by the policy that made the list, so the
    # next one to count it (the archive, after history compacted) need not read it again
    message_tokens: tuple[list, int] | None = None


# About 1 ms of tokenizing when nothing is cached yet. Below it, a worker-thread hop (≈0.1 ms with
# the GIL contended, and a context switch for every other request) costs more than the work it moves.
HEAVY_BODY_BYTES = 32_000


async def run_cpu(heavy: bool, fn: Callable[..., Any], /, *args: Any) -> Any:
    """`fn(*args)`: in a worker thread when the caller judges the work `heavy` (≳ 1 ms), else inline."""
    return await asyncio.to_thread(fn, *args) if heavy else fn(*args)


def user_and_task(ex: Exchange, check: bool = True) -> tuple[str, str]:
    """x-ctxwarden-user (else the OpenAI `user` field) and x-ctxwarden-task; "" for one not given.
    `check`: HintError for an invalid one (else each is taken as sent: still a scope, never an error)."""
    header = ex.headers.get("x-ctxwarden-user")
    user = header if header is not None else ex.body.get("user") if isinstance(ex.body.get("user"), str) else ""
    task = ex.headers.get("x-ctxwarden-task") or ""
    if check:
        user = check_name(user, "x-ctxwarden-user") if header is not None or user else ""
        task = check_name(task, "x-ctxwarden-task") if task else ""
    return user, task


@dataclass
class Exchange:
    """One chat-completion request on its way through the proxy."""

    request_id: str
    model: str
    messages: list[Message]
    tools: list[Tool] | None
    body: dict[str, Any]  # the client's whole body, as parsed; fields policies do not own pass through
    stream: bool = False
    tenant: str | None = None
    session_id: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # the client's x-ctxwarden-* hints, lower-case
    context_window: int = 128_000
    pressure: Pressure = "none"  # set by the budget policy
    target_tokens: int | None = None  # what compressing policies should bring the request down to
    proxy_tools: dict[str, ProxyTool] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    response_headers: dict[str, str] = field(default_factory=dict)
    notes: RequestNotes = field(default_factory=RequestNotes)
    original_messages: list[Message] = field(default=None)  # type: ignore[assignment]
    original_tools: list[Tool] | None = None
    body_bytes: int = 0  # the client's body as received: the cheap measure of how much work a request is

    def __post_init__(self) -> None:
        if self.original_messages is None:
            self.original_messages = self.messages
            self.original_tools = self.tools

    @property
    def session_key(self) -> tuple[str | None, str]:
        """The key of per-session state: the session within its tenant, so two tenants that send
        the same session id never share state."""
        return (self.tenant, self.session_id)

    @property
    def heavy(self) -> bool:
        """Big enough that whole-request CPU work (counting, planning, selecting) belongs off the event loop."""
        return self.body_bytes > HEAVY_BODY_BYTES

    @property
    def changed(self) -> bool:
        """True once a policy replaced the messages or tools (the body must be re-encoded)."""
        return self.messages is not self.original_messages or self.tools is not self.original_tools

    def record(self, policy: str, name: str, **detail: Any) -> Action:
        action = Action(policy, name, detail)
        self.actions.append(action)
        return action

    def action_labels(self) -> list[str]:
        seen: list[str] = []
        for a in self.actions:
            if a.label not in seen:
                seen.append(a.label)
        return seen

    def forwarded_tools(self) -> list[dict[str, Any]]:
        """The tools to forward (chat form): the proxy's own tools the list lacks, then the policies' list.
        The proxy's tools go first: the tools policy's list is append-only within a session, and a tool
        it adds must land at the end for the provider's cached prefix to hold. (context_recall joins
        at a compaction event, which rewrites the history anyway.)"""
        return self.proxy_tool_definitions() + list(self.tools or [])

    def proxy_tool_definitions(self) -> list[dict[str, Any]]:
        """The proxy's own tools that `forwarded_tools` puts before the policies' list (those it lacks)."""
        known = {(t.get("function") or {}).get("name") for t in self.tools or []} if self.proxy_tools else ()
        return [pt.definition for name, pt in self.proxy_tools.items() if name not in known]

    def outgoing_body(self) -> dict[str, Any]:
        """The body to forward: the client's fields, with the policies' messages and tools."""
        body = dict(self.body)
        body["messages"] = self.messages
        tools = self.forwarded_tools()
        if tools:
            body["tools"] = tools
        else:
            body.pop("tools", None)
            if self.body.get("tools"):  # every tool was removed: a tool_choice would be invalid
                body.pop("tool_choice", None)
                body.pop("parallel_tool_calls", None)
        return body


@dataclass
class Answer:
    """An assistant answer (or, while streaming, the next validated-to-be sentences of one)."""

    text: str
    message: Message | None = None  # the full assistant message when not streaming
    finish_reason: str | None = None
    partial: bool = False  # True: `text` is the next piece of a streamed answer
    prior_text: str = ""  # while streaming: everything already released to the client


# ----------------------------------------------------------------------------- policy


Outcome = Literal["ok", "rejected", "blocked", "responded", "cut"]
# An admin route a policy contributes: (path, method, async handler(params, json body) → (status, json)).
AdminRoute = tuple[str, str, Callable[[dict[str, Any], Any], Awaitable[tuple[int, Any]]]]


class PolicyConfig(BaseModel):
    """The base of every policy's config: strict (unknown keys are errors) and switchable."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True


@runtime_checkable
class Policy(Protocol):
    name: str

    async def on_request(self, ex: Exchange) -> Verdict | None: ...

    async def on_response(self, ex: Exchange, answer: Answer) -> Verdict | None: ...


class BasePolicy:
    """Every hook the proxy calls, declared here; the optional ones are no-ops.

    A policy sets `name` and `Config` (a `PolicyConfig`), and overrides what it needs:
      - `on_request(ex)` — edit `ex.messages` / `ex.tools` (new lists) or return a verdict;
      - `on_response(ex, answer)` — judge an answer; with `validates_stream = True` also each
        streamed sentence (`answer.partial`) before the proxy releases it;
      - `stream_releasable(ex, pending)` — with `validates_stream`: how much of a sentence still
        being streamed may go out before it is judged (default 0: hold the sentence to its end);
        `reads_answer(ex)` — whether this exchange's answer needs reading at all (default: yes);
      - `on_complete(ex, outcome)` — after the client got its answer;
      - `admin_routes()` — routes mounted under /admin/ behind the admin key;
      - `aclose()` — at shutdown.
    """

    name: ClassVar[str] = "base"
    Config: ClassVar[type[PolicyConfig]] = PolicyConfig
    validates_stream: ClassVar[bool] = False

    def __init__(self, config: Any, services: Services) -> None:
        self.config = config
        self.services = services

    async def on_request(self, ex: Exchange) -> Verdict | None:
        return None

    async def on_response(self, ex: Exchange, answer: Answer) -> Verdict | None:
        return None

    async def on_complete(self, ex: Exchange, outcome: Outcome) -> None:
        return None

    def stream_releasable(self, ex: Exchange, pending: str) -> int:
        """How many leading characters of `pending` (the unfinished sentence of a streamed answer)
        may reach the client now, before `on_response` judges the whole sentence. Called on the
        event loop for every chunk: answer from memory, in microseconds."""
        return 0

    def reads_answer(self, ex: Exchange) -> bool:
        """False when nothing in this exchange's answer could be judged (e.g. an empty knowledge
        base): `on_response` is not called and the answer, whole or streamed, passes through as the
        upstream sent it. Called once per request, on the event loop: answer from memory."""
        return True

    def admin_routes(self) -> list[AdminRoute]:
        return []

    async def aclose(self) -> None:
        return None

    def record(self, ex: Exchange, name: str, **detail: Any) -> Action:
        """Report what the policy did: an action for the header and span, and a metric."""
        self.services.metrics.add("ctxwarden.policy.actions", 1, policy=self.name, action=name)
        return ex.record(self.name, name, **detail)
