"""A seeded canvas's step budget and commits (engines.slot_schedule, issue 37): the steps follow its
slots, not the canvas, and slots are committed in confidence order."""

from __future__ import annotations

from engines.skeleton import template_for_schema
from engines.skeleton_canvas import CanvasLayout
from engines.slot_schedule import OpenSlot, SlotSchedule, step_budget


def open_slots(n: int) -> list[OpenSlot]:
    layout = CanvasLayout.build(template_for_schema({"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(n)}}),
                                lambda text: list(text.encode()), 0)
    return [OpenSlot(span, 12 * i) for i, span in enumerate(layout.spans)]


def test_the_step_budget_follows_the_slot_positions_not_the_canvas():
    assert [step_budget(n, 12) for n in (1, 4, 12, 24, 36, 200)] == [1, 1, 2, 3, 5, 12]
    assert step_budget(36, 2) == 2  # never past the request's max_denoising_steps


def test_slots_commit_in_confidence_order_and_a_confident_slot_after_one_step():
    schedule = SlotSchedule([open_slots(3)], [36], max_steps=12, threshold=0.01)
    assert schedule.budget == [5]
    # one step in: slot 2 is confident, so it is read at once; none is due yet (floor(3 * 1/5) = 0)
    assert [s.span.slot.path for s in schedule.commit(0, [2.0, 1.0, 0.001])] == ["$.f2"]
    assert schedule.commit(0, [2.0, 1.5]) == [] and schedule.commit(0, [2.0, 1.5]) == []  # floor(3 * 3/5) = 1: already
    # step 4: floor(3 * 4/5) = 2 are due; the less uncertain goes first
    assert [s.span.slot.path for s in schedule.commit(0, [2.0, 1.5])] == ["$.f1"]
    assert [s.span.slot.path for s in schedule.commit(0, [3.0])] == ["$.f0"] and schedule.done(0) and schedule.steps == [5]
