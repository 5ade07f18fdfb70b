"""What pages and the API show, writing nothing.

- ``occupancy``: every GPU and which active job holds it, read once per page.
- ``inventory``: "could any node ever hold this?", the submit-time feasibility check
  (hardware only: health passes, so it is never asked of the tick's node view).
- ``reports``: ``sshare`` and ``sprio``.
- ``identity``: which clusters run every job as its owner (submit checks the owner has
  a cluster identity).
"""
