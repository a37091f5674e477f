"""The policy schema: defaults, rules, and refusal of invalid policies with field-level reasons."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from policies import Policy, PolicyValidationError, validate_policy
from policies.schema import DEFAULT_TASK_MODES, TASKS, ForcingRules, KeyOverride, LoadAware
from policies.stores import DEFAULT_POLICY_PATH, default_policy, read_policy_file

DOCS = Path(__file__).resolve().parents[2] / "docs" / "policies.md"


def test_shipped_default_policy_is_valid_and_matches_the_schema_defaults():
    p = default_policy()
    assert p.canvas_sizes == [64, 128, 256]
    assert p.steps == 12
    assert set(p.task_modes) == set(TASKS)
    # measured on the shipped checkpoint: block only where its answers match AR's (and by cost)
    assert p.load_aware.equal_quality_tasks == ["classify", "reason", "write"]  # code's block answers lost exact matches in bench serve
    assert {t for t, m in p.task_modes.items() if m == "block"} == {"rewrite", "short_qa"}
    assert {t for t, m in p.task_modes.items() if m == "ar"} == {"classify", "reason", "write"}  # block by cost when it is sooner
    assert {t for t, m in p.task_modes.items() if m == "verified"} == {"code", "extract", "summarize", "plan"}
    assert p.load_aware.enabled is True and p.load_aware.cost_aware is True
    assert p.forcing.model_aliases["tandem"] == "auto"
    assert p.safe_mode == "ar" and p.agreement_floor == 0.3  # measured on this checkpoint (docs/router.md)
    # otherwise the YAML spells out the schema's defaults
    product = p.model_copy(update={"shadow_verify_rate": 0.0, "description": "", "task_modes": dict(DEFAULT_TASK_MODES), "block_max_canvases": 1,
                                   "safe_mode": "verified", "agreement_floor": 0.5,
                                   "load_aware": p.load_aware.model_copy(update={"equal_quality_tasks": []})})
    assert product == Policy()


def test_canvas_for_takes_the_smallest_canvas_that_holds_the_length():
    p = Policy(canvas_sizes=[64, 128, 256])
    assert [p.canvas_for(n) for n in (1, 64, 65, 128, 200, 256, 999)] == [64, 64, 128, 128, 256, 256, 256]


def test_route_for_applies_task_default_and_block_length_limit():
    p = Policy(block_max_canvases=2, long_mode="verified")
    assert p.block_limit_tokens == 512
    assert p.route_for("extract", 100) == ("block", "task_default")
    assert p.route_for("extract", 512) == ("block", "task_default")
    assert p.route_for("extract", 513) == ("verified", "long_output")
    assert p.route_for("write", 10) == ("ar", "task_default")  # only block is length-limited
    assert p.route_for("extract", 10, {"extract": "ar"}) == ("ar", "task_default")
    partial = Policy(task_modes={"extract": "block"}, fallback_mode="ar")
    assert partial.route_for("code", 10) == ("ar", "task_default")


def test_api_keys_match_in_clear_or_by_sha256():
    digest = "sha256:" + hashlib.sha256(b"secret-key").hexdigest()
    p = Policy(api_keys={digest: KeyOverride(force_mode="ar"), "plain": KeyOverride(force_mode="block")})
    assert p.key_override("secret-key").force_mode == "ar"
    assert p.key_override("plain").force_mode == "block"
    assert p.key_override("other") is None and p.key_override(None) is None


@pytest.mark.parametrize(
    "patch, field, words",
    [
        ({"task_modes": {"extract": "fast"}}, "task_modes.extract", ["block", "verified", "ar"]),
        ({"task_modes": {"poetry": "ar"}}, "task_modes", ["unknown task type", "extract", "write"]),
        ({"canvas_sizes": [128, 64]}, "canvas_sizes", ["ascending"]),
        ({"canvas_sizes": []}, "canvas_sizes", ["at least one"]),
        ({"canvas_sizes": [1, 10**30]}, "canvas_sizes", ["may not exceed 256", "engine's largest canvas"]),  # issue 54: it validated
        ({"forcing": {"header": "content-type"}}, "forcing.header", ["standard HTTP header"]),  # issue 54: then every JSON request was a 400
        ({"forcing": {"header": "Authorization"}}, "forcing.header", ["standard HTTP header"]),
        ({"confidence_floor": 1.5}, "confidence_floor", ["less than or equal to 1"]),
        ({"agreement_floor": -0.2}, "agreement_floor", ["greater than or equal to 0"]),
        ({"steps": 0}, "steps", ["greater than or equal to 1"]),
        ({"steps_by_task": {"code": 999}}, "steps_by_task", ["1..256"]),
        ({"safe_mode": "turbo"}, "safe_mode", ["block", "verified", "ar"]),
        ({"shadow_verify_rate": -0.1}, "shadow_verify_rate", ["greater than or equal to 0"]),
        ({"forcing": {"model_aliases": {"x": "fast"}}}, "forcing.model_aliases", ["auto", "block"]),
        ({"forcing": {"header": "x mode"}}, "forcing.header", ["header name"]),
        ({"api_keys": {"sha256:abc": {}}}, "api_keys", ["64 lowercase hex"]),
        ({"api_keys": {"k": {"force_mode": "fast"}}}, "api_keys.k.force_mode", ["block"]),
        ({"load_aware": {"max_queue_ratio": 2}}, "load_aware.max_queue_ratio", ["less than or equal to 1"]),
        ({"colour": "red"}, "colour", ["Extra inputs are not permitted"]),
    ],
)
def test_invalid_policy_is_refused_with_field_level_reasons(patch, field, words):
    data = {**default_policy().content(), **patch}
    with pytest.raises(PolicyValidationError) as exc:
        validate_policy(data)
    errs = exc.value.errors
    hit = [e for e in errs if e.startswith(field + ":")]
    assert hit, f"no error for {field} in {errs}"
    for w in words:
        assert w in hit[0], f"{w!r} not in {hit[0]!r}"
    assert exc.value.status == 400 and exc.value.code == "invalid_policy"


def test_every_error_is_reported_not_just_the_first():
    with pytest.raises(PolicyValidationError) as exc:
        validate_policy({"steps": 0, "confidence_floor": 7, "safe_mode": "x"})
    fields = {e.split(":")[0] for e in exc.value.errors}
    assert fields == {"steps", "confidence_floor", "safe_mode"}
    assert all(re.match(r"^[\w.]+: .+", e) for e in exc.value.errors)


def test_bad_yaml_is_a_validation_error(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("steps: [unclosed\n")
    with pytest.raises(PolicyValidationError) as exc:
        read_policy_file(f)
    assert exc.value.errors[0].startswith("(yaml):")


def test_docs_describe_every_policy_field():
    text = DOCS.read_text()
    for model in (Policy, ForcingRules, KeyOverride, LoadAware):
        for name in model.model_fields:
            assert f"`{name}`" in text, f"docs/policies.md does not document {model.__name__}.{name}"


def test_default_yaml_round_trips_through_the_schema():
    p = read_policy_file(DEFAULT_POLICY_PATH)
    assert validate_policy(p.content()) == p.model_copy(update={"version": 0})
