"""The nested blocks of a routing policy (policies.blocks): strict (a misspelt field is refused),
frozen, and each validator names the valid values."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from policies.blocks import ForcingRules, KeyOverride, LoadAware


def test_unknown_fields_are_refused_and_blocks_are_frozen():
    with pytest.raises(ValidationError, match="alow_header"):
        ForcingRules(alow_header=False)
    rules = ForcingRules()
    with pytest.raises(ValidationError):
        rules.allow_header = False


def test_aliases_map_to_a_mode_or_auto_and_the_header_is_a_header_name():
    assert ForcingRules().model_aliases["tandem"] == "auto"
    with pytest.raises(ValidationError, match="valid targets: auto, block, verified, ar"):
        ForcingRules(model_aliases={"fast": "turbo"})
    with pytest.raises(ValidationError, match="at least one model alias"):
        ForcingRules(model_aliases={})
    assert ForcingRules(header="X-Tandem-Mode").header == "x-tandem-mode"
    with pytest.raises(ValidationError, match="without spaces or ':'"):
        ForcingRules(header="x tandem")


def test_task_names_are_checked_where_a_block_keys_by_task():
    assert KeyOverride(task_modes={"extract": "ar"}).task_modes == {"extract": "ar"}
    with pytest.raises(ValidationError, match="task_modes"):
        KeyOverride(task_modes={"extrakt": "ar"})
    with pytest.raises(ValidationError, match="equal_quality_tasks"):
        LoadAware(equal_quality_tasks=["poetry"])


def test_load_aware_bounds_are_enforced():
    assert LoadAware().enabled and LoadAware().cost_aware
    with pytest.raises(ValidationError, match="max_queue_ratio"):
        LoadAware(max_queue_ratio=1.5)
    with pytest.raises(ValidationError, match="min_gain"):
        LoadAware(min_gain=0.5)
    with pytest.raises(ValidationError, match="confidence_floor"):
        KeyOverride(confidence_floor=2.0)
