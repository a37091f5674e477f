"""When a seeded canvas's slots are read (engines.modes.seeded_schedule, issue 37): a free slot's value grows
from its start, a token a step at least and a confident run at once; an enum is chosen when sure or
once the free slots around it are read; nothing runs past the request's step limit."""

from __future__ import annotations

from engines.skeleton import template_for_schema
from engines.modes.seeded_layout import CanvasLayout
from engines.modes.seeded_schedule import PREFIX_ENTROPY, OpenSlot, SlotSchedule

F = 0  # the filler
SURE, UNSURE = PREFIX_ENTROPY / 10, PREFIX_ENTROPY * 10


def open_slots(properties: dict) -> list[OpenSlot]:
    layout = CanvasLayout.build(template_for_schema({"type": "object", "properties": properties}), lambda text: list(text.encode()), F)
    slots, at = [], 0
    for span in layout.spans:
        slots.append(OpenSlot(span, at))
        at += span.capacity
    return slots


def step(schedule: SlotSchedule, per_slot: list[tuple[list[int], list[float]]], choice: dict | None = None):
    """One step of row 0: each open slot's argmax and entropies, padded to its capacity."""
    argmax, entropy = [], []
    for o, (tokens, ents) in zip(schedule.open[0], per_slot):
        argmax += tokens + [F] * (o.span.capacity - len(tokens))
        entropy += ents + [UNSURE] * (o.span.capacity - len(ents))
    return schedule.advance(0, argmax, entropy, choice or {})


def test_a_value_grows_a_token_a_step_and_ends_at_the_filler():
    schedule = SlotSchedule([open_slots({"a": {"type": "string"}})], max_steps=12, threshold=0.01, filler=F)
    assert step(schedule, [([5, 6, 7], [UNSURE, UNSURE, UNSURE])]) == []  # the first token is read however unsure
    assert schedule.prefixes(0)[0][1] == [5]
    assert step(schedule, [([5, 9, 7], [SURE, SURE, UNSURE])]) == [] and schedule.prefixes(0)[0][1] == [5, 9]  # the next one, not past an unsure
    (done,) = step(schedule, [([5, 9, 7, F], [SURE, SURE, SURE, SURE])])  # a confident run, then the filler: read at once
    assert done.value == [5, 9, 7] and not done.filled and schedule.done(0) and schedule.steps == [3]


def test_a_value_that_fills_its_slot_is_marked_to_be_widened():
    slots = open_slots({"a": {"type": "string"}})
    schedule = SlotSchedule([slots], max_steps=12, threshold=0.01, filler=F)
    capacity = slots[0].span.capacity
    (done,) = step(schedule, [(list(range(1, capacity + 1)), [SURE] * capacity)])
    assert done.filled and done.value == list(range(1, capacity + 1))


def test_at_the_step_limit_every_open_slot_is_read_from_the_argmax():
    schedule = SlotSchedule([open_slots({"a": {"type": "string"}, "b": {"type": "string"}})], max_steps=2, threshold=0.01, filler=F)
    step(schedule, [([1, 2, 3], [UNSURE] * 3), ([4, 5], [UNSURE] * 2)])
    done = step(schedule, [([1, 2, 3], [UNSURE] * 3), ([4, 5], [UNSURE] * 2)])
    assert [d.value for d in done] == [[1, 2, 3], [4, 5]] and schedule.done(0) and schedule.steps == [2]


def test_an_enum_is_read_when_sure_or_once_the_free_slots_are():
    props = {"city": {"type": "string"}, "tier": {"enum": ["gold", "silver"]}}
    schedule = SlotSchedule([open_slots(props)], max_steps=12, threshold=0.01, filler=F)
    tier = schedule.open[0][1]
    assert step(schedule, [([7, 8], [UNSURE, UNSURE]), ([], [])], {tier.span.start: 0.5}) == []  # unsure, and the city still open
    done = step(schedule, [([7, 8], [SURE, SURE]), ([], [])], {tier.span.start: 0.5})
    assert [(d.slot.span.slot.path, d.value) for d in done] == [("$.city", [7, 8]), ("$.tier", None)]  # read with the city

    sure = SlotSchedule([open_slots(props)], max_steps=12, threshold=0.01, filler=F)
    (done,) = step(sure, [([7, 8], [UNSURE, UNSURE]), ([], [])], {sure.open[0][1].span.start: 0.001})
    assert done.slot.span.slot.path == "$.tier" and not sure.done(0)


def test_a_label_alone_is_read_after_one_step():
    schedule = SlotSchedule([open_slots({"label": {"enum": ["spam", "ham"]}})], max_steps=12, threshold=0.01, filler=F)
    (done,) = step(schedule, [([], [])], {schedule.open[0][0].span.start: 0.4})
    assert done.value is None and schedule.done(0) and schedule.steps == [1]
