"""``kfed drill``: failover drills on a live federation, and how their reports are made.

- ``command``: the ``kfed drill`` commands (outage, partition, ...): the run from start to end;
- ``probes``: the probe jobs a drill submits and how it tells their runs apart;
- ``breaking``: how a drill breaks a worker (a cut, a killed control plane, maintenance) and
  repairs it;
- ``watch``: what a drill watches while it runs (placements, runs, the manager's and the
  workers' state), sampled into the report;
- ``report``: the report (timeline, double runs, figures) and its text;
- ``plot``: the report's timeline drawn as a picture.
"""
