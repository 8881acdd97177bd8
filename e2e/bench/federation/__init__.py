"""``python -m e2e.bench.federation``: kfed's dispatch and failover benchmark on a full local
federation (manager + 3 workers). See ``__main__`` for what it measures and
docs/performance-federation.md for how to read the figures.

- ``jobs``: the Jobs (generator) and the probe of a drill;
- ``topology``: which worker offers which flavor, nodes, queues, registration;
- ``bed``: the local federation, shims and proxies, started and removed;
- ``processes``: kfed's manager and shims as subprocesses, their HTTP endpoints;
- ``recorder`` / ``dispatchrun``: one dispatch mode, measured from outside;
- ``doublerun`` / ``drills``: the partition drills;
- ``apirequests``: every apiserver's requests per workload, net of an idle window;
- ``stats``, ``managermetrics``, ``report``: the figures and their table and JSON.
"""
