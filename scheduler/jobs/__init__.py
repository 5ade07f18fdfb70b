"""The job state machine: the only code that moves ``Job.state``.

- ``transitions``: :func:`transition` (a conditional ``UPDATE ... WHERE state IN (...)``
  that reports whether it won) and :func:`record_event`; every move goes through it.
- ``submit``: a new PENDING job after the quotas that count the queue.
- ``verbs``: what a person asks of a job (cancel, hold, release, requeue).
- ``request``: THE one list of request fields, and a job's view as the core's
  ``PendingJob``.
- ``allocations``, ``blockers``: the codecs of ``Job.allocations`` and
  ``Job.pending_blockers``.
- ``remote``: work handed to a job's workload manager after the database commits.
- ``hours``: GPU-hours and waits per account and hour, recorded as attempts end.

Everything above it (``clusters``, ``tick``, ``reads``, ``api``) calls down into it;
it imports only the models, the core and the backends.
"""
