"""A compiled engine's warm-up: the calls' compiled variants made before a replica reports ready.

A compiled call compiles each variant on its first use (10-175 s on a 2-core CPU): one row or
several, one token or several (an AR step; prefill, commit, verified's check), a canvas step. A
short request in each mode, alone and two at a time, makes them all, so the first users' requests
find them made (engines/replica/deployment.py runs it in the replica's constructor; tested:
tests/engines/batch/test_compiled.py)."""

from __future__ import annotations

import time

from engines.types import MODES, GenerationRequest


def warm_up(engine, modes: tuple[str, ...] = MODES) -> float:
    """Decode a short request in each of `modes` on `engine` (a `DiffusionEngine`), alone and two at a
    time. Returns the seconds it took. The prefix cache is left empty."""
    began = time.perf_counter()
    prompt = [{"role": "user", "content": "Warm up: say ok."}]
    for mode in modes:
        one = GenerationRequest(messages=prompt, mode=mode, seed=0, max_new_tokens=8)
        engine.generate_batch([one])
        engine.generate_batch([one, one])
    if engine.prefix_cache is not None:
        engine.prefix_cache.clear()
    return time.perf_counter() - began
