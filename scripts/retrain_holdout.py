"""Held-out check of retraining from logged outcomes (docs/operations.md section 5).

Two folds over tests/data/realistic_prompts.jsonl: log half the prompts (served by the shipped
router and model, block answers shadow-verified) with 21 task-suite items, retrain, and measure
the other half: how many block decisions move off block and how many answers are AR's.
Run: .venv/bin/python scripts/retrain_holdout.py (needs Redis at $TANDEM_TEST_REDIS_URL; ~2 min).
"""

import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engines import DiffusionEngine  # noqa: E402
from engines.defaults import SHIPPED_CHECKPOINT  # noqa: E402
from router.decision.decide import Router  # noqa: E402
from router.gateway.decisions_log import DecisionsLogSettings, log_decision, request_features  # noqa: E402
from lab.routing.train import train  # noqa: E402
from tests.policies.helpers import REDIS_URL, redis_client  # noqa: E402
from tests.router.test_retrain_from_outcomes import Outcomes, realistic_requests, suite_requests  # noqa: E402


def log(served, stream: str) -> None:
    client = redis_client()
    for s in served:
        outcome = {"mode": s.decision.mode, "output_tokens": s.tokens}
        if s.agreement is not None:
            outcome["shadow_agreement"] = s.agreement
        log_decision(client, request_features(s.request), s.decision.model_dump(mode="json"), outcome,
                     DecisionsLogSettings(store_text=True), stream=stream)
    client.close()


def main() -> None:
    shipped = Router()
    outcomes = Outcomes(DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT))
    real = [outcomes.serve(i, r, shipped.decide(r)) for i, r in realistic_requests()]
    suite = [outcomes.serve(i, r, shipped.decide(r)) for i, r in suite_requests(seed=1)]
    print("| fold | held-out prompts | block before (== AR) | block after | answers == AR before | after |")
    print("|---|---|---|---|---|---|")
    for fold in (0, 1):
        logged = [s for j, s in enumerate(real) if j % 2 == fold]
        held = [s for j, s in enumerate(real) if j % 2 != fold]
        stream = f"tandem-holdout-{uuid.uuid4().hex[:6]}:decisions"
        log(logged + suite, stream)
        try:
            _, _, path = train(from_redis=REDIS_URL, redis_stream=stream, out=Path(tempfile.mkdtemp()) / "fold.skops")
        finally:
            client = redis_client()
            client.delete(stream, f"{stream}:acct")
            client.close()
        retrained = Router(model_path=str(path))
        after = [outcomes.serve(s.id, s.request, retrained.decide(s.request)) for s in held]
        block = [s for s in held if s.decision.mode == "block"]
        print(f"| {fold} | {len(held)} | {len(block)} ({sum(s.text == s.ar_text for s in block)}) | "
              f"{sum(a.decision.mode == 'block' for a in after)} | {sum(s.text == s.ar_text for s in held)} | "
              f"{sum(a.text == a.ar_text for a in after)} |")


if __name__ == "__main__":
    main()
