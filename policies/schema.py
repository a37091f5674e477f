"""The routing policy: the operator's rules that turn the router's predictions into a decision.

A `Policy` is plain data (pydantic, loaded from YAML or JSON); the router applies it in
`router.decision.decide`. Everything an operator may want to change without retraining lives here:
the default mode per task type, how long an answer block mode may take, the confidence under
which the router plays safe, denoising steps, which forced modes clients may ask for (by model
alias or header), per-API-key overrides, the shadow-verification rate and load-aware routing.

Notable choices:
- Every field has a description (`docs/policies.md` is written from them) and every validator
  names the valid values in its message, so a refused policy says exactly what to fix.
- `version` is assigned by the store on write; a policy file may carry it but `apply` ignores it.
- The field defaults serve `Policy()` in code and fill what an old record or a hand-edited file
  leaves out on read; a *write* must state every field (`missing_fields`), so a forgotten field
  never turns into a silent schema default in a new live version. A write that means to change
  only some fields says so: it is a patch (`policies.stores.base.merge_patch`).
- `task_mode` and `too_long_for` are the one place the task/length rule lives: the router's
  rules use them for live decisions and `route_for` (both at once) labels the data set's
  expected mode in `lab.routing.dataset`.
- API keys may be written in the clear or as `sha256:<hex digest>`, so a policy in Redis or in
  git need not hold secrets.
- The nested blocks (forcing, per-key overrides, load-aware routing) live in `policies.blocks`
  and the task vocabulary in `policies.tasks`; this module re-exports their names, so callers
  import every policy name from here.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from engines.defaults import CANVAS_SIZES
from engines.types import MODES, Mode
from policies.blocks import AUTO, ForcingRules, KeyOverride, LoadAware, Strict
from policies.tasks import DEFAULT_TASK_MODES, TASKS, check_task_keys

# The blocks and the task vocabulary live in their own modules; they are part of this module's face too.
__all__ = [
    "AUTO", "DEFAULT_TASK_MODES", "MODES", "OPTIONAL_ON_WRITE", "TASKS", "ForcingRules", "KeyOverride", "LoadAware", "Policy",
    "flatten_errors", "missing_fields",
]

MAX_CANVAS = max(CANVAS_SIZES)  # the engine's bound on a canvas: the model's canvas_length
OPTIONAL_ON_WRITE = frozenset({"version", "description"})  # Policy fields a write may leave out (neither routes)


class Policy(Strict):
    """A versioned routing policy. See docs/policies.md for each field."""

    version: int = Field(0, ge=0, description="Assigned by the store on every write (1, 2, ...); 0 for a policy never stored.")
    description: str = Field("", description="Free text: what this version changes and why.")
    canvas_sizes: list[int] = Field(
        default_factory=lambda: list(CANVAS_SIZES),
        description="Canvas sizes the model was trained on, ascending; a decision takes the smallest that holds the "
        "predicted length (the largest when none does).",
    )
    task_modes: dict[str, Mode] = Field(
        default_factory=lambda: dict(DEFAULT_TASK_MODES),
        description="Default mode per task type (extract, classify, summarize, rewrite, plan, short_qa, reason, code, write).",
    )
    fallback_mode: Mode = Field("verified", description="Mode for a task type missing from task_modes.")
    block_max_canvases: int = Field(
        1, ge=1, le=64, description="Block mode only while the predicted length fits this many of the largest canvases."
    )
    long_mode: Mode = Field("ar", description="Mode used instead of block when the predicted length is over the block limit.")
    confidence_floor: float = Field(
        0.5, ge=0.0, le=1.0, description="Block mode needs a task-type probability at least this high; below it, safe_mode."
    )
    safe_mode: Mode = Field("verified", description="Mode used instead of block when the classifier is not confident, "
                                                    "or expects block's answer to differ from AR's.")
    agreement_floor: float = Field(
        0.5, ge=0.0, le=1.0, description="With a router retrained on logged shadow verification: block mode needs a predicted "
                                         "probability at least this high that its answer is AR's; below it, safe_mode.")
    constrained_mode: Literal["verified", "ar"] = Field(
        "ar", description="Mode used instead of block for an answer under a grammar (tools, JSON Schema) with no fixed skeleton.")
    skeleton_mode: Mode = Field(
        "block", description="Mode for an answer under a grammar with a fixed skeleton (a json_schema, one tool to call): "
                             "block seeds the canvas with it and denoises only the values. Block only while the agreement head "
                             "expects it to answer as AR and, with cost-aware routing and a cost profile, it is estimated to finish "
                             "no later than constrained_mode at the current load; else constrained_mode.")
    steps: int = Field(12, ge=1, le=256, description="Denoising steps per canvas (block mode and verified drafts).")
    steps_by_task: dict[str, int] = Field(default_factory=dict, description="Per-task-type steps, overriding steps.")
    forcing: ForcingRules = Field(default_factory=ForcingRules, description="Model aliases and the mode header.")
    api_keys: dict[str, KeyOverride] = Field(
        default_factory=dict,
        description="Per-API-key overrides, keyed by the key itself or by 'sha256:<hex digest of the key>'.",
    )
    shadow_verify_rate: float = Field(
        0.0, ge=0.0, le=1.0, description="Share of block decisions also verified by AR, only to measure acceptance."
    )
    load_aware: LoadAware = Field(default_factory=LoadAware, description="Load-aware and cost-aware routing (on by default).")
    on_engine_failure: dict[Mode, Mode | None] = Field(
        default_factory=lambda: {"block": "ar", "verified": "ar", "ar": "verified"},
        description="Mode that retries a request when its engine fails or times out; null answers 503 at once.",
    )

    @field_validator("canvas_sizes")
    @classmethod
    def _canvases(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("canvas_sizes needs at least one size, e.g. [64, 128, 256]")
        if any(c <= 0 for c in v) or v != sorted(set(v)):
            raise ValueError(f"canvas_sizes must be positive and strictly ascending, e.g. [64, 128, 256]; got {v}")
        if v[-1] > MAX_CANVAS:  # the engine would clamp it: a policy that says what is not served
            raise ValueError(f"canvas_sizes may not exceed {MAX_CANVAS} tokens, the engine's largest canvas (engines.defaults.CANVAS_SIZES); "
                             f"got {v[-1]}")
        return v

    @field_validator("task_modes")
    @classmethod
    def _task_modes(cls, v: dict[str, str]) -> dict[str, str]:
        check_task_keys(v, "task_modes")
        return v

    @field_validator("steps_by_task")
    @classmethod
    def _steps(cls, v: dict[str, int]) -> dict[str, int]:
        check_task_keys(v, "steps_by_task")
        for task, n in v.items():
            if not 1 <= n <= 256:
                raise ValueError(f"steps for {task!r} must be in 1..256; got {n}")
        return v

    @field_validator("api_keys")
    @classmethod
    def _keys(cls, v: dict[str, KeyOverride]) -> dict[str, KeyOverride]:
        for key in v:
            if key.startswith("sha256:") and (len(key) != 71 or any(c not in "0123456789abcdef" for c in key[7:])):
                raise ValueError(f"{key[:15]}... is not 'sha256:' followed by 64 lowercase hex digits")
        return v

    @model_validator(mode="after")
    def _cross(self) -> Policy:
        if self.load_aware.enabled and not self.load_aware.spill_order:
            raise ValueError("load_aware.spill_order must name at least one mode (block, verified, ar) when enabled")
        return self

    # --- rules used by the router ---------------------------------------------------------------

    @property
    def block_limit_tokens(self) -> int:
        """The longest predicted answer block mode may take."""
        return self.block_max_canvases * self.canvas_sizes[-1]

    def canvas_for(self, tokens: int) -> int:
        """The smallest canvas that holds `tokens`; the largest when none does."""
        for c in self.canvas_sizes:
            if tokens <= c:
                return c
        return self.canvas_sizes[-1]

    def steps_for(self, task: str) -> int:
        return self.steps_by_task.get(task, self.steps)

    def key_override(self, api_key: str | None) -> KeyOverride | None:
        if not api_key or not self.api_keys:
            return None
        hit = self.api_keys.get(api_key)
        if hit is None:
            hit = self.api_keys.get("sha256:" + hashlib.sha256(api_key.encode()).hexdigest())
        return hit

    def task_mode(self, task: str, task_modes: dict[str, str] | None = None) -> str:
        """The default mode of a task type: `task_modes` (a key's) over the policy's, else fallback_mode."""
        return (task_modes or {}).get(task) or self.task_modes.get(task, self.fallback_mode)

    def too_long_for(self, mode: str, tokens: int) -> bool:
        """Whether an answer of `tokens` (an upper bound) is past what `mode` may take: only block is limited."""
        return mode == "block" and tokens > self.block_limit_tokens

    def route_for(self, task: str, tokens: int, task_modes: dict[str, str] | None = None) -> tuple[str, str]:
        """Mode for a task type and an (upper-bound) answer length, ignoring confidence.
        Returns (mode, rule) where rule is 'task_default' or 'long_output' (the router's rules of
        those names, `router.decision.rules`, apply the same two steps)."""
        mode = self.task_mode(task, task_modes)
        return (self.long_mode, "long_output") if self.too_long_for(mode, tokens) else (mode, "task_default")

    def content(self) -> dict:
        """The policy as plain data without its version (what a write stores)."""
        return self.model_dump(mode="json", exclude={"version"})


def missing_fields(data: dict, model: type[BaseModel] = Policy, prefix: str = "") -> list[str]:
    """The fields a policy write leaves out, as `field.path`: every Policy field but `version` and
    `description`, and every field of the `forcing` and `load_aware` blocks. An `api_keys` entry
    names only the overrides it makes (a KeyOverride's fields mean "keep the policy's" when null)."""
    out = []
    for name, field in model.model_fields.items():
        path = prefix + name
        if name not in data:
            if not (model is Policy and name in OPTIONAL_ON_WRITE):
                out.append(path)
        elif isinstance(field.annotation, type) and issubclass(field.annotation, Strict) and isinstance(data[name], dict):
            out += missing_fields(data[name], field.annotation, path + ".")
    return out


def flatten_errors(exc: ValidationError) -> list[str]:
    """pydantic errors as `field.path: message` lines."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(policy)"
        msg = err["msg"].removeprefix("Value error, ")
        out.append(f"{loc}: {msg}")
    return out
