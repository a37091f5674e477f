"""The task-family generators, one module per task type (policies.schema.TASKS).

Each module has `generate(rng) -> Sample`, its family's own templates. Two more kinds of generator
widen the phrasing:

- `payload_instruction(rng, payload_tokens)` (extract, classify, summarize, rewrite): an
  instruction for the shared payload (parts.payload), so that these four tasks are also seen on the
  same texts and only the instruction tells them apart; `over_payload` wraps it;
- `extra_phrasings(rng)` (short_qa, reason, code, write): more phrasings for tasks whose input is
  not a payload.

`draw_sample` chooses between them: half the payload tasks go over the shared payload, three in ten
of the others use the extra phrasings, plan always uses its own.
"""

from __future__ import annotations

from collections.abc import Callable

from router.decision.features import approx_tokens

from ..parts import payload
from ..rng import Rng
from ..sample import Sample
from . import classify, code, extract, plan, reason, rewrite, short_qa, summarize, write

GENERATORS: dict[str, Callable[[Rng], Sample]] = {
    "extract": extract.generate, "classify": classify.generate, "summarize": summarize.generate,
    "rewrite": rewrite.generate, "plan": plan.generate, "short_qa": short_qa.generate,
    "reason": reason.generate, "code": code.generate, "write": write.generate,
}
PAYLOAD_INSTRUCTIONS: dict[str, Callable[[Rng, int], tuple[str, int]]] = {
    "extract": extract.payload_instruction, "classify": classify.payload_instruction,
    "summarize": summarize.payload_instruction, "rewrite": rewrite.payload_instruction,
}
EXTRA_PHRASINGS: dict[str, Callable[[Rng], Sample]] = {
    "short_qa": short_qa.extra_phrasings, "reason": reason.extra_phrasings,
    "code": code.extra_phrasings, "write": write.extra_phrasings,
}


def draw_sample(rng: Rng, task: str) -> Sample:
    """One `Sample` of `task`, from the family's templates, the shared payload or the extra phrasings."""
    if task not in GENERATORS:
        raise ValueError(f"unknown task {task!r}; valid tasks: {', '.join(GENERATORS)}")
    # the coin is flipped only for tasks that have the alternative: plan draws nothing here
    if task in PAYLOAD_INSTRUCTIONS and rng.chance(0.5):
        return over_payload(rng, task)
    if task in EXTRA_PHRASINGS and rng.chance(0.3):
        return EXTRA_PHRASINGS[task](rng)
    return GENERATORS[task](rng)


def over_payload(rng: Rng, task: str) -> Sample:
    """An instruction for `task` from a wide set of phrasings around a shared payload."""
    text = payload(rng)
    n = approx_tokens(text)  # payload() is never empty, so this is >= 1
    ins, tokens = PAYLOAD_INSTRUCTIONS[task](rng, n)
    user = rng.choice([f"{ins}: {text}", f"{ins}.\n\n{text}", f"{text}\n\n{ins}.", f"{ins}:\n\"{text}\"",
                       f"{ins}\n---\n{text}"])
    return Sample(task, user, tokens)
