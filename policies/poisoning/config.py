"""The poisoning policy's settings (`policies.poisoning` in YAML)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import PolicyConfig
from .flags import FlagRulesConfig


class StreamConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_hold_ms: float = Field(1500, gt=0)  # judging one streamed sentence may take at most this long
    on_timeout: Literal["release", "block"] = "release"  # then: let the sentence out, or end the answer


class JudgeConfig(BaseModel):
    """The LLM judge (`checker: llm | hybrid`): the main upstream unless base_url is set."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = None  # required for llm / hybrid
    base_url: str | None = None  # an OpenAI-compatible endpoint of its own; null: the proxy's upstream
    api_key_env: str | None = None  # the environment variable holding that endpoint's key
    timeout_s: float = Field(10.0, gt=0)  # past this the local verdicts stand (recorded as a fallback)
    cache_size: int = Field(10_000, ge=0)  # verdicts cached by hash of (claim, evidence)


class NLIConfig(BaseModel):
    """A cross-encoder NLI model from a local directory (`checker: nli`): model.onnx + tokenizer.json."""

    model_config = ConfigDict(extra="forbid")
    model_path: str | None = None  # required for nli; nothing is downloaded
    max_length: int = Field(256, ge=16, le=4096)  # tokens of (evidence, claim) per pair
    labels: list[str] = ["contradiction", "entailment", "neutral"]  # the model's output order


class HybridConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # local verdicts whose confidence falls in [low, high) go to the judge; surer ones stand
    uncertain_band: tuple[float, float] = (0.3, 0.8)


class PoisoningConfig(PolicyConfig):
    action: Literal["block", "error", "annotate"] = "block"
    check_inputs: bool = True
    input_action: Literal["drop", "reject"] = "drop"
    # pieces of one incoming message judged at most (those sharing the most words with the KB;
    # pieces sharing none are not judged): bounds the cost of a huge tool result
    input_max_claims: int = Field(24, ge=1)
    # claims of one answer judged at most (~5 ms each on one core; a 16k-token answer is ~400): past it,
    # those sharing the most words with the KB, the rest passed and counted (`poisoning.partly_checked`)
    answer_max_claims: int = Field(400, ge=1)
    confidence_threshold: float = Field(0.8, ge=0, le=1)
    quarantine_band: tuple[float, float] = (0.5, 0.8)
    checker: Literal["local", "nli", "llm", "hybrid"] = "local"
    judge: JudgeConfig = JudgeConfig()
    nli: NLIConfig = NLIConfig()
    hybrid: HybridConfig = HybridConfig()
    flag_rules: FlagRulesConfig = FlagRulesConfig()
    alert_rate: float = Field(0.05, ge=0, le=1)
    alert_window: float = Field(3600, gt=0)
    alert_min_samples: int = Field(20, ge=1)
    add_approved_to_kb: bool = False
    top_k: int = Field(4, ge=1, le=50)
    on_failure: Literal["pass", "block"] = "pass"
    kb_refresh_s: float = Field(5.0, ge=0)
    cache_size: int = Field(10_000, ge=0)
    stream: StreamConfig = StreamConfig()

    @model_validator(mode="after")
    def _band_ordered(self) -> "PoisoningConfig":
        low, high = self.quarantine_band
        if not 0 <= low <= high <= 1:
            raise ValueError(f"quarantine_band must be [low, high] with 0 <= low <= high <= 1 (got {list(self.quarantine_band)})")
        return self
