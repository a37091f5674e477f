"""What every canvas loop shares (engines.decode.canvas_settings): the stop flags are read from the device only every
`check_every` steps and never at a canvas's last step; rows batch together by their settings."""

from __future__ import annotations

import pytest
import torch

from engines.decode.canvas_settings import BlockParams, StopFlags


def test_stop_flags_are_read_every_check_every_steps_but_not_at_the_last():
    flags = StopFlags(batch_size=2, check_every=3)
    done = torch.tensor([True, False])
    read_at = [step for step, remaining in enumerate(range(8, 0, -1)) if flags.read(done, step, remaining)]
    assert read_at == [2, 5]  # steps 3 and 6 of 8; the 8th is the last, a read would wait for nothing
    assert flags.running == [False, True] and not flags.all_stopped
    flags.read(torch.tensor([True, True]), 8, 2)
    assert flags.all_stopped


def test_reading_after_every_step_is_the_librarys_loop():
    flags = StopFlags(batch_size=1, check_every=1)
    assert [flags.read(torch.tensor([False]), s, r) for s, r in enumerate((3, 2, 1))] == [True, True, False]
    with pytest.raises(AssertionError, match="check_every must be >= 1"):
        StopFlags(1, 0)


def test_params_group_rows_by_value():
    a = BlockParams(canvas=32, steps=8, t_min=0.4, t_max=0.8, stability_threshold=2, confidence_threshold=0.1, entropy_bound=0.1)
    assert a == BlockParams(**vars(a)) and len({a, BlockParams(**vars(a) | {"seeded": True})}) == 2  # seeded rows batch apart
