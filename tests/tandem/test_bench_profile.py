"""`tandem bench engines --write-profile --acceptance-from`: per-task verified acceptance comes from
`tandem eval model --json` output, and anything else is refused before minutes of measuring."""

from __future__ import annotations

import json

import pytest

from tandem.bench.engines import acceptance_by_task
from engines.errors import InvalidRequestError
from tandem.main import main as tandem


def test_acceptance_per_task_from_eval_records(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text(json.dumps([
        {"family": "code", "mode": "verified", "acceptance_rate": 0.98},
        {"family": "reason", "mode": "verified", "acceptance_rate": 0.005},
        {"family": "code", "mode": "ar", "acceptance_rate": None},
    ]))
    assert acceptance_by_task(str(path)) == {"code": 0.98, "reason": 0.005}


@pytest.mark.parametrize("content", ["nope", "[]", '[{"mode": 3}]', '{"family": "code"}'])
def test_anything_else_is_a_clear_error(tmp_path, content):
    path = tmp_path / "eval.json"
    path.write_text(content)
    with pytest.raises(InvalidRequestError, match="is not `tandem eval model --json` output"):
        acceptance_by_task(str(path))
    assert tandem(["bench", "engines", "--acceptance-from", str(path)]) == 2  # refused before measuring


def test_a_missing_file_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        tandem(["bench", "engines", "--acceptance-from", str(tmp_path / "missing.json")])
    assert exc.value.code == 2 and "no such file" in capsys.readouterr().err


def test_canvas_costs_are_measured_per_task_family(engine, drafts_anywhere):
    """What the cost profile's per-task figures come from: block steps per canvas (never past the
    budget) and verified rounds per canvas (at least one), per suite family."""
    from tandem.bench.engines import canvas_costs_by_task

    steps, per_round = canvas_costs_by_task(engine, steps=2, n=1, skip_verified=("reason", "write", "plan", "extract"))
    assert set(steps) == {"extract", "classify", "summarize", "plan", "code", "reason", "write"}
    assert all(1 <= s <= 2 for s in steps.values())
    assert set(per_round) == {"classify", "summarize", "code"} and all(r >= 1 for r in per_round.values())


def test_ar_steps_are_priced_one_token_per_call(engine, monkeypatch):
    """The profile's AR figure is an AR step with prompt lookup off (the cost model counts one call
    per AR token), and the engine's lookup is back on after it."""
    from tandem.bench.engines import ar_step_ms, bench_prompts
    from engines.types import GenerationRequest

    prompts = [engine.prompt_ids(GenerationRequest(messages=m)) for m in bench_prompts(2)]
    seen, run = [], engine.run
    monkeypatch.setattr(engine, "run", lambda *a, **k: (seen.append(engine.lookup), run(*a, **k))[1])
    assert ar_step_ms(engine, prompts, steps=2, batch=2) > 0
    assert seen and not any(seen) and engine.lookup
