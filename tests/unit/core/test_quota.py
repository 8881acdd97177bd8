"""Hierarchical quota arithmetic: nominal, borrowing limits and lending limits."""

from __future__ import annotations

from manager.core import quota
from manager.core.cache import Cache
from manager.core.model import ClusterQueueName, FlavorName, FlavorResource, ResourceName

from .builders import make_cluster_queue, make_cohort, make_flavor_quotas

GPU: FlavorResource = (FlavorName("a100"), ResourceName("nvidia.com/gpu"))


def cache_with(*queues: tuple[str, str | None, int, int | None, int | None]) -> Cache:
    """Queues as (name, cohort, nominal, borrowing limit, lending limit) of a100 GPUs."""
    cache = Cache()
    for name, cohort, nominal, borrowing, lending in queues:
        builder = make_cluster_queue(name).resource_group(
            make_flavor_quotas("a100").resource("nvidia.com/gpu", nominal, borrowing, lending).obj()
        )
        if cohort is not None:
            builder = builder.cohort(cohort)
        cache.upsert_cluster_queue(builder.obj())
    return cache


def use(cache: Cache, name: str, value: int) -> None:
    quota.add_usage(cache.cluster_queues[ClusterQueueName(name)], GPU, value)


def available(cache: Cache, name: str) -> int:
    return quota.available(cache.cluster_queues[ClusterQueueName(name)], GPU)


def test_without_cohort_only_nominal_is_available() -> None:
    cache = cache_with(("a", None, 4, None, None))
    use(cache, "a", 3)
    assert available(cache, "a") == 1
    assert quota.potential_available(cache.cluster_queues[ClusterQueueName("a")], GPU) == 4


def test_cohort_lends_unused_nominal() -> None:
    cache = cache_with(("a", "co", 4, None, None), ("b", "co", 4, None, None))
    use(cache, "b", 1)
    assert available(cache, "a") == 7


def test_borrowing_limit_caps_what_is_taken_from_the_cohort() -> None:
    cache = cache_with(("a", "co", 4, 2, None), ("b", "co", 4, None, None))
    assert available(cache, "a") == 6
    use(cache, "a", 5)
    assert available(cache, "a") == 1


def test_lending_limit_keeps_part_of_the_quota_home() -> None:
    cache = cache_with(("a", "co", 4, None, None), ("b", "co", 4, None, 1))
    # b lends at most 1 of its 4.
    assert available(cache, "a") == 5
    assert available(cache, "b") == 8
    use(cache, "a", 5)
    assert available(cache, "b") == 3


def test_usage_bubbles_up_only_beyond_local_quota() -> None:
    cache = cache_with(("a", "co", 4, None, 1), ("b", "co", 4, None, None))
    use(cache, "a", 3)  # within the 3 kept home: the cohort sees nothing
    cohort = cache.cohorts[next(iter(cache.cohorts))]
    assert cohort.usage.get(GPU, 0) == 0
    use(cache, "a", 2)
    assert cohort.usage[GPU] == 2
    quota.remove_usage(cache.cluster_queues[ClusterQueueName("a")], GPU, 2)
    assert cohort.usage[GPU] == 0


def test_hierarchical_cohorts_share_through_the_parent() -> None:
    cache = cache_with(("a", "left", 2, None, None), ("b", "right", 2, None, None))
    cache.upsert_cohort(make_cohort("left", "root"))
    cache.upsert_cohort(make_cohort("right", "root"))
    cache.upsert_cohort(
        make_cohort("root", None, make_flavor_quotas("a100").resource("nvidia.com/gpu", 3).obj())
    )
    # a: its own 2 + b's 2 + the root's own 3.
    assert available(cache, "a") == 7
    use(cache, "b", 4)
    assert available(cache, "a") == 3
    level, may_reclaim = quota.borrowing_level(cache.cluster_queues[ClusterQueueName("a")], GPU, 3)
    assert (level, may_reclaim) == (2, False)


def test_borrowing_level_zero_within_nominal() -> None:
    cache = cache_with(("a", "co", 4, None, None), ("b", "co", 4, None, None))
    assert quota.borrowing_level(cache.cluster_queues[ClusterQueueName("a")], GPU, 4) == (0, True)
    assert quota.borrowing_level(cache.cluster_queues[ClusterQueueName("a")], GPU, 5)[0] == 1
