"""A replica's warm-up (engines.replica.warm_up): a short request in each mode, alone and two at a time,
leaving the prefix cache as empty as a fresh replica's. (That it leaves a compiled engine nothing
to compile: tests/engines/batch/test_compiled.py, which holds the compiled engine.)"""

from __future__ import annotations

from engines.types import GenerationRequest
from engines.replica.warm_up import warm_up

SYSTEM = "You answer with the fields asked for and nothing else. Keep names as written and dates as YYYY-MM-DD. " * 4


def test_it_decodes_every_mode_and_empties_the_prefix_cache(engine):
    head = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Extract: Ada, Paris."}]
    engine.generate(GenerationRequest(messages=head, mode="ar", max_new_tokens=2))
    assert engine.prefix_cache.tokens > 0  # a conversation's head stored
    seconds = warm_up(engine)
    assert seconds > 0 and engine.prefix_cache.tokens == 0
