"""The nested blocks of a routing policy (`policies.schema.Policy`): how clients may force a mode
(`ForcingRules`), what changes for one API key (`KeyOverride`), and load- and cost-aware routing
(`LoadAware`), on the strict base every policy part shares. Each validator names the valid values
in its message."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engines.types import MODES, Mode
from policies.tasks import check_task_keys

AUTO = "auto"  # a model alias that lets the router choose

# Headers a client sends for their own purpose (HTTP's standard request and proxy headers, and the
# ones Tandem reads): one of them as the forcing header would read every request as forcing a mode
# (`content-type: application/json` is no mode: every JSON request was a 400).
RESERVED_HEADERS = frozenset({
    "accept", "accept-charset", "accept-encoding", "accept-language", "authorization", "cache-control", "connection",
    "content-encoding", "content-length", "content-type", "cookie", "date", "expect", "forwarded", "from", "host",
    "if-match", "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "keep-alive", "max-forwards",
    "origin", "pragma", "proxy-authorization", "range", "referer", "te", "trailer", "transfer-encoding", "upgrade",
    "user-agent", "via", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-real-ip", "traceparent", "tracestate",
    "x-request-id", "x-tandem-timeout-s", "x-tandem-route-api-key", "openai-organization", "openai-project", "api-key",
})


class Strict(BaseModel):
    """A policy part: unknown fields are refused (a misspelt field never passes silently), values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ForcingRules(Strict):
    """How clients may force a mode instead of letting the router choose."""

    model_aliases: dict[str, str] = Field(
        default_factory=lambda: {"tandem": AUTO, "tandem-block": "block", "tandem-verified": "verified", "tandem-ar": "ar"},
        description="Model names the endpoint accepts and the mode each forces ('auto' lets the router decide). "
        "A request for a model not listed here is refused with 400 model_not_found.",
    )
    allow_model_alias: bool = Field(
        True, description="Whether a model alias other than 'auto' may force a mode; if false such a request gets 403."
    )
    header: str = Field("x-tandem-mode", description="Request header that may force a mode (matched case-insensitively).")
    allow_header: bool = Field(
        True, description="Whether the header may force a mode; if false a request that sends it gets 403."
    )
    allowed_modes: list[Mode] = Field(
        default_factory=lambda: list(MODES),
        description="Modes a client may force (by alias or header); forcing any other mode gets 403.",
    )

    @field_validator("model_aliases")
    @classmethod
    def _aliases(cls, v: dict[str, str]) -> dict[str, str]:
        if not v:
            raise ValueError("at least one model alias is needed, e.g. {'tandem': 'auto'}")
        for name, mode in v.items():
            if mode != AUTO and mode not in MODES:
                raise ValueError(f"alias {name!r} maps to {mode!r}; valid targets: auto, {', '.join(MODES)}")
        return v

    @field_validator("header")
    @classmethod
    def _header(cls, v: str) -> str:
        if not v or any(c.isspace() or c == ":" for c in v):
            raise ValueError("header must be a non-empty HTTP header name without spaces or ':', e.g. 'x-tandem-mode'")
        if v.lower() in RESERVED_HEADERS:
            raise ValueError(f"header {v!r} is a standard HTTP header (or one Tandem reads for something else), which every client "
                             "sends for its own purpose: every request would be read as forcing a mode; name one of your own, "
                             "e.g. 'x-tandem-mode'")
        return v.lower()


class KeyOverride(Strict):
    """What changes for requests that carry one API key."""

    force_mode: Mode | None = Field(None, description="Always use this mode for the key (block, verified or ar); null: no forcing.")
    task_modes: dict[str, Mode] = Field(
        default_factory=dict, description="Default mode per task type for this key, laid over the policy's task_modes."
    )
    allow_forcing: bool | None = Field(
        None, description="Overrides both allow_model_alias and allow_header for this key; null keeps the policy's."
    )
    confidence_floor: float | None = Field(
        None, ge=0.0, le=1.0, description="This key's confidence floor in [0, 1]; null keeps the policy's."
    )

    @field_validator("task_modes")
    @classmethod
    def _tasks(cls, v: dict[str, str]) -> dict[str, str]:
        check_task_keys(v, "task_modes")
        return v


class LoadAware(Strict):
    """Load-aware routing: move work off a mode whose queue is nearly full, and to the mode that
    would finish it sooner at equal quality, by measured cost. On by default; `enabled: false`
    switches it off."""

    enabled: bool = Field(True, description="Whether the router reads queue load and the cost profile at all.")
    max_queue_ratio: float = Field(
        0.8, gt=0.0, le=1.0, description="Queue fill (queued / capacity, in (0, 1]) above which a mode counts as overloaded."
    )
    spill_order: list[Mode] = Field(
        default_factory=lambda: ["verified", "ar", "block"],
        description="Modes tried, in order, when the chosen mode is overloaded; the first one under the ratio wins.",
    )
    cost_aware: bool = Field(
        True,
        description="With a cost profile, move a decision to a mode of equal quality that would finish it sooner: verified <-> AR "
        "always (the same output under greedy decoding), block <-> AR for the tasks in equal_quality_tasks.",
    )
    min_gain: float = Field(
        1.25, ge=1.0, le=100.0, description="Estimated speed-up (>= 1) the other mode must offer before a request moves."
    )
    equal_quality_tasks: list[str] = Field(
        default_factory=list,
        description="Task types whose block answers score as well as AR's on the serving checkpoint (measured by "
        "`tandem eval model`); for these, cost-aware routing may also move work between block and AR.",
    )

    @field_validator("equal_quality_tasks")
    @classmethod
    def _tasks(cls, v: list[str]) -> list[str]:
        check_task_keys(dict.fromkeys(v), "load_aware.equal_quality_tasks")
        return v
