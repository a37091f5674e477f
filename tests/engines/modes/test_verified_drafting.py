"""Each verified row's drafting plan (engines.modes.verified_drafting): when a draft is granted, how big, and how
long a row waits for the next one, priced in AR steps by `DraftCosts` (no model needed)."""

from __future__ import annotations

import math

from engines.decode.canvas_settings import BlockParams
from engines.modes.verified_drafting import ALLOWANCE, MIN_DRAFT, MIN_STEPS, DraftCosts


def test_a_draft_that_ended_soon_leaves_the_tail_to_ar_steps():
    from engines.modes.verified_drafting import DraftControl

    costs = DraftCosts()  # no profile: assumed costs (the cheapest round is ~4.4 AR steps at batch 1)
    control = DraftControl(canvas=32, largest=256, first=False, credit=50.0)
    assert control.plan(costs, 1, 8, 1000)[0] > 0
    control.drafted(accepted=12, canvas=32, cost=5.0, ends_in=2)  # the draft's end: 2 tokens after the 13 written
    assert control.plan(costs, 1, 8, 1000) == (0, 0)  # 3 AR steps finish it for less than any round
    assert control.steps_to_draft(costs, 1, 8) >= 1
    for _ in range(3):  # the answer goes on past where the draft ended: its end was wrong, draft again
        control.stepped()
    assert control.ends_in is None and control.plan(costs, 1, 8, 1000)[0] > 0
    control.drafted(accepted=3, canvas=16, cost=5.0, ends_in=40)  # an end far off does not hold drafts back
    assert control.plan(costs, 1, 8, 1000)[0] > 0


def test_the_first_draft_is_granted_only_where_a_full_accept_would_pay():
    from engines.modes.verified_drafting import DraftControl

    class BatchingAR(DraftCosts):  # a draft step at batch 8 costs 8 AR steps there (a CPU's shape)
        def step(self, canvas: int, batch: int) -> float:
            return 1.5 if batch == 1 else 8.0

    params = BlockParams(canvas=32, steps=8, t_min=0.4, t_max=0.8, stability_threshold=2, confidence_threshold=0.1, entropy_bound=0.1)
    alone, busy = DraftControl.start(params, 256), DraftControl.start(params, 256)
    assert alone.plan(BatchingAR(), 1, 8, 1000)[0] == 32
    assert busy.plan(BatchingAR(), 8, 8, 1000) == (0, 0) and busy.first  # AR steps until credit covers a draft
    assert busy.steps_to_draft(BatchingAR(), 8, 8) > 1


def test_a_row_ar_hesitated_on_before_drafting_probes_rarely():
    # AR unsure of a row's token before its first draft: the prompt is unlike what the drafter
    # learned (hand-written prompts: every probe rejected). Such a row earns credit for a new try
    # HESITANT_SLOWDOWN times slower than a row whose AR was sure from the start.
    from engines.modes.verified_drafting import HESITANT_SLOWDOWN, DraftControl

    costs = DraftCosts()
    params = BlockParams(canvas=32, steps=8, t_min=0.4, t_max=0.8, stability_threshold=2, confidence_threshold=0.1, entropy_bound=0.1)
    sure, hesitant = DraftControl.start(params, 256), DraftControl.start(params, 256)
    hesitant.next_token(sure=False)
    hesitant.next_token(sure=True)
    sure.first = False  # both on credit only, neither has drafted
    assert hesitant.plan(costs, 1, 8, 1000) == (0, 0) and sure.plan(costs, 1, 8, 1000) == (0, 0)
    wait_sure, wait_hesitant = sure.steps_to_draft(costs, 1, 8), hesitant.steps_to_draft(costs, 1, 8)

    def steps_until_it_drafts(control: DraftControl) -> int:
        for steps in range(10 * HESITANT_SLOWDOWN * wait_sure):
            if control.plan(costs, 1, 8, 1000) != (0, 0):
                return steps
            control.stepped()
        raise AssertionError("never drafted")

    assert (steps_until_it_drafts(sure), steps_until_it_drafts(hesitant)) == (wait_sure, wait_hesitant)
    # the smallest draft's credit, earned ALLOWANCE a step (rounded up to whole steps), and the hesitant row's at a quarter of it
    assert wait_sure == math.ceil((MIN_STEPS + 1) * costs.step(MIN_DRAFT, 1) / ALLOWANCE)
    assert HESITANT_SLOWDOWN * (wait_sure - 1) < wait_hesitant <= HESITANT_SLOWDOWN * wait_sure
