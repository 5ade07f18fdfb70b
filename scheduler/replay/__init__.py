"""Trace replay: run a GPU job trace through the real ``schedule()`` and measure it.

A discrete-event simulator. Nothing sleeps and nothing reads the clock: time is the
trace's own seconds, and at every instant where something happens (jobs submitted,
jobs ended) the simulator builds a :class:`~scheduler.core.types.Snapshot`, calls the
very ``schedule(snapshot, policy, now)`` the live scheduler calls, and applies the
starts it returns. What comes out is one record per job (when it started, where, when it
ended) and the quality figures of :class:`Metrics`.

Usage::

    python -m scheduler.replay TRACE.csv --nodes 88 --gpus-per-node 8 \\
        --policy fifo [--policy ...] [--limit N] [--window-start S] [--window-end S]

prints one JSON object per figure and line (see :func:`scheduler.replay.cli.run`).

Modelling rules (each is a decision a reader of the figures needs to know):

1. **Cluster**: ``N`` identical nodes of ``G`` GPUs, or the node groups of a JSON
   cluster file (``--cluster``, :func:`load_cluster_file`); GPUs are model ``"GPU"``,
   80 GiB, compute capability 9.0 unless the file says otherwise. GPUs are the only
   resource: jobs ask for no CPUs and no memory; ``G`` below is the largest node's GPUs.
2. **Request shape**: a job of ``g <= G`` GPUs asks for 1 node x ``g`` GPUs; a job of
   ``g > G`` GPUs is a gang of ``ceil(g / G)`` whole nodes x ``G`` GPUs. When ``g`` is
   not a multiple of ``G`` (Philly has 7 jobs of 12 GPUs) it is rounded UP to whole
   nodes, as the Helios "consolidate" placement does: the job holds all
   ``ceil(g / G) * G`` GPUs, but utilization counts only the ``g`` it uses (so it stays
   under :attr:`Bounds.utilization_bound`). A job no schedulable node set could
   ever hold (more nodes than the cluster has) is not replayed; it is counted in
   ``Metrics.unplaceable``.
3. **Walltime**: a trace without requested limits gets :func:`standard_walltime`, the
   duration rounded up to the next of 1, 4, 12, 24, 72, 168 hours (beyond 168 h, up to
   a multiple of 168 h). ``walltime_noise`` > 0 first multiplies the duration by a
   log-normal factor ``exp(N(0, noise))`` drawn from a generator seeded by
   ``(seed, job id)``, so the same job gets the same walltime whatever else is in the
   trace, and users who underestimate get killed (TIMEOUT).
4. **Run time**: a job that starts at ``t`` ends at ``t + min(duration, walltime)``;
   when ``duration > walltime`` it is killed at the walltime and counted as a timeout.
5. **Order**: jobs keep the trace's row order for equal submit times (the simulator's
   job ids are positions in submission order, so ``schedule()``'s ``(submitted_at, id)``
   order is arrival order); ``submitted_at`` is ``EPOCH + submit_s``.
6. **Cycles**: events at the same second are applied together (ends first, then
   submissions), then ``schedule()`` is called once if any job is pending. A cycle is
   never skipped for any other reason, so policies that look at ``now`` (ages,
   reservations) see every change.

The package sits over the core and beside the application (it imports only the standard
library and ``scheduler.core``): ``trace.py`` (trace formats, cluster files, walltime
models, requests), ``simulator.py`` (the replay loop), ``metrics.py`` (figures and
bounds), ``backtest.py`` (the p50 and p90 start predictions judged during a replay),
``cli.py`` (the command line). All of it is pure apart from
``trace.load_philly_csv``/``load_cluster_file`` and ``cli``, which read files and write
lines.
"""
