"""Where kfed's own example manifests live in the checkout (``examples/``).

The demo, the kind scenario and the tests read the article's manifests from here, never from
outside the checkout: a user's clone is all they have.
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ARTICLE = EXAMPLES / "article"
"""The article's queues and its two jobs, as a user applies them to the manager."""
REGISTRATION = EXAMPLES / "registration"
"""The objects a platform team writes on the manager to register workers by hand."""
WORKERS = EXAMPLES / "workers"
"""Each test-bed worker's own queues (the GPUs its fake nodes have)."""
JOBS = EXAMPLES / "jobs"
"""A JobSet, a TrainJob and a RayCluster for the article's H100 queue."""
DRA = EXAMPLES / "dra"
"""A Job whose pod gets 2 H100s through DRA: its DeviceClass, template, queues and mapping."""
TAS = EXAMPLES / "tas"
"""Training placed by topology: the Topology, TAS queues on manager and workers, a rack gang."""

QUEUES = ARTICLE / "01-queues.yaml"
LIGHT_JOB = ARTICLE / "02-light-job.yaml"
HEAVY_JOB = ARTICLE / "03-heavy-job.yaml"
ARTICLE_JOBS = (LIGHT_JOB, HEAVY_JOB)
MULTIKUEUE_CHECK = REGISTRATION / "03-multikueue-check.yaml"
CLUSTERQUEUE_PATCH = REGISTRATION / "04-clusterqueue-patch.yaml"
