"""`tandem eval model`: request sizing, aggregation (a perfect model scores 1.0), and a run end to
end through the CLI on the tiny random checkpoint (canvas 32): JSON records, plot, verified == AR."""

from __future__ import annotations

import json

import pytest

from lab.model import evaluate
from lab.model.evaluate import (
    MARGIN,
    Outcome,
    Setting,
    aggregate,
    canvas_sizes,
    make_request,
    markdown_tables,
    max_new_tokens_for,
    settings,
)
from lab.model.tasks import FAMILIES, LONG_FAMILIES, generate_suite
from tandem.main import main as tandem

RECORD_KEYS = {"family", "mode", "steps", "canvas", "canvas_sizes", "exact_match", "family_score", "tokens_per_forward", "p50_ms", "n"}


def outcome(item, text: str, tokens_per_forward: float = 4.0, latency_s: float = 0.25, canvas: int | None = 64) -> Outcome:
    return Outcome(item=item, text=text, tokens_per_forward=tokens_per_forward, latency_s=latency_s, canvas_size=canvas)


def test_right_sized_canvases_cap_at_the_model_canvas():
    assert canvas_sizes(256) == (64, 128, 256)
    assert canvas_sizes(128) == (64, 128)
    assert canvas_sizes(32) == (32,)


def test_max_new_tokens_is_answer_plus_margin_capped_by_context():
    assert max_new_tokens_for(40, prompt_tokens=100, context=4096, canvas=None) == 40 + MARGIN
    assert max_new_tokens_for(5000, prompt_tokens=96, context=4096, canvas=None) == 4000
    # block/verified need whole canvases plus one slot: (4096 - 96 - 1) // 256 * 256
    assert max_new_tokens_for(5000, prompt_tokens=96, context=4096, canvas=256) == 3840


def test_requests_on_the_tiny_checkpoint_use_its_32_token_canvas(engine):
    reason = generate_suite(1, families=("reason",))[0]
    n = reason.count_tokens(engine.tokenizer)
    assert n + MARGIN > 32, "a long answer must need several canvases"
    for setting in (Setting("block", 4, "right"), Setting("block", 4, "full"), Setting("verified", 12, "right")):
        req = make_request(engine, reason, setting, seed=0)
        assert req.canvas == 32 and req.max_new_tokens == n + MARGIN and req.max_denoising_steps == setting.steps
        engine.validate(req)  # fits the context as the engine checks it
    ar = make_request(engine, reason, Setting("ar"), seed=0)
    assert ar.canvas is None and ar.temperature == 0 and ar.max_new_tokens == n + MARGIN


def test_perfect_outputs_score_one_and_wrong_outputs_less():
    items = generate_suite(2)
    setting = Setting("block", 8, "right")
    records = aggregate(setting, [outcome(i, i.answer) for i in items])
    assert [r["family"] for r in records] == list(FAMILIES)
    for r in records:
        assert RECORD_KEYS <= set(r)
        assert (r["mode"], r["steps"], r["canvas"], r["canvas_sizes"], r["n"]) == ("block", 8, "right", [64], 2)
        assert r["exact_match"] == 1.0 and r["family_score"] == 1.0
        assert r["tokens_per_forward"] == 4.0 and r["p50_ms"] == pytest.approx(250.0)

    # One of two right per family: exact match 0.5; the empty output earns no partial credit.
    half = aggregate(setting, [outcome(i, i.answer if k % 2 == 0 else "") for k, i in enumerate(items)])
    for r in half:
        assert r["exact_match"] == 0.5 and r["family_score"] == pytest.approx(0.5), r

    # A long answer with its last line wrong: not exact, partial credit strictly between 0 and 1.
    long_items = [i for i in items if i.family in LONG_FAMILIES]
    partial = aggregate(setting, [outcome(i, i.answer.rsplit("\n", 1)[0] + "\nwrong.") for i in long_items])
    for r in partial:
        assert r["exact_match"] == 0.0 and 0.0 < r["family_score"] < 1.0, r


