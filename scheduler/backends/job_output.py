"""A job's own output files (``sbatch -o/-e``, :class:`~scheduler.backends.base.JobOutput`)
written by the job itself, as its owner, where its script runs: the Slurm and Kubernetes
backends put :func:`copying_output` first in the job's bash script. (The local backend's
runner opens the files itself, as the owner, and copies into them: ``local_runner``.)

Why by the job: on a cluster the files lie where only the job's owner may write, on the
nodes' file systems; the job's stdout and stderr stay what they are, the portal's log
(Slurm's ``--output`` in the owner's output directory, the pod's log), and ``tee`` copies
each stream into the owner's file as well.

How, in bash, as a script's first lines: the script runs itself again (``run``) as a
child in a process group of its own, its stdout and stderr through ``tee``s, and waits:

1. Each file is opened first (truncated, or appended to on a requeue), as the owner: one
   that cannot be opened fails the job at once, saying which, before anything runs.
2. The ``tee``s ignore SIGTERM, so that a cancelled job's last words (a checkpoint's) are
   still copied; a SIGTERM the script gets (Kubernetes signals only the container's first
   process) goes on to the job's whole process group.
3. When the job ends, what it left running in its group is killed (as Slurm and the local
   backend do), the ``tee``s are waited for, so every line is in the file before the
   script ends, and the script exits with the job's status.
"""

from __future__ import annotations

import shlex

from scheduler.backends.base import JobOutput

#: Set in the job's environment while its script runs under :func:`copying_output`, so
#: that the script, run again, runs the job itself.
GUARD = "QM_OUTPUT_COPIED"


def copying_output(output: JobOutput | None, run: str, *, only_if: str = "") -> str:
    """Bash lines that run the rest of the script with its output copied into
    ``output``'s files (module docstring); '' for no output files. ``run`` runs this
    very script again (``"$BASH" "$0"``); ``only_if``, a shell test, limits the copying
    to where it holds (one rank of several). The lines end the script with the job's
    status, except in the run they start, which goes on past them."""
    if output is None or not output.files:
        return ""
    test = f'[ -z "${{{GUARD}:-}}" ]' + (f" && {only_if}" if only_if else "")
    opened = ">>" if output.append else ">"
    body = [
        f"{opened} {shlex.quote(path)} || {{ printf 'qm: cannot write the output file %s\\n' "
        f"{shlex.quote(path)} >&2; exit 1; }}"
        for path in output.files
    ]
    body.append("exec 3>&1 4>&2; qm_tees=")
    if output.combined:
        body.append(f"exec > >({_tee(output.stdout)}) 2>&1; qm_tees=$!")
    else:
        if output.stdout:
            body.append(f'exec > >({_tee(output.stdout)}); qm_tees="$qm_tees $!"')
        if output.stderr:
            body.append(f'exec 2> >({_tee(output.stderr)} >&4); qm_tees="$qm_tees $!"')
    body += [
        "qm_signalled= qm_run=",
        """trap 'qm_signalled=1; [ -n "$qm_run" ] && kill -TERM -- -"$qm_run" 2>/dev/null' TERM""",
        f"set -m; {GUARD}=1 {run} & qm_run=$!; set +m",
        'wait "$qm_run"; qm_status=$?',
        'while [ -n "$qm_signalled" ]; do qm_signalled=; wait "$qm_run"; qm_status=$?; done',
        'kill -KILL -- -"$qm_run" 2>/dev/null',
        "exec 1>&3 2>&4 3>&- 4>&-",
        "wait $qm_tees 2>/dev/null",
        'exit "$qm_status"',
    ]
    lines = "".join(f"  {line}\n" for line in body)
    return f"if {test}; then\n{lines}fi\nunset {GUARD}\n"


def _tee(path: str) -> str:
    """A ``tee`` that appends to ``path`` (opened, and truncated if need be, already)
    and outlives a SIGTERM."""
    return f"trap '' TERM; exec tee -a -- {shlex.quote(path)}"
