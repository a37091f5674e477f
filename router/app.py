"""`build_app(args)`: binds the plain deployment classes into the Tandem Ray Serve application.

`serve_config.yaml` points here (`import_path: router.app:build_app`) and passes `args`; each
deployment's replicas, `max_ongoing_requests`, `ray_actor_options` and autoscaling come from
the config's `deployments` section, by name: `Gateway`, and by the `layout` argument either
`BlockEngine` and `AREngine` (split: a copy of the weights each) or `SharedEngine` (shared: one copy
serving every mode, its scheduler interleaving them step by step; router.decision.layouts).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engines.defaults import MAX_BATCH_SIZE, MAX_QUEUE, MAX_WAIT_S, PREFIX_CACHE_TOKENS
from engines.types import MODES
from router.gateway.decisions_log import DecisionsLogSettings
from router.gateway.responses_store import DEFAULT_TTL_S
from router.decision.routing_view import POLL_INTERVAL_S, PROBE_TIMEOUT_S


class EngineArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dtype: str = Field("float32", description="Weights dtype: float32, bfloat16 or float16 (bfloat16 on GPUs).")
    device: str = Field("cpu", description="torch device for the model, e.g. cpu or cuda.")
    threads: int | None = Field(1, ge=1, description="torch intra-op threads per replica (null: torch's default).")
    lane_threads: int = Field(
        1, ge=1, le=2, description="Decode threads of a replica serving canvases and tokens (engines/replica/scheduler.py): 1 steps the two "
                                   "lanes in turn (a GPU: one stream); 2 gives each lane a thread of its own (a CPU with a core per lane).")
    canvas_nice: int = Field(
        0, ge=0, le=19, description="With lane_threads 2: how much lower the canvas lane's thread runs in the OS scheduler (Linux "
                                    "nice) than the tokens lane's, so that where they compete for a core AR's short steps go first.")
    max_batch_size: int = Field(MAX_BATCH_SIZE, ge=1, le=512, description="Requests decoded together per step.")
    max_queue: int = Field(MAX_QUEUE, ge=1, description="Waiting requests per replica before 429.")
    max_wait_s: float = Field(MAX_WAIT_S, gt=0, description="How long a request waits for a running batch of its mode with other denoising "
                                                             "settings before that batch stops admitting.")
    prefix_cache_tokens: int = Field(
        PREFIX_CACHE_TOKENS, ge=0, description="Prompt-head tokens whose KV each replica keeps for reuse (system prompt, tools, earlier turns); 0: off.")
    quantization: Literal["none", "fp8"] = Field(
        "none", description="Weights' storage (engines/model/quantization.py): none, or fp8 (float8 e4m3, a scale per row; FP8 GEMMs on GPUs "
                            "of compute capability 8.9 and up, weight-only elsewhere); fp8 needs the optional torchao (tandem[fp8]).")
    compile: Literal["off", "on", "auto"] = Field(
        "off", description="Compiled canvas steps (engines/batch/compiled.py): off (eager, the reference), on, or auto (on for CUDA devices). "
                           "Each new shape compiles on first use (10-60 s on a CPU) until the static cache bounds them: opt-in for now.")
    stop_check_every: int = Field(
        1, ge=1, description="Denoising steps between the host's reads of a canvas's stop flags (engines/decode/canvas_settings.py); 1 reads after "
                             "every step (the library's loop); more never waits on the device inside a canvas, at up to that many "
                             "minus one extra steps.")
    sure_entropy: float | None = Field(
        None, gt=0, description="Verified mode: a row alone drafts only where the entropy (nats) of AR's next-token choice is under this; "
                                "null: engines.modes.verified_drafting.SURE_ENTROPY, measured on the shipped model (another checkpoint may want its own).")


class AppArgs(BaseModel):
    """Arguments of the Tandem application (the `args:` block of serve_config.yaml)."""

    model_config = ConfigDict(extra="forbid")
    checkpoint: str | None = Field(None, description="DiffusionGemma checkpoint directory; null: the shipped tiny model.")
    router_model: str | None = Field(None, description="Router model (.skops); null: the shipped router/decision/models/default.skops.")
    policy_source: str | None = Field(
        None, description="Policy store: a YAML path or a redis:// URL; null: $TANDEM_POLICY_SOURCE, else policies/default.yaml."
    )
    redis_url: str | None = Field(None, description="Redis for the decisions stream; null: the policy source if it is Redis, else none.")
    key_prefix: str = Field("tandem:", description="Prefix of every Redis key Tandem writes (policy, history, decisions).")
    admin_token_env: str = Field("TANDEM_ADMIN_TOKEN", description="Environment variable holding the admin bearer token; unset: admin API off.")
    telemetry: str = Field("none", description="OpenTelemetry exporter: none, console, otlp or file:PATH.")
    request_timeout_s: float = Field(
        120.0, gt=0, description="Longest a request waits for its engine(s), failover included, before a 503 (a stream: between two chunks).")
    client_timeouts: bool = Field(
        False, description="Honour a client's x-tandem-timeout-s header (seconds): a deadline shorter than request_timeout_s for "
                           "that request, never a longer one. Off by default: those 503s count as engine timeouts in the metrics, "
                           "so a deployment turns it on where its clients' deadlines are trusted (the hardening tests do).")
    probe_interval_s: float = Field(POLL_INTERVAL_S, gt=0, description="How often the gateway polls each engine's load and health.")
    probe_timeout_s: float = Field(PROBE_TIMEOUT_S, gt=0, description="A poll slower than this failed; a failed poll soon after a replica died marks its engine down.")
    layout: Literal["split", "shared"] = Field(
        "split", description="Engine deployments: split (BlockEngine serves block and verified, AREngine AR: two copies of the weights, "
                             "two modes decoding at once) or shared (one SharedEngine serves all three from one copy, interleaving "
                             "the modes' batches step by step). router/decision/layouts.py; docs/operations.md says when to pick which.")
    engine: EngineArgs = Field(default_factory=EngineArgs, description="Engine replica settings, shared by every engine deployment.")
    responses_ttl_s: int = Field(
        DEFAULT_TTL_S, ge=0, description="How long the Responses API keeps each response's conversation in Redis for previous_response_id "
                                     "(seconds); 0 keeps none (previous_response_id is then a 400). Without Redis nothing is kept.")
    decisions_log: DecisionsLogSettings = Field(
        default_factory=DecisionsLogSettings,
        description="What the decisions stream keeps: prompt text (off by default), per-entry and total byte caps, entries, TTL.",
    )


def build_app(args: dict | None = None):
    """The application builder `serve run` calls (exactly one parameter: the config's `args`)."""
    return application(args)


def application(args: dict | None = None, gateway_replicas: int = 1):
    """The application; `gateway_replicas` for callers without a config's `deployments` section
    (`start_app`), which otherwise sets every deployment's replicas."""
    from ray import serve

    from engines.replica.deployment import EngineDeployment
    from router.gateway.orchestration import Gateway
    from router.gateway.ingress import api

    a = AppArgs.model_validate(args or {})
    engine_kwargs = a.engine.model_dump()
    # Defaults sized for a laptop; serve_config.yaml's `deployments` section overrides them by name.
    # The gateway polls each engine's load twice a second: no access-log line per poll (errors still log).
    engine_options = {"ray_actor_options": {"num_cpus": 0.5}, "max_ongoing_requests": 128, "logging_config": {"enable_access_log": False}}
    if a.layout == "shared":
        engines = {"shared_engine": serve.deployment(EngineDeployment, name="SharedEngine", **engine_options).bind(
            a.checkpoint, modes=MODES, **engine_kwargs)}
        block = ar = None
    else:
        engines = {}
        block = serve.deployment(EngineDeployment, name="BlockEngine", **engine_options).bind(a.checkpoint, modes=("block", "verified"), **engine_kwargs)
        ar = serve.deployment(EngineDeployment, name="AREngine", **engine_options).bind(a.checkpoint, modes=("ar",), **engine_kwargs)
    gateway_options = {"ray_actor_options": {"num_cpus": 0.1}, "max_ongoing_requests": 512, "num_replicas": gateway_replicas}
    return serve.deployment(serve.ingress(api)(Gateway), name="Gateway", **gateway_options).bind(
        block, ar, **engines, policy_source=a.policy_source, router_model=a.router_model, redis_url=a.redis_url, key_prefix=a.key_prefix,
        admin_token_env=a.admin_token_env, telemetry=a.telemetry, request_timeout_s=a.request_timeout_s,
        probe_interval_s=a.probe_interval_s, probe_timeout_s=a.probe_timeout_s, decisions_log=a.decisions_log.model_dump(),
        responses_ttl_s=a.responses_ttl_s, client_timeouts=a.client_timeouts,
    )