def test_tables_have_one_row_per_setting():
    items = generate_suite(1)
    records = [r for s in settings((4, 12)) for r in aggregate(s, [outcome(i, i.answer) for i in items])]
    table = markdown_tables(records)
    assert table.count("| block | 4 | right |") == 2 and table.count("| ar | - | - |") == 2  # quality and cost tables
    assert "1.00 / 1.00" in table  # long families: exact / family score


def test_equal_quality_tasks_are_those_where_block_matches_ar():
    items = generate_suite(2, families=("classify", "extract", "code"))
    wrong = {"extract", "code"}  # block gets these wrong, AR gets everything right
    records = aggregate(Setting("ar"), [outcome(i, i.answer) for i in items])
    records += aggregate(Setting("block", 12, "right"), [outcome(i, "nope" if i.family in wrong else i.answer) for i in items])
    records += aggregate(Setting("block", 4, "right"), [outcome(i, i.answer) for i in items])  # other settings do not count
    assert evaluate.equal_quality_tasks(records) == ["classify"]
    assert evaluate.equal_quality_tasks(records, steps=4) == ["extract", "classify", "code"]


def test_long_families_are_judged_by_their_family_score_short_ones_by_exact_match():
    def record(family, mode, exact, family_score):
        return {"family": family, "mode": mode, "steps": 12 if mode == "block" else None, "canvas": "right" if mode == "block" else None,
                "exact_match": exact, "family_score": family_score}

    records = [record("write", "ar", 0.25, 0.85), record("write", "block", 0.0, 0.87),  # token accuracy ties: equal
               record("extract", "ar", 0.50, 0.80), record("extract", "block", 0.35, 0.80),  # one wrong field is wrong
               record("reason", "ar", 0.0, 0.40), record("reason", "block", 0.0, 0.20)]  # fewer right lines
    assert evaluate.equal_quality_tasks(records) == ["write"]


def test_cli_end_to_end_on_the_tiny_checkpoint(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    # A random model accepts almost no draft token, so each verified token costs a whole draft:
    # 2 draft steps instead of 12 keep the test fast (verified == AR holds for any step count).
    monkeypatch.setattr(evaluate, "VERIFIED_STEPS", 2)
    out, png = tmp_path / "eval.json", tmp_path / "eval.png"
    argv = ["eval", "model", "--checkpoint", str(tiny_checkpoint), "--quick", "--n", "2", "--families", "classify,code"]
    assert tandem(argv + ["--json", str(out), "--plot", str(png)]) == 0

    records = json.loads(out.read_text())
    want = {(s.mode, s.steps, s.canvas) for s in settings((4, 12))}
    assert {(r["mode"], r["steps"], r["canvas"]) for r in records} == want
    assert sorted({r["family"] for r in records}) == ["classify", "code"] and len(records) == 2 * len(want)
    for r in records:
        assert RECORD_KEYS <= set(r) and r["n"] == 2
        # random weights write no answer, nor any field or label of one: every score is exactly 0
        assert (r["exact_match"], r["family_score"]) == (0.0, 0.0), r
        assert r["p50_ms"] > 0  # wall time: positive is all a test can say of it
        assert r["canvas_sizes"] == ([] if r["mode"] == "ar" else [32])  # right-sizing capped at canvas_length
    by = {(r["family"], r["mode"], r["steps"], r["canvas"]): r for r in records}
    for family in ("classify", "code"):
        ar = by[family, "ar", None, None]
        assert ar["tokens_per_forward"] >= 1.0  # every AR forward after the prefill writes at least one token
        # the random model is unsure of every token (engines.modes.verified_drafting.SURE_ENTROPY): verified drafts nothing,
        # so it decodes as AR does, forward for forward
        verified = by[family, "verified", 2, "right"]
        assert (verified["acceptance_rate"], verified["tokens_per_forward"]) == (0.0, ar["tokens_per_forward"])
        for canvas in ("right", "full"):  # fewer denoising steps per canvas: more tokens per forward
            assert by[family, "block", 4, canvas]["tokens_per_forward"] > by[family, "block", 12, canvas]["tokens_per_forward"]
    verified = [r for r in records if r["mode"] == "verified"]
    assert [r["mismatches_vs_ar"] for r in verified] == [0, 0]

    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "verified == AR (greedy): 0 mismatches in 4 items" in printed
    assert "| verified | 2 | right |" in printed
