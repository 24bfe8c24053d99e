"""YAML configuration: load, merge over the embedded default, validate strictly.

Unknown keys and wrong types are errors that name the key's path and the file. Each policy
brings its own pydantic `Config` model (policies/<name>.py); this module checks the `policies:`
section against them, so a third-party policy's keys are validated the same way.
"""

from __future__ import annotations

import importlib.resources
import io
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ctxwarden.policies.budget import BudgetConfig
from ctxwarden.policies.errors import CtxwardenError


class ConfigError(CtxwardenError, ValueError):
    """A configuration problem, with every bad key listed by path."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"invalid configuration in {source}:\n" + "\n".join(f"  - {p}" for p in problems))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerConfig(Strict):
    host: str = "127.0.0.1"
    port: int = Field(8787, ge=0, le=65535)
    max_body_mb: float = Field(20, gt=0)
    max_header_kb: float = Field(64, gt=0)  # request line + headers larger than this → 431
    header_timeout_s: float = Field(10, gt=0)  # headers not complete this long after the request began → 408
    body_timeout_s: float = Field(30, gt=0)  # body not complete this long after its headers → 408
    # Every in-process cache together (token counts, verdicts, summaries, vectors, session states…),
    # split in proportion to each one's own bound (policies/cache.py, set_cache_budget).
    cache_mb: float = Field(128, gt=0)


class CircuitBreakerConfig(Strict):
    failure_threshold: int = Field(5, ge=1)
    cooldown_s: float = Field(30, gt=0)


class AnthropicUpstreamConfig(Strict):
    """Where POST /v1/messages goes: Anthropic's own API, or (base_url null) translated to chat
    completions on the main upstream."""

    base_url: str | None = "https://api.anthropic.com/v1"
    api_key_env: str | None = "ANTHROPIC_API_KEY"  # unset variable → the client's x-api-key passes through
    version: str = "2023-06-01"  # anthropic-version sent when the client sends none

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        url = urlparse(value.strip())
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError("must be an http:// or https:// URL with a host (or null: translate to chat completions)")
        return value.strip()


class UpstreamConfig(Strict):
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout_s: float = Field(120, gt=0)
    connect_timeout_s: float = Field(10, gt=0)
    max_response_mb: float = Field(64, gt=0)  # a plain answer bigger than this (or inflating past it) → 502
    retries: int = Field(2, ge=0)
    backoff_s: float = Field(0.25, ge=0)
    max_connections: int = Field(200, ge=1)
    # aiohttp: aiohttp's client and pool (upstream/native.py), half the cost per call of httpx's and
    # several times its requests/s under concurrency; httpx: httpx's client (what respx mocks in unit tests).
    http_client: Literal["aiohttp", "httpx"] = "aiohttp"
    circuit_breaker: CircuitBreakerConfig = CircuitBreakerConfig()
    anthropic: AnthropicUpstreamConfig = AnthropicUpstreamConfig()

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        url = urlparse(value.strip())
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError("must be an http:// or https:// URL with a host, e.g. https://api.openai.com/v1")
        return value.strip()


class ModelConfig(Strict):
    context_window: int = Field(..., gt=0)


class StorageConfig(Strict):
    path: str = ".ctxwarden"  # set in a config file: relative to that file's directory (load_settings)
    chroma_url: str | None = None
    # Embedded Chroma: vector indexes held in memory at once (~2.7 MB each, least recently used out).
    # Chroma's own default is the open-files limit / 5. Only writes use an index: reads take vectors
    # from the rows' metadata (proxy/stored_vectors.py), so eviction costs a write a reload, never data.
    # Chroma also keeps ~1.4 MB for each collection touched (up to ~165 MB), which this does not bound
    # (bench/chroma_memory.py); many tenants: storage.chroma_url.
    max_open_indexes: int = Field(16, ge=1)


class StateConfig(Strict):
    redis_url: str | None = None  # null → in-process (one process); redis://host:6379/0 shares session state between replicas
    session_ttl_s: float = Field(3600, gt=0)  # a session's shared state expires this long after its last write
    timeout_s: float = Field(0.25, gt=0)  # one Redis call; past it the proxy degrades to per-process state
    poll_s: float = Field(0.25, gt=0, le=1)  # how often content versions (and Redis's health) are read


class AdminConfig(Strict):
    api_key_env: str = "CTXWARDEN_ADMIN_KEY"


class AuthConfig(Strict):
    # keys: client keys required, the proxy's provider key sent; passthrough: the client's own provider
    # key goes upstream; open: the proxy's key, no client key (explicit). null: see proxy/keys/gate.py.
    mode: Literal["keys", "passthrough", "open"] | None = None


class DashboardConfig(Strict):
    show_content: bool = False  # the last requests on /dashboard show the last user message (off: never content)
    retention_days: float = Field(7, gt=0)  # per-minute aggregates kept in <storage.path>/dashboard.sqlite3


TelemetryExporter = Literal["otlp", "console", "none"]


class TelemetryConfig(Strict):
    service_name: str = "ctxwarden"
    otlp_endpoint: str | None = None  # e.g. http://collector:4318 (OTLP/HTTP; /v1/traces and /v1/metrics appended)
    # otlp: to otlp_endpoint | console: spans and metrics printed on stderr | none: nothing exported
    # (Prometheus text at /metrics either way). null: otlp when otlp_endpoint is set, else none.
    exporter: TelemetryExporter | None = None

    @field_validator("otlp_endpoint")
    @classmethod
    def _endpoint_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        url = urlparse(value.strip())
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError("must be an http:// or https:// URL with a host, e.g. http://collector:4318")
        return value.strip()

    @field_validator("exporter")
    @classmethod
    def _otlp_needs_an_endpoint(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value == "otlp" and not info.data.get("otlp_endpoint"):
            raise ValueError("otlp needs telemetry.otlp_endpoint (e.g. http://collector:4318)")
        return value

    def exporter_in_use(self) -> TelemetryExporter:
        """The exporter chosen, or by default otlp when an endpoint is set, else none."""
        return self.exporter or ("otlp" if self.otlp_endpoint else "none")


EmbeddingProvider = Literal["wordllama", "minilm", "minilm+wordllama", "litellm"]


class EmbedderChoice(Strict):
    # wordllama (offline default) | minilm (all-MiniLM-L6-v2 int8 ONNX, offline) |
    # minilm+wordllama (their weighted ensemble, offline) | litellm (remote, e.g. text-embedding-3-small)
    provider: EmbeddingProvider = "wordllama"
    model: str | None = None


class EmbeddingsConfig(EmbedderChoice):
    per_policy: dict[str, EmbedderChoice] = {}  # e.g. {tools: {provider: minilm+wordllama}}


class Settings(Strict):
    server: ServerConfig = ServerConfig()
    upstream: UpstreamConfig = UpstreamConfig()
    models: dict[str, ModelConfig] = {}
    budget: BudgetConfig = BudgetConfig()
    storage: StorageConfig = StorageConfig()
    state: StateConfig = StateConfig()
    admin: AdminConfig = AdminConfig()
    auth: AuthConfig = AuthConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    dashboard: DashboardConfig = DashboardConfig()
    embeddings: EmbeddingsConfig = EmbeddingsConfig()
    policies: dict[str, dict[str, Any]] = {}
    source: str = Field("<default>", exclude=True)

    def policy_configs(self) -> dict[str, BaseModel]:
        """The validated config model of every configured policy, in config order."""
        from .registry import policy_class

        out: dict[str, BaseModel] = {}
        for name, raw in self.policies.items():
            out[name] = policy_class(name).Config.model_validate(raw or {})
        return out


def default_yaml_text() -> str:
    return importlib.resources.files("ctxwarden.config").joinpath("ctxwarden.yaml").read_text(encoding="utf-8")


def merge_config(base: Any, over: Any) -> Any:
    """`over` merged into `base`, mapping by mapping (the later file wins key by key)."""
    if isinstance(base, dict) and isinstance(over, dict):
        merged = dict(base)
        for key, value in over.items():
            merged[key] = merge_config(base.get(key), value) if key in base else value
        return merged
    return over


def _describe(err: dict[str, Any], prefix: tuple[Any, ...] = ()) -> str:
    loc = ".".join(str(p) for p in (*prefix, *err["loc"]))
    if err["type"] == "extra_forbidden":
        return f"{loc}: unknown key"
    got = err.get("input")
    shown = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
    return f"{loc}: {err['msg']}{shown}"


def parse_settings(data: Any, source: str) -> Settings:
    """Validate a merged config mapping; raise ConfigError naming every bad key."""
    from .registry import UnknownPolicy, policy_class

    if not isinstance(data, dict):
        raise ConfigError(source, ["the top level must be a mapping of sections"])
    problems: list[str] = []
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        problems += [_describe(e) for e in exc.errors()]
        settings = None
    raw_policies = data.get("policies") or {}
    if isinstance(raw_policies, dict):
        for name, raw in raw_policies.items():
            try:
                policy_class(name).Config.model_validate(raw or {})
            except UnknownPolicy as exc:
                problems.append(f"policies.{name}: {exc}")
            except ValidationError as exc:
                problems += [_describe(e, ("policies", name)) for e in exc.errors()]
    per_policy = ((data.get("embeddings") or {}).get("per_policy") or {}) if isinstance(data.get("embeddings"), dict) else {}
    for name in per_policy if isinstance(per_policy, dict) else []:
        if name not in (raw_policies if isinstance(raw_policies, dict) else {}):
            problems.append(f"embeddings.per_policy.{name}: no policy {name!r} is configured")
    if problems or settings is None:
        raise ConfigError(source, problems)
    settings.source = source
    return settings


def _paths_from(user: dict[str, Any], file: Path) -> dict[str, Any]:
    """A relative `storage.path` set in a config file is relative to that file's directory
    (absolute paths and `~` stay as written), so the store does not move with the working directory."""
    storage = user.get("storage")
    if not isinstance(storage, dict) or not isinstance(storage.get("path"), str) or not storage["path"]:
        return user
    where = Path(storage["path"]).expanduser()
    if not where.is_absolute():
        where = file.absolute().parent / where
    return {**user, "storage": {**storage, "path": str(where)}}


def load_settings(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """The embedded default, with the user's file (and then `overrides`) merged over it."""
    data = yaml.safe_load(default_yaml_text()) or {}
    source = "<embedded default config/ctxwarden.yaml>"
    explicit: dict[str, Any] = {}
    if path is not None:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(source, [f"cannot read the file: {exc.strerror}"]) from exc
        stream = io.StringIO(text)
        stream.name = source  # YAML errors then say `in "<the file>", line …`
        try:
            user = yaml.safe_load(stream) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(source, [f"not valid YAML: {exc}"]) from exc
        if not isinstance(user, dict):
            raise ConfigError(source, ["the top level must be a mapping of sections"])
        data = merge_config(data, _paths_from(user, Path(path)))
        explicit = user
    if overrides:
        data = merge_config(data, overrides)
        explicit = merge_config(explicit, overrides)
    return parse_settings(inherit_settings(data, explicit), source)


