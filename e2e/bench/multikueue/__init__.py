"""kfed in upstream Kueue's MultiKueue performance baseline shape (``python -m
e2e.bench.multikueue``): throughput, admission and quota-reservation latencies by upstream's
definitions, API requests per workload on every cluster, CPU and memory of every process."""
