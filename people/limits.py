"""The quota limits: the one list of :class:`people.models.Quota`'s limit fields, with what
each means and its unit. The API serializer, the staff form, the audit log, the preview
(API and page) and the tick's loader of the core's ``Limits`` all read it, so a limit
added here reaches each of them; ``tests/people/test_quota_limits.py`` holds the model,
this list, those places and ``scheduler.core.types.Limits`` (the pure core's copy, which
may not import Django) to one another.

Every limit is optional: empty (``None``, or no entry for a GPU model) means no limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class QuotaLimit:
    """One limit of a quota."""

    #: The model field, the API's field and the core's ``Limits`` field.
    name: str
    #: How a form labels it.
    label: str
    #: What it counts: ``"GPUs"``, ``"jobs"`` or ``"seconds"``.
    unit: str
    #: What it means, for forms' help and the API's schema.
    meaning: str
    #: A ``{GPU model: GPUs}`` map rather than one whole number.
    per_model: bool = False
    #: Accounts only (a user's quota has no guarantee to borrow beyond).
    accounts_only: bool = False
    #: Why the scheduling cycle does not enforce it ("": it does, through the core's
    #: ``Limits``, which the tick loads from the quota).
    not_in_core: str = ""
    #: Why a preview may not try it ("": it may, as a whole number or null).
    not_previewed: str = ""


QUOTA_LIMITS: tuple[QuotaLimit, ...] = (
    QuotaLimit("max_gpus", "Max GPUs (all models)", "GPUs", "Concurrent GPUs in total."),
    QuotaLimit(
        "max_gpus_per_model",
        "Max GPUs per model",
        "GPUs",
        'Concurrent GPUs of each model, e.g. {"H100-80GB": 16}.',
        per_model=True,
        not_previewed="a preview tries whole numbers; a per-model map is not offered",
    ),
    QuotaLimit("max_running_jobs", "Max running jobs", "jobs", "Jobs running at once."),
    QuotaLimit(
        "max_pending_jobs",
        "Max pending jobs",
        "jobs",
        "Jobs waiting at once; more are refused at submission.",
        not_in_core="checked when a job is submitted (scheduler.jobs.submit), not when jobs are started",
        not_previewed="a preview replays jobs that were admitted; it does not submit them again",
    ),
    QuotaLimit(
        "max_walltime_seconds",
        "Max walltime (seconds)",
        "seconds",
        "Longest walltime a job may ask for; longer ones wait.",
    ),
    QuotaLimit(
        "guaranteed_gpus",
        "Guaranteed GPUs",
        "GPUs",
        "GPUs guaranteed to the account's subtree.",
        accounts_only=True,
    ),
    QuotaLimit(
        "borrowing_limit_gpus",
        "Borrowing limit (GPUs)",
        "GPUs",
        "GPUs it may borrow beyond the guarantee.",
        accounts_only=True,
    ),
)

#: Every limit's name, in the model's order.
LIMIT_NAMES: tuple[str, ...] = tuple(limit.name for limit in QUOTA_LIMITS)
#: The limits that are one whole number (or null): every one but the per-model map.
WHOLE_LIMITS: tuple[str, ...] = tuple(limit.name for limit in QUOTA_LIMITS if not limit.per_model)
#: The limits a user's quota has (the rest are for accounts only).
USER_LIMITS: tuple[str, ...] = tuple(limit.name for limit in QUOTA_LIMITS if not limit.accounts_only)
#: The limits the scheduling cycle enforces: the fields of ``scheduler.core.types.Limits``.
CORE_LIMITS: tuple[str, ...] = tuple(limit.name for limit in QUOTA_LIMITS if not limit.not_in_core)
#: The limits a preview of an account change may try (whole numbers, null for none).
PREVIEW_LIMITS: tuple[str, ...] = tuple(limit.name for limit in QUOTA_LIMITS if not limit.not_previewed)

_BY_NAME = {limit.name: limit for limit in QUOTA_LIMITS}


def quota_limit(name: str) -> QuotaLimit:
    """The limit called ``name``. Raises ``KeyError`` for a name that is not a limit."""
    return _BY_NAME[name]


def contradictions(values: Mapping[str, Any]) -> dict[str, str]:
    """Limit name -> why, for each limit of one quota (``values``: name -> value, missing
    or ``None`` for none) that its other limits make impossible: a guarantee above the
    cap on all GPUs could never be used, and a borrowing limit that reaches past that cap
    could never be reached. The API's serializer (and through it the staff form) refuses
    a quota with any, so what is saved means what it says."""
    max_gpus = values.get("max_gpus")
    guaranteed = values.get("guaranteed_gpus")
    borrowing = values.get("borrowing_limit_gpus")
    if max_gpus is None or guaranteed is None:
        return {}
    if guaranteed > max_gpus:
        return {
            "guaranteed_gpus": f"{guaranteed} guaranteed GPUs is more than the {max_gpus} GPUs it may use at most "
            f"(max GPUs), so the guarantee could never be used: guarantee at most {max_gpus}, or raise max GPUs."
        }
    if borrowing is not None and guaranteed + borrowing > max_gpus:
        room = max_gpus - guaranteed
        return {
            "borrowing_limit_gpus": f"{guaranteed} guaranteed plus {borrowing} borrowed GPUs is more than the "
            f"{max_gpus} GPUs it may use at most (max GPUs), so it could borrow {room} at most: "
            f"set the borrowing limit to at most {room}, or raise max GPUs."
        }
    return {}


# --- QOS limits ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QosLimit:
    """One limit of a QOS (:class:`people.models.Qos`), as Slurm names it."""

    #: The model field and the API's field.
    name: str
    #: How a form labels it.
    label: str
    #: What it counts: ``"GPUs"``, ``"CPUs"`` or ``"jobs"``.
    unit: str
    #: What it means, for forms' help and the API's schema.
    meaning: str
    #: The Slurm QOS option it stands for (``sacctmgr modify qos ... set <this>``).
    slurm: str
    #: The pending reason (or, for a submit limit, the refusal) Slurm gives for it.
    reason: str
    #: Whether it counts one user's jobs (else all the QOS's jobs together).
    per_user: bool
    #: The field of the core's ``QosLimits`` it is loaded into ("": it is checked when a
    #: job is submitted, ``scheduler.jobs.admission``, not when jobs start).
    core: str
    #: How a page says a value of it, ``{}`` for the number ("{} GPUs per user").
    phrase: str


QOS_LIMITS: tuple[QosLimit, ...] = (
    QosLimit(
        "max_gpus_per_user",
        "Max GPUs per user",
        "GPUs",
        "GPUs one user's running jobs in this QOS may hold together.",
        "MaxTRESPerUser=gres/gpu=N",
        "QOSMaxGRESPerUser",
        per_user=True,
        core="max_gpus_per_user",
        phrase="{} GPUs per user",
    ),
    QosLimit(
        "max_cpus_per_user",
        "Max CPUs per user",
        "CPUs",
        "CPUs one user's running jobs in this QOS may hold together.",
        "MaxTRESPerUser=cpu=N",
        "QOSMaxCpuPerUserLimit",
        per_user=True,
        core="max_cpu_millis_per_user",
        phrase="{} CPUs per user",
    ),
    QosLimit(
        "max_running_jobs_per_user",
        "Max running jobs per user",
        "jobs",
        "Jobs one user may run in this QOS at once.",
        "MaxJobsPerUser=N",
        "QOSMaxJobsPerUserLimit",
        per_user=True,
        core="max_running_jobs_per_user",
        phrase="{} running jobs per user",
    ),
    QosLimit(
        "max_submitted_jobs_per_user",
        "Max submitted jobs per user",
        "jobs",
        "Jobs one user may have pending or running in this QOS; more are refused at submission.",
        "MaxSubmitJobsPerUser=N",
        "QOSMaxSubmitJobPerUserLimit",
        per_user=True,
        core="",
        phrase="{} submitted jobs per user",
    ),
    QosLimit(
        "max_gpus",
        "Max GPUs (all users)",
        "GPUs",
        "GPUs all running jobs in this QOS may hold together.",
        "GrpTRES=gres/gpu=N",
        "QOSGrpGRES",
        per_user=False,
        core="max_gpus",
        phrase="{} GPUs in all",
    ),
)

#: Every QOS limit's name, in the model's order.
QOS_LIMIT_NAMES: tuple[str, ...] = tuple(limit.name for limit in QOS_LIMITS)

_QOS_BY_NAME = {limit.name: limit for limit in QOS_LIMITS}


def qos_limit(name: str) -> QosLimit:
    """The QOS limit called ``name``. Raises ``KeyError`` for a name that is not one."""
    return _QOS_BY_NAME[name]


def qos_limits_text(qos: Any) -> str:
    """The limits ``qos`` (a ``Qos``) sets, in words for a page ("2 GPUs per user, 8 GPUs
    in all"); ``""`` when it sets none."""
    values = [(limit, getattr(qos, limit.name)) for limit in QOS_LIMITS]
    return ", ".join(limit.phrase.format(value) for limit, value in values if value is not None)
