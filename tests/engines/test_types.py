"""The engine's typed request and result (engines.types): every mode is priced by an engine's kind of
work, stats count forwards after the prefill, and a load reads as a share of its queue."""

from __future__ import annotations

from engines.types import ENGINE_OF_MODE, MODES, DecodeStats, EngineLoad, GenerationRequest


def test_every_mode_has_an_engine_and_verified_rides_on_blocks():
    assert set(ENGINE_OF_MODE) == set(MODES) and ENGINE_OF_MODE["verified"] == ENGINE_OF_MODE["block"] != ENGINE_OF_MODE["ar"]


def test_tokens_per_forward_count_the_calls_after_the_prefill():
    s = DecodeStats(output_tokens=24, encoder_calls=3, decoder_calls=9, drafted=20, accepted=15, latency_s=0.0123)
    assert s.forwards == 12 and s.tokens_per_forward == 24 / 11 and s.acceptance_rate == 0.75
    d = s.as_dict()
    assert (d["forwards"], d["tokens_per_forward"], d["acceptance_rate"], d["latency_ms"]) == (12, 2.182, 0.75, 12.3)
    assert DecodeStats().tokens_per_forward == 0.0 and DecodeStats().acceptance_rate == 0.0  # nothing decoded: no division by zero


def test_a_load_is_a_share_of_its_queue_and_each_request_has_its_own_id():
    assert EngineLoad(queued=16, running=8, capacity=8, max_queue=64).queue_ratio == 0.25
    assert EngineLoad(queued=3, running=0, capacity=8, max_queue=0).queue_ratio == 3.0  # no queue: any wait is over it
    assert GenerationRequest(prompt="x").request_id != GenerationRequest(prompt="x").request_id
