"""Upstream Kueue's scheduler-performance scenarios on kfed: ``python -m e2e.bench.scheduler``."""
