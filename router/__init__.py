"""Tandem's request path above the engines, in two rooms:

- `router.decision`: how a request is routed: features, the learned classifier and length
  predictor, the routing view (costs, load, health) and `Router.decide`, which turns a prediction
  and the live policy into a `Decision`;
- `router.gateway`: the HTTP faces (OpenAI, Responses, admin, console), orchestration, failover,
  answers, structured output, telemetry and the decision log and feed.

`router.app:build_app` binds the deployments. Nothing here imports the offline lab (`lab/`).
Import-light on purpose: names load on first use, and scikit-learn only when a model is loaded."""

from __future__ import annotations

from engines.lazy_exports import lazy_exports

_EXPORTS = {
    "Router": "router.decision.decide",
    "RouteRequest": "router.decision.types",
    "Decision": "router.decision.types",
    "Prediction": "router.decision.types",
    "RouterError": "router.decision.errors",
    "RouterModel": "router.decision.classifier",
    "load_model": "router.decision.classifier",
    "log_decision": "router.gateway.decisions_log",
}

__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
