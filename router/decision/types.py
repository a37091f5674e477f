"""Typed input and output of the router: `RouteRequest` (the parts of an OpenAI chat request that
routing reads, plus headers, API key and request id) and `Decision` (the route and why)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from engines.types import Mode

if TYPE_CHECKING:
    from policies.schema import Policy
    from router.decision.live_costs import DraftKey
    from router.decision.pricing import Pricing


class RouteRequest(BaseModel):
    """What the router needs from one chat completion request. Extra OpenAI fields are ignored,
    so a whole request body validates as a RouteRequest."""

    model_config = ConfigDict(extra="ignore")

    messages: list[dict[str, Any]] = Field(..., min_length=1, description="Chat turns: {'role', 'content'}; content is text or a list of parts.")
    model: str = Field("tandem", description="Model alias: 'tandem' lets the router choose; 'tandem-block' etc. force a mode.")
    max_tokens: int | None = Field(None, ge=1, description="Cap on output tokens; caps the predicted length too.")
    response_format: dict[str, Any] | None = Field(None, description="OpenAI response_format: {'type': 'text'|'json_object'|'json_schema', ...}.")
    tools: list[dict[str, Any]] | None = Field(None, description="OpenAI tool definitions offered to the model.")
    stop: list[str] | None = Field(None, description="Stop sequences (a single string is accepted).")
    structured: Literal["tools", "json_schema", "json_object"] | None = Field(
        None, description="What the answer is decoded under: a tool-call grammar, a JSON Schema, any JSON object; null: free text.")
    skeleton: bool = Field(False, description="The answer has a fixed skeleton (a json_schema, one tool to call): block mode can seed its canvas.")
    logprobs: bool = Field(False, description="The client asked for logprobs: only AR and verified mode give them.")
    headers: dict[str, str] = Field(default_factory=dict, description="Request headers; names are matched case-insensitively.")
    api_key: str | None = Field(None, description="The caller's API key, for per-key policy overrides.")
    request_id: str = Field(default_factory=lambda: uuid.uuid4().hex, description="Seeds the shadow-verification draw.")

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, v):
        return [v] if isinstance(v, str) else v

    @field_validator("messages")
    @classmethod
    def _messages(cls, v: list[dict]) -> list[dict]:
        for j, m in enumerate(v):
            if "role" not in m:
                raise ValueError(f"messages[{j}] needs a 'role' (system, user, assistant or tool)")
        return v

    @classmethod
    def from_prompt(cls, prompt: str, system: str | None = None, **kw) -> RouteRequest:
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        return cls(messages=msgs, **kw)


class Decision(BaseModel):
    """The route for one request, with its explanation."""

    mode: Mode = Field(..., description="Decoding mode: block, verified or ar.")
    canvas: int | None = Field(..., description="Canvas size for block/verified (smallest that holds predicted_tokens); null for ar.")
    steps: int | None = Field(..., description="Denoising steps per canvas for block/verified; null for ar.")
    reason: str = Field(..., description="Human-readable explanation of the decision.")
    rule: str = Field(..., description="Which rule decided: task_default, long_output, low_confidence, disagreement, forced_model, forced_header, api_key, load, constrained, skeleton.")
    trace: list[str] = Field(default_factory=list, description="Every routing rule that moved the route, in order, as rule:mode "
                             "(router.decision.rules.RULES): how the route came about, not only the last word.")
    task: str = Field(..., description="Predicted task type.")
    predicted_tokens: int = Field(..., description="Predicted high-quantile (p90) answer length, capped by max_tokens.")
    confidence: float = Field(..., description="Calibrated probability of the predicted task type.")
    agreement: float | None = Field(None, description="Predicted probability that block's answer is AR's (a router retrained on logged shadow verification); null without that head.")
    policy_version: int = Field(..., description="Version of the policy that decided.")
    shadow_verify: bool = Field(False, description="Block answer to be verified by AR too, only to measure acceptance.")
    forced_by: Literal["model", "header", "api_key"] | None = Field(None, description="What forced the mode, if anything.")
    load_aware: bool = Field(False, description="Whether queue load moved the request off its first-choice mode.")
    request_id: str = Field("", description="The request's id.")
    structured: Literal["tools", "json_schema", "json_object"] | None = Field(None, description="The request's output grammar, if any.")
    prompt_tokens: int = Field(0, description="Approximate prompt tokens (messages and tools): the cost model prices their prefill.")
    prefix_tokens: int = Field(0, description="Approximate tokens before the last message: what an engine's prefix cache may hold.")
    # What made this decision (given when it is built, never serialized): what happens to the request
    # later (its dispatch, failover's on_engine_failure and its estimate) follows these, not a newer
    # policy or profile.
    _policy: Policy | None = PrivateAttr(default=None)
    _prices: Pricing | None = PrivateAttr(default=None)
    _draft_key: DraftKey | None = PrivateAttr(default=None)

    def __init__(self, *, policy: Policy | None = None, prices: Pricing | None = None, draft_key: DraftKey | None = None, **fields: Any):
        super().__init__(**fields)
        self._policy, self._prices, self._draft_key = policy, prices, draft_key

    @property
    def policy(self) -> Policy | None:
        """The policy snapshot that decided, or None for a decision built elsewhere."""
        return self._policy

    @property
    def prices(self) -> Pricing | None:
        """The prices it was routed by, or None for a decision built elsewhere."""
        return self._prices

    @property
    def draft_key(self) -> DraftKey | None:
        """What its verified draft share is counted and priced under (the task, and whether its
        policy's agreement floor expects block to answer as AR), or None."""
        return self._draft_key

    def headers(self) -> dict[str, str]:
        """Response headers the gateway adds."""
        return {
            "x-tandem-mode": self.mode,
            "x-tandem-task": self.task,
            "x-tandem-policy-version": str(self.policy_version),
            "x-tandem-route-reason": self.rule,
            "x-tandem-route-trace": ",".join(self.trace),
        } | ({"x-tandem-structured": self.structured} if self.structured else {})


@dataclass(slots=True)
class Prediction:
    """What the learned model says about one request."""

    task: str  # most likely task type
    confidence: float  # its calibrated probability
    probabilities: dict[str, float]  # every task type's calibrated probability
    predicted_tokens: int  # high-quantile answer length (before any max_tokens cap)
    agreement: float | None = None  # P(a block answer is AR's answer), when the model was trained on logged shadow verification
