"""The job framework: one adapter per kind of job kfed queues and federates (upstream Kueue's
``jobframework.GenericJob``, reduced to what kfed needs). See ``base.py`` for the contract and
``docs/jobs.md`` for how to add a kind."""
