"""Requests and a decode with rows admitted and cancelled mid-batch, shared by the compiled-call
tests (tests/engines/batch/test_compiled.py) and the static cache's (test_static_cache.py)."""

from __future__ import annotations

from dataclasses import replace

from engines import DiffusionEngine
from tests.engines.factories import PROMPTS, chat

SYSTEM = "You are a careful assistant. Answer in one short line, and use the tools only when asked. " * 3


def requests(mode: str, n: int = 3, **kw):
    greedy = {} if mode == "block" else {"temperature": 0.0}
    return [chat(p, mode=mode, seed=i, max_new_tokens=24, **greedy, **kw) for i, p in enumerate(PROMPTS[:n])]


def run_with_admission_and_cancel(engine: DiffusionEngine, mode: str) -> tuple[list[int], list[int]]:
    """Row A starts alone, row B joins at the second admission and row C at the third; A is cancelled
    at the second, as B joins. Returns (B's tokens, C's tokens)."""
    reqs = requests(mode)
    reqs[0] = replace(reqs[0], max_new_tokens=400)  # A cannot finish before it is cancelled
    checked = [engine.validate(r) for r in reqs]
    a, b, c = (engine.row(r, ids) for r, (ids, _) in zip(reqs, checked))
    calls = {"n": 0}

    def admit(room: int):
        calls["n"] += 1
        if calls["n"] == 2:
            a.cancelled = True  # as the scheduler does when A's client goes away
        return {2: [b], 3: [c]}.get(calls["n"], [])

    with engine._lock:
        engine.run([a], mode, checked[0][1], admit=admit, max_batch=4)
    assert b.finished and c.finished and len(a.output) < 400, "A left early; B and C, admitted mid-batch, finished"
    return b.output, c.output
