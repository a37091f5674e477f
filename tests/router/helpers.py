"""Request texts, the test policy and the request factory the router's tests share (with
tests/measures.py), kept here so that no test file imports another."""

from __future__ import annotations

from engines.cost import CostProfile
from policies import Policy
from policies.schema import DEFAULT_TASK_MODES
from policies.stores import default_policy
from router import RouteRequest

EXTRACT = "Extract name, age and city as a JSON object.\nAlice Smith is 34 years old. Alice lives in Paris."
LABEL = "Label this support ticket as billing, bug or account. Answer with the label only.\nI was charged twice for my subscription this month."
ESSAY = "Write a 600-word essay on remote work, with an intro and a conclusion."
SUM = "Add these numbers step by step, writing the running total on each line: " + ", ".join(str(x) for x in range(11, 31))

# a CPU-like cost profile: block's canvas dear at batch 1, AR's token cheap
CPU = CostProfile(ms_per_forward={"block": {1: 24.0, 8: 86.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.5)


def policy(**changes) -> Policy:
    """The shipped policy with the product's default task modes (short structured jobs on block) and
    block limit (one canvas), so these tests do not depend on what the shipped checkpoint's
    measurements put in the YAML; and with the agreement rule off (agreement_floor 0): the shipped
    router's agreement head sends natural block requests to safe_mode, and these tests are about
    the other rules (tests/router/test_classifier.py covers the head)."""
    return Policy.model_validate({**default_policy().content(), "task_modes": dict(DEFAULT_TASK_MODES), "block_max_canvases": 1,
                                  "agreement_floor": 0.0, **changes})


def req(prompt=EXTRACT, **kw) -> RouteRequest:
    return RouteRequest.from_prompt(prompt, **kw)