def _section(data: Any, *path: str) -> dict[str, Any]:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def inherit_settings(data: dict[str, Any], explicit: dict[str, Any]) -> dict[str, Any]:
    """Settings one policy takes from another's when the user set none (issue 15; `explicit` is what
    the user's file and overrides set, null counting as unset; an explicit setting wins):
      memory.strategy     ← clash.strategy (whether or not the clash policy is enabled; `note` → prefer_recent);
      memory.judge_model  ← poisoning.judge.model, for `extract: llm`, when that judge is served by the
                            proxy's upstream: memory calls the model through it, never through
                            judge.base_url / api_key_env, so a judge with an endpoint of its own is not taken."""
    memory = _section(data, "policies", "memory")
    if not memory:
        return data
    memory = dict(memory)
    if _section(explicit, "policies", "memory").get("strategy") is None:
        memory.pop("strategy", None)  # memory's own default when clash has none
        strategy = _section(data, "policies", "clash").get("strategy")
        if strategy is not None:
            # clash's `note` edits nothing in the request; for memories, a newer one replacing an older
            # one is what the note tells the model: the later statement is the user's latest word
            memory["strategy"] = "prefer_recent" if strategy == "note" else strategy
    judge = _section(data, "policies", "poisoning", "judge")
    if memory.get("extract") == "llm" and memory.get("judge_model") is None and judge.get("model") \
            and not judge.get("base_url"):
        memory["judge_model"] = judge["model"]
    return {**data, "policies": {**data["policies"], "memory": memory}}


def server_url(explicit: str | None, settings: Settings) -> str:
    """Where a command finds the running server: `explicit` (host:port or a URL), else the config's
    host and port (a wildcard bind address reached on the loopback)."""
    if explicit:
        return explicit if "://" in explicit else f"http://{explicit}"
    host = settings.server.host
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://[{host}]:{settings.server.port}" if ":" in host else f"http://{host}:{settings.server.port}"
