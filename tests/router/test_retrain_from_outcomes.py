"""Retraining from logged outcomes (issue 14 item 5), on a workload the router was not trained on:
the 28 hand-written prompts of tests/data/realistic_prompts.jsonl. Each is routed by the shipped
router, answered by the shipped model (AR, greedy) and logged to a real Redis stream as the
Gateway logs it (decisions_log.store_text on); `train(from_redis=...)` (what `tandem router
train --from-redis` runs) fits a new router on the shipped data plus those entries. Its length
predictions follow what the model really wrote on that workload: more answers inside the
predicted p90 and a smaller error, so canvases and the long-output rule are sized by the
outcomes, and the decisions change where they said so."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

from engines import DiffusionEngine
from engines.defaults import SHIPPED_CHECKPOINT
from engines.types import GenerationRequest
from router.decide import Router
from router.decisions_log import DecisionsLogSettings, log_decision, request_features
from router.training.train import train
from router.types import RouteRequest
from tests.policies.helpers import redis_client

WORKLOAD = Path(__file__).resolve().parents[1] / "data" / "realistic_prompts.jsonl"
MAX_TOKENS = 96


def length_fit(decisions, observed) -> tuple[float, float]:
    """Share of answers within the predicted p90, and the mean |log2| error of p90 against them."""
    inside = sum(obs <= d.predicted_tokens for d, obs in zip(decisions, observed)) / len(observed)
    error = sum(abs(math.log2((d.predicted_tokens + 1) / (obs + 1))) for d, obs in zip(decisions, observed)) / len(observed)
    return inside, error


def test_retraining_on_logged_outcomes_moves_the_routers_lengths_to_what_the_model_wrote(redis_url, tmp_path):
    items = [json.loads(line) for line in WORKLOAD.read_text().splitlines() if line.strip()]
    requests = [RouteRequest(messages=it["messages"], max_tokens=MAX_TOKENS) for it in items]
    shipped = Router()
    before = [shipped.decide(r) for r in requests]
    engine = DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT)
    observed = [engine.generate(GenerationRequest(messages=it["messages"], mode="ar", max_new_tokens=MAX_TOKENS)).stats.output_tokens
                for it in items]

    stream = f"tandem-test-{uuid.uuid4().hex[:8]}:decisions"
    client = redis_client()
    try:
        for request, decision, tokens in zip(requests, before, observed):
            outcome = {"mode": "ar", "output_tokens": tokens, "finish_reason": "stop", "latency_ms": 1.0}
            assert log_decision(client, request_features(request), decision.model_dump(mode="json"), outcome,
                                DecisionsLogSettings(store_text=True), stream=stream)
        model, _, path = train(from_redis=redis_url, redis_stream=stream, out=tmp_path / "retrained.skops")
    finally:
        client.delete(stream, f"{stream}:acct")
        client.close()
    after = [Router(model_path=str(path)).decide(r) for r in requests]

    (inside_before, error_before), (inside_after, error_after) = length_fit(before, observed), length_fit(after, observed)
    changed = [(it["id"], b.mode, a.mode, b.canvas, a.canvas) for it, b, a in zip(items, before, after) if (b.mode, b.canvas) != (a.mode, a.canvas)]
    print(f"\nretrained on {model.meta['n_from_redis']} logged outcomes ({model.meta['redis_entries']}): answers within p90 "
          f"{inside_before:.2f} -> {inside_after:.2f}, mean |log2 error| {error_before:.2f} -> {error_after:.2f}; "
          f"decisions changed (id, mode, canvas before -> after): {changed}")
    assert model.meta["n_from_redis"] >= 8, "too few logged outcomes became labels"
    assert inside_after > inside_before and error_after < error_before
    assert changed, "no decision followed the outcomes"
