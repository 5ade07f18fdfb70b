"""The scheduling tick: load the world, call the pure core, write its decisions back.

- ``run``: the single-flight lock and :func:`~scheduler.tick.run.run_tick`, the numbered
  steps of one cycle.
- ``snapshot``: the world read in bulk into the core's ``Snapshot``.
- ``usage``: fair-share usage charged and decayed, under the tick's lock.
- ``apply``: evictions, claims, pending reasons and borrowing written back.
- ``estimates``: start-time estimates, stored for the queue and asked for a what-if.

It calls down into ``scheduler.clusters`` (dispatch after commit) and ``scheduler.jobs``.
"""
