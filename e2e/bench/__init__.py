"""Benchmarks: ``python -m e2e.bench.core`` measures the pure admission core."""
