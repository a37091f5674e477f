"""The router's typed input and output (router.decision.types): a whole OpenAI body validates as a
RouteRequest, and a Decision says its route in headers and keeps what made it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from policies.stores import default_policy
from router.decision.live_costs import DraftKey
from router.decision.types import Decision, RouteRequest


def decision(**kw) -> Decision:
    return Decision(**{"mode": "block", "canvas": 64, "steps": 8, "reason": "task default", "rule": "task_default", "task": "extract",
                       "predicted_tokens": 24, "confidence": 0.97, "policy_version": 3} | kw)


def test_a_whole_chat_body_is_a_route_request():
    r = RouteRequest.model_validate({"model": "tandem-ar", "messages": [{"role": "user", "content": "Hi"}], "stop": "\n",
                                     "temperature": 0.2, "stream": True})
    assert r.model == "tandem-ar" and r.stop == ["\n"] and r.request_id  # a lone stop string becomes a list
    assert RouteRequest.from_prompt("Hi", system="Be brief.").messages == [{"role": "system", "content": "Be brief."},
                                                                          {"role": "user", "content": "Hi"}]


@pytest.mark.parametrize("body,field", [({"messages": []}, "messages"), ({"messages": [{"content": "Hi"}]}, "role"),
                                        ({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 0}, "max_tokens")])
def test_a_body_routing_cannot_read_is_refused_naming_the_field(body, field):
    with pytest.raises(ValidationError, match=field):
        RouteRequest.model_validate(body)


def test_a_decision_says_its_route_in_headers():
    assert decision(trace=["task_default:block", "long_output:ar"], mode="ar").headers() == {
        "x-tandem-mode": "ar", "x-tandem-task": "extract", "x-tandem-policy-version": "3", "x-tandem-route-reason": "task_default",
        "x-tandem-route-trace": "task_default:block,long_output:ar"}
    assert decision(structured="tools").headers()["x-tandem-structured"] == "tools"


def test_a_decision_keeps_the_policy_that_made_it_but_does_not_serialize_it():
    policy = default_policy()
    d = decision(policy=policy, draft_key=DraftKey("extract", True))
    assert d.policy is policy and d.draft_key == DraftKey("extract", True) and d.prices is None
    assert "policy" not in d.model_dump() and decision().policy is None
    assert d.model_copy(update={"mode": "ar"}).policy is policy, "a copy keeps what made it"
