"""The gateway's routing side: request features, the learned classifier and length predictor,
and `Router.decide`, which turns a prediction and the live policy into a decision.

Import-light on purpose (router.tools.cli is imported by the `tandem` console script): names load on
first use, and scikit-learn only when a model is loaded or trained."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Router": "router.decide",
    "RouteRequest": "router.types",
    "Decision": "router.types",
    "Prediction": "router.types",
    "RouterError": "router.errors",
    "RouterModel": "router.classifier",
    "load_model": "router.classifier",
    "log_decision": "router.decisions_log",
    "read_decisions": "router.training.decisions",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'router' has no attribute {name!r}")
