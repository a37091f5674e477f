"""Decode loops as generators (engines.decode.steps): `drain` runs a loop to its end, a step at a time,
and returns what it returns; an error in a step reaches whoever drains it."""

from __future__ import annotations

import pytest

from engines.decode.steps import drain


def test_drain_runs_every_step_and_returns_the_loops_value():
    stepped = []

    def loop():
        for i in range(3):
            stepped.append(i)
            yield
        return "done"

    assert drain(loop()) == "done" and stepped == [0, 1, 2]
    assert drain(iter(())) is None  # a loop with nothing to do


def test_a_step_that_fails_fails_the_drain_after_the_steps_before_it():
    stepped = []

    def loop():
        stepped.append("prefill")
        yield
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        drain(loop())
    assert stepped == ["prefill"]
