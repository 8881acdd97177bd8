"""The collector's pace every kfed process sets (``process.pace_garbage_collector``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from manager.kube import process


@pytest.fixture
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.mark.usefixtures("thresholds")
def test_young_collections_are_paced_and_the_older_generations_keep_their_ratios() -> None:
    gc.set_threshold(700, 10, 10)

    process.pace_garbage_collector()

    assert gc.get_threshold() == (process.YOUNG_COLLECTION_EVERY, 10, 10)
    assert process.YOUNG_COLLECTION_EVERY > 700


@pytest.mark.usefixtures("thresholds")
def test_cycles_are_still_collected() -> None:
    """Paced, not off: garbage in reference cycles is freed once enough is allocated."""
    process.pace_garbage_collector(young_every=100)
    gc.collect()

    class Node:
        other: object = None

    freed_before = sum(g["collected"] for g in gc.get_stats())
    for _ in range(1_000):
        a, b = Node(), Node()
        a.other, b.other = b, a
    del a, b
    assert sum(g["collected"] for g in gc.get_stats()) > freed_before
