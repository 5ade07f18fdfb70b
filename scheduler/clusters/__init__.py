"""Everything that talks to a workload manager about jobs and nodes.

- ``dispatch``: a claimed job handed to its backend (DISPATCHING -> RUNNING).
- ``poll``: each cluster polled for finished jobs and stuck dispatches.
- ``sync``: the node and GPU inventory brought in line with the backend's.
- ``nodes``: drain and resume, here and in the backend.
- ``reconcile``: lost jobs, silent nodes and orphaned backend jobs.
- ``logs``: a job's output; ``failpoints``: where a test may kill this process.

It calls down into ``scheduler.jobs`` (every state change) and the backends.
"""
