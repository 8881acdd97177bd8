"""The scheduling loop's pace, as Kueue's (``wait.UntilWithBackoff``, v0.17.0): a cycle that
admits nothing makes the loop pause before the next one, 1 ms doubling to 100 ms; a cycle
that admits resets it."""

from __future__ import annotations

import pytest

from manager.controllers.pacing import CyclePacing


def test_a_cycle_that_admits_lets_the_next_one_run_at_once() -> None:
    assert CyclePacing().after_cycle(admitted=True) == 0.0


def test_cycles_that_admit_nothing_pause_longer_each_time_up_to_100_ms() -> None:
    pacing = CyclePacing()

    pauses = [pacing.after_cycle(admitted=False) for _ in range(10)]

    assert pauses[:8] == pytest.approx([0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.1])
    assert pauses[8:] == [0.1, 0.1]


def test_an_admission_after_a_quiet_spell_resets_the_pause() -> None:
    pacing = CyclePacing()
    for _ in range(5):
        pacing.after_cycle(admitted=False)

    assert pacing.after_cycle(admitted=True) == 0.0
    assert pacing.after_cycle(admitted=False) == pytest.approx(0.001)
