"""The portal's server-rendered pages, one module per page and one folder per part of the
URL tree: ``home`` (/), ``jobs/`` (/jobs/...), ``manage/`` (/manage/..., staff only),
``profile``, ``tokens``, ``usage`` and ``signin``; ``figures`` and ``words`` are what they show."""
