"""Shapes and validation for the scheduler API. No writes happen here: ``create``
hands validated data to ``scheduler.jobs`` (submit and the verbs)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import QueryDict
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from common.api.fields import NulFreeCharField, SlugRelatedField, TextField
from common.api.parsers import as_object
from common.api.shared_fields import FieldsBuiltOnce
from common.api.strict import RejectUnknownFields
from common.api.validators import plain_name
from common.nul import has_nul, nul_message
from people.access import visible_jobs
from people.models import Account, Qos
from scheduler.api.workdir import checked_workdir
from scheduler.backends import BackendError, available_kinds, load_backend
from scheduler.backends.base import LOG_STREAMS
from scheduler.backends.job_env import RESERVED_WORDS, is_reserved
from scheduler.backends.job_files import name_problem
from scheduler.clusters.dispatch import output_of
from scheduler.core.dependencies import KINDS as DEPENDENCY_KINDS
from scheduler.core.reason_words import reason_words
from scheduler.core.types import QueuePosition, cpu_count, cpu_millis, gpu_model_choices, parse_compute_capability
from scheduler.jobs.admission import admit
from scheduler.jobs.array_spec import MAX_SPEC_LENGTH, ArraySpec, ArraySpecError, parse_array
from scheduler.jobs.blockers import blockers_for_api
from scheduler.jobs.files import files_size
from scheduler.jobs.mail_type import APPLIED as MAIL_TYPES
from scheduler.jobs.mail_type import NONE as NO_MAIL
from scheduler.jobs.mail_type import parse_mail_type
from scheduler.jobs.output_paths import MAX_PATH_LENGTH, pattern_problem
from scheduler.jobs.request import REQUEST_FIELDS, parse_cpus
from scheduler.jobs.sbatch import SbatchError, fields_of, merge, read_options, script_directives, with_arguments
from scheduler.jobs.submit import submit_job
from scheduler.models import Cluster, Gpu, Job, JobEvent, Node, StartBacktest
from scheduler.reads.arrays import display_id
from scheduler.reads.inventory import load_inventory
from scheduler.reads.positions import QueueLine

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_INT = 2**31 - 1
MAX_WALLTIME = 365 * 24 * 3600


@extend_schema_field(serializers.FloatField())
class CpusField(serializers.Field):
    """CPUs per node: a number (``8``, ``0.5``) or Kubernetes' ``"500m"`` in; a number
    out (an int when whole), never a string."""

    def to_internal_value(self, data: Any) -> Decimal:
        try:
            return parse_cpus(data)
        except ValueError as error:
            raise serializers.ValidationError(str(error)) from None

    def to_representation(self, value: Any) -> int | float:
        return cpu_count(cpu_millis(Decimal(value)))


#: The most types a ``mail_type`` may list (each of Slurm's, with room for repeats).
MAX_MAIL_TYPES = 32


@extend_schema_field(
    serializers.ListField(child=serializers.ChoiceField(choices=[NO_MAIL, *MAIL_TYPES]), allow_null=True)
)
class MailTypeField(serializers.Field):
    """sbatch's ``--mail-type`` (``scheduler.jobs.mail_type``): ``"END,FAIL"`` as sbatch
    takes it, or ``["END", "FAIL"]``, in; the job's ``mail_events`` (a list; ``[]`` for
    NONE) out."""

    def to_internal_value(self, data: Any) -> list[str]:
        texts = isinstance(data, list) and all(isinstance(item, str) for item in data)
        if not (isinstance(data, str) or texts):
            raise serializers.ValidationError('Give the types as sbatch does ("END,FAIL") or as a list of them.')
        if len(data.split(",") if isinstance(data, str) else data) > MAX_MAIL_TYPES:
            raise serializers.ValidationError(f"At most {MAX_MAIL_TYPES} types.")
        try:
            return parse_mail_type(data)
        except ValueError as error:
            raise serializers.ValidationError(str(error)) from None

    def to_representation(self, value: Any) -> list[str]:
        return [str(kind) for kind in value]


class AllocationSerializer(serializers.Serializer):
    node = serializers.CharField()
    gpu_indices = serializers.ListField(child=serializers.IntegerField())
    cpus = serializers.FloatField(help_text="CPUs it holds there (0.5 for half a CPU).")
    memory_mib = serializers.IntegerField()


class DependencySerializer(RejectUnknownFields, serializers.Serializer):
    """One dependency, as ``sbatch --dependency=<type>:<job>``."""

    type = serializers.ChoiceField(choices=list(DEPENDENCY_KINDS))
    job = serializers.IntegerField(min_value=1, max_value=2**63 - 1)


class BlockerSerializer(serializers.Serializer):
    """One thing that keeps a job waiting: a code for scripts, a title and a sentence
    for people, and the figures behind the sentence (see ``scheduler.core.reasons``)."""

    code = serializers.CharField()
    # Read from ``scheduler.core.reason_words`` when shown, not stored: it reads as on the
    # pages, and blockers stored before titles existed get one too.
    title = serializers.SerializerMethodField(help_text="The code in plain words (the code itself if unknown).")
    message = serializers.CharField()
    evidence = serializers.DictField()

    def get_title(self, blocker: dict[str, Any]) -> str:
        return reason_words(blocker["code"]).title


class EfficiencySerializer(serializers.Serializer):
    """How well a finished attempt used its GPUs (``seff``); written by monitoring shortly
    after the end. ``samples`` 0: unmeasured (utilization and memory null)."""

    attempt = serializers.IntegerField()
    gpu_hours = serializers.FloatField()
    elapsed_seconds = serializers.IntegerField()
    walltime_used = serializers.SerializerMethodField(help_text="elapsed / walltime, 0..1.")
    samples = serializers.IntegerField()
    gpu_util_mean = serializers.FloatField(allow_null=True)
    gpu_util_peak = serializers.FloatField(allow_null=True)
    memory_used_mean_mib = serializers.FloatField(allow_null=True)
    memory_used_peak_mib = serializers.FloatField(allow_null=True)
    memory_total_mib = serializers.FloatField(allow_null=True)
    gpus_busy = serializers.IntegerField(
        allow_null=True, help_text="Of its GPUs, how many it kept busy (mean utilization >= 5%); null: unmeasured."
    )

    def get_walltime_used(self, efficiency: Any) -> float:
        return round(efficiency.elapsed_seconds / max(1, efficiency.job.walltime_seconds), 4)


class JobSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    """A job as users see it."""

    owner = serializers.CharField(source="owner.username", read_only=True)
    account = serializers.CharField(source="account.name", read_only=True)
    qos = serializers.CharField(source="qos.name", read_only=True, allow_null=True, default=None)
    cluster = serializers.CharField(source="cluster.name", read_only=True, allow_null=True, default=None)
    allocations = AllocationSerializer(many=True, read_only=True)
    cpus_per_node = CpusField(read_only=True)
    #: GPUs held, a share counted as its part (0.25): ``scheduler.core.hours.job_gpus``.
    total_gpus = serializers.FloatField(read_only=True)
    env = serializers.DictField(child=serializers.CharField(allow_blank=True), read_only=True)
    dependencies = DependencySerializer(many=True, read_only=True)
    pending_blockers = serializers.SerializerMethodField(
        help_text="Every blocker of a waiting job (the pending_reason first), with evidence."
    )
    efficiency = serializers.SerializerMethodField(help_text="After it ends: how well it used its GPUs (seff).")
    file_names = serializers.SerializerMethodField(
        help_text="The files it brought (GET /api/v1/jobs/{id}/ only; null in lists, which do not read them)."
    )
    files_expired_at = serializers.SerializerMethodField(
        help_text="When its files were dropped, JOB_FILES_RETENTION_DAYS after it ended (file_names still name "
        "them); null while they are kept, and in lists."
    )
    display_id = serializers.SerializerMethodField(
        help_text="As squeue shows it: 42, 42_7 for task 7 of array 42, 42_[8-999] for an array's waiting "
        "tasks folded into one row (?collapse=arrays)."
    )
    folded_tasks = serializers.SerializerMethodField(
        help_text="With ?collapse=arrays: how many waiting tasks this row stands for (null otherwise)."
    )
    queue_jobs_ahead = serializers.SerializerMethodField(
        help_text="While pending: the jobs waiting their turn ahead of it, in the scheduler's order, for nodes it "
        "could also run on, as of the last tick (0: next in line). Null when not pending, or not placed yet."
    )
    queue_gpu_hours_ahead = serializers.SerializerMethodField(
        help_text="While pending: the GPU-hours (GPUs x walltime) those jobs ahead of it ask for. Null as "
        "queue_jobs_ahead."
    )
    output_file = serializers.SerializerMethodField(
        help_text="The file its stdout is written to, output_path's patterns filled in (relative: in its own "
        "fresh directory); '' for none. GET /api/v1/jobs/{id}/ only; null in lists."
    )
    error_file = serializers.SerializerMethodField(
        help_text="The file its stderr is written to, as output_file (the same file when error_path is empty)."
    )
    mail_type = MailTypeField(
        source="mail_events",
        read_only=True,
        allow_null=True,
        help_text="The messages it makes, as sbatch's --mail-type types (['END', 'FAIL']; [] for NONE); "
        "null: its owner's notification settings decide.",
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "display_id",
            "uuid",
            "name",
            "owner",
            "account",
            "qos",
            "state",
            "pending_reason",
            "pending_blockers",
            "borrowed",
            "estimated_start_at",
            "estimated_start_p50_at",
            "estimated_start_p90_at",
            "queue_jobs_ahead",
            "queue_gpu_hours_ahead",
            "state_reason",
            "command",
            "script",
            "image",
            "env",
            "workdir",
            "output_path",
            "error_path",
            "output_file",
            "error_file",
            "file_names",
            "files_expired_at",
            *REQUEST_FIELDS,
            "mail_type",
            "total_gpus",
            "cluster",
            "allocations",
            "attempt",
            "external_id",
            "exit_code",
            "submitted_at",
            "dispatched_at",
            "started_at",
            "ended_at",
            "efficiency",
            "array_job",
            "array_task_id",
            "array_task_count",
            "array_throttle",
            "array_spec",
            "folded_tasks",
        ]
        read_only_fields = fields

    def _folded(self, job: Job) -> dict[str, Any] | None:
        folded = self.context.get("folded")
        return folded.get(job.id) if folded else None

    def get_display_id(self, job: Job) -> str:
        folded = self._folded(job)
        return str(folded["label"]) if folded else display_id(job)

    #: The last tick's line, read once per response (a list's rows share one serializer).
    _queue_line: QueueLine | None = None

    def _place(self, job: Job) -> QueuePosition | None:
        """Its place in the last tick's line (``scheduler.reads.positions``)."""
        if self._queue_line is None:
            self._queue_line = QueueLine()
        return self._queue_line.place_of(job)

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_queue_jobs_ahead(self, job: Job) -> int | None:
        place = self._place(job)
        return None if place is None else place[0]

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_queue_gpu_hours_ahead(self, job: Job) -> float | None:
        place = self._place(job)
        return None if place is None else place[1]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_folded_tasks(self, job: Job) -> int | None:
        folded = self._folded(job)
        return int(folded["tasks"]) if folded else None

    @extend_schema_field(serializers.ListField(child=serializers.CharField(), allow_null=True))
    def get_file_names(self, job: Job) -> list[str] | None:
        if self.context.get("listing"):
            return None
        return sorted(job.file_set.names) if job.file_set_id is not None and job.file_set else []

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_output_file(self, job: Job) -> str | None:
        if self.context.get("listing"):
            return None
        output = output_of(job) if job.output_path or job.error_path else None
        return output.stdout if output else ""

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_error_file(self, job: Job) -> str | None:
        if self.context.get("listing"):
            return None
        output = output_of(job) if job.output_path or job.error_path else None
        return output.stderr if output else ""

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_files_expired_at(self, job: Job) -> str | None:
        at = None if self.context.get("listing") else job.files_expired_at
        return serializers.DateTimeField().to_representation(at) if at else None

    @extend_schema_field(EfficiencySerializer(allow_null=True))
    def get_efficiency(self, job: Job) -> dict[str, Any] | None:
        if self.context.get("just_submitted"):
            return None  # nothing has run yet: no query for it
        try:
            efficiency = job.efficiency  # type: ignore[attr-defined]  # monitoring's reverse one-to-one
        except ObjectDoesNotExist:
            return None
        return dict(EfficiencySerializer(efficiency).data)

    @extend_schema_field(BlockerSerializer(many=True))
    def get_pending_blockers(self, job: Job) -> list[dict[str, Any]]:
        blockers = blockers_for_api(job.state, job.pending_blockers, job.pending_reason)
        return list(BlockerSerializer(blockers, many=True).data)


def _slurm_name(ours: str) -> str:
    return f"Slurm's name for it; here it is {ours!r}."


def _not_yet(what: str) -> str:
    return f"Not supported yet: {what}. The job was not submitted."


#: What a Slurm (or Kubernetes) user may write on submit, and what it is here.
SUBMIT_FIELD_HINTS: dict[str, str] = {
    "gpus": _slurm_name("gpus_per_node"),
    "gres": _slurm_name("gpus_per_node") + " (and gpu_model for the type)",
    "gpus_per_task": _slurm_name("gpus_per_node"),
    "time": _slurm_name("walltime_seconds") + " (in seconds)",
    "walltime": "Here it is 'walltime_seconds' (in seconds).",
    "mem": _slurm_name("memory_mib_per_node") + " (in MiB)",
    "cpus_per_task": _slurm_name("cpus_per_node"),
    "ntasks_per_node": "Jobs here start one task per node; ask for CPUs with 'cpus_per_node'.",
    "constraint": _slurm_name("node_labels") + ' ({"label": "value"})',
    "dependency": _slurm_name("dependencies") + ' ([{"type": "afterok", "job": 12}])',
    "job_name": _slurm_name("name"),
    "comment": "Not a field here: put notes in 'name' or in the script.",
    "exclusive": _not_yet("exclusive nodes (Slurm's --exclusive)"),
    "begin": _not_yet("a deferred start (Slurm's --begin)"),
    "chdir": _slurm_name("workdir") + " (an absolute path under JOB_WORKDIR_ROOTS)",
    "output": _slurm_name("output_path") + " (patterns %j %x %A %a %u)",
    "error": _slurm_name("error_path") + " (patterns %j %x %A %a %u)",
    "partition": "The scheduler chooses where a job runs; ask for hardware with gpu_model and node_labels.",
    "nodelist": "The scheduler chooses the nodes; narrow them with node_labels.",
}


class JobRequestSerializer(FieldsBuiltOnce, RejectUnknownFields):
    """A job request's shape: every entry of ``REQUEST_FIELDS`` (each declared here with
    its limits; a test checks none is missing) plus what to run and who pays, parsed and
    checked field by field. Every problem is reported against the field that causes it;
    a field it does not know too (:data:`SUBMIT_FIELD_HINTS` for the names Slurm users
    write). No rule across fields: those are admission's (:class:`JobSubmitSerializer`,
    and the submit form, ask it)."""

    field_hints = SUBMIT_FIELD_HINTS

    name = serializers.CharField(
        required=False,
        max_length=128,
        validators=[plain_name],
        help_text="Omitted: the script's #SBATCH --job-name, else the command's program, else script_name (the "
        "script's file name), else 'script'.",
    )
    account = SlugRelatedField(
        slug_field="name",
        queryset=Account.objects.all(),
        required=False,
        help_text="Account to charge; omitted: your default account (GET /api/v1/me/).",
    )
    qos = SlugRelatedField(slug_field="name", queryset=Qos.objects.all(), required=False, allow_null=True)
    command = serializers.CharField(required=False, allow_blank=True, max_length=100_000, default="")
    script = serializers.CharField(required=False, allow_blank=True, max_length=1_000_000, default="")
    image = serializers.CharField(required=False, allow_blank=True, max_length=256, default="")
    env = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=10_000), required=False, default=dict
    )
    nodes = serializers.IntegerField(min_value=1, max_value=10_000, default=1)
    gpus_per_node = serializers.IntegerField(min_value=0, max_value=1024, default=1)
    gpu_model = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=256,
        default="",
        help_text="A GPU model, or acceptable models as A|B (empty: any).",
    )
    min_gpu_memory_mib = serializers.IntegerField(min_value=0, max_value=MAX_INT, default=0)
    min_compute_capability = serializers.CharField(required=False, allow_blank=True, max_length=8, default="")
    gpu_share = serializers.FloatField(
        min_value=0.0,
        max_value=1.0,
        default=0.0,
        help_text="A fraction of one shared GPU per node (0 < share < 1, with gpus_per_node 1); 0 = whole GPUs.",
    )
    gpu_memory_mib_share = serializers.IntegerField(
        min_value=0, max_value=MAX_INT, default=0, help_text="GPU memory (MiB) a fractional job reserves on its GPU."
    )
    node_labels = serializers.DictField(
        child=serializers.CharField(max_length=128),
        required=False,
        default=dict,
        help_text='Labels every node of the job must carry (Slurm --constraint, a node selector), e.g. {"rack": "r1"}.',
    )
    reservation = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=64,
        default="",
        help_text="A reservation it runs in (Slurm's --reservation): only on its nodes, inside its span.",
    )
    cpus_per_node = CpusField(
        default=Decimal(1), help_text="CPUs per node: 8, or part of one where the cluster allows it (0.5, '500m')."
    )
    memory_mib_per_node = serializers.IntegerField(min_value=0, max_value=MAX_INT, default=0)
    walltime_seconds = serializers.IntegerField(min_value=1, max_value=MAX_WALLTIME)
    nice = serializers.IntegerField(
        min_value=-100_000,
        max_value=100_000,
        default=0,
        help_text="Lowers the job's priority by this much; only staff may give a negative nice.",
    )
    dependencies = DependencySerializer(many=True, required=False, default=list)
    workdir = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=1024,
        default="",
        help_text="Where the job starts (sbatch --chdir): an absolute path under JOB_WORKDIR_ROOTS "
        "(e.g. /home/<you>/project); empty: a fresh directory of its own.",
    )
    output_path = NulFreeCharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=MAX_PATH_LENGTH,
        default="",
        help_text="A file its stdout (and stderr, unless error_path names another) is also written to, as its "
        "owner (sbatch -o): relative to its workdir (without one: a file name in its own fresh directory), "
        "absolute under JOB_WORKDIR_ROOTS, or /dev/null. Patterns: %j its id, %x its name, %A the array's id, "
        "%a the task's index, %u the user, %% a %. Its log keeps everything as well. Empty: none.",
    )
    error_path = NulFreeCharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=MAX_PATH_LENGTH,
        default="",
        help_text="A file its stderr is written to instead (sbatch -e), as output_path. Empty: with stdout.",
    )
    files = serializers.DictField(
        child=TextField(allow_blank=True),
        required=False,
        default=dict,
        help_text='Small text files written into its working directory first: {"train.py": "..."}.',
    )
    array = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        default=None,
        max_length=MAX_SPEC_LENGTH,
        help_text="A job array (sbatch --array): one job per task index, e.g. 0-999, 1,3,5-7, 0-15:4, "
        "0-999%50 (at most 50 run at once). Each task gets QM_ARRAY_JOB_ID, QM_ARRAY_TASK_ID and "
        "QM_ARRAY_TASK_COUNT; the answer is the first task, whose id is the array's. Empty: one job.",
    )

    sbatch_options = serializers.ListField(
        child=serializers.CharField(max_length=10_000, trim_whitespace=False),
        required=False,
        default=list,
        max_length=1000,
        help_text='sbatch\'s options, as on its command line ("--time=1:00:00", "-J", "train", '
        '"--gres=gpu:a100:2"), applied over the script\'s #SBATCH lines as sbatch applies its command line. '
        "The script's directives fill the fields this body leaves out; a field given both here and as a JSON "
        "field is refused. Every option that maps to a field is applied (-J -A -q -t -N --gres --gpus "
        "--gpus-per-node -c --mem -a -d --nice --reservation -C -D -o -e -H --wrap --mail-type --mail-user); any "
        "other is refused by name.",
    )
    script_args = serializers.ListField(
        child=serializers.CharField(max_length=10_000, allow_blank=True, trim_whitespace=False),
        required=False,
        default=list,
        max_length=1000,
        help_text="What the script is run with as $1, $2... (sbatch SCRIPT ARGS): written into it as a "
        "'set --' line where its #SBATCH lines end.",
    )
    hold = serializers.BooleanField(
        default=False, help_text="Submit it held (sbatch --hold): it waits until released (POST .../release/)."
    )
    script_name = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=255,
        validators=[plain_name],
        help_text="The script's file name (sbatch SCRIPT; qm sbatch sends it): the job's name when nothing else "
        "names it, as sbatch names a job after its script. Only its last path part is used.",
    )
    mail_type = MailTypeField(
        source="mail_events",
        required=False,
        allow_null=True,
        default=None,
        help_text="Which messages this job makes (sbatch --mail-type): BEGIN, END, FAIL (an end that failed, "
        "timed out or lost its node), REQUEUE, TIME_LIMIT (an end at the time limit), ALL, ARRAY_TASKS (each "
        "task of an array told apart), NONE; as 'END,FAIL' or a list. They stand for your notification "
        "settings' events for this job; your channels (e-mail, webhook) send them. Omitted: your settings decide.",
    )
    mail_user = serializers.CharField(
        required=False,
        max_length=254,
        help_text="sbatch --mail-user: only your own e-mail address (or user name) is accepted, as messages go "
        "to the address on your profile (PATCH /api/v1/me/).",
    )

    def run_validation(self, data: Any = empty) -> Any:
        """The body with its sbatch options and its script's ``#SBATCH`` lines applied
        (:meth:`with_sbatch`), validated; a refused value that came from an option is
        named as it was written (``--mem=lots (#SBATCH line 4): ...``)."""
        body, sources = self.with_sbatch(data)
        if isinstance(body, Mapping) and "name" not in body:
            named = default_name(body.get("command"), body.get("script"), body.get("script_name"))
            body = {**as_object(body), "name": named}
        try:
            values = super().run_validation(body)
        except serializers.ValidationError as exc:
            if not sources or not isinstance(exc.detail, dict):
                raise
            raise serializers.ValidationError(
                {field: _named(sources.get(field), problems) for field, problems in exc.detail.items()}
            ) from None
        for applied in ("sbatch_options", "script_args", "script_name"):  # in the fields, the script, the name now
            values.pop(applied, None)
        values.pop("mail_user", None)  # checked: the owner's own address, where their mail goes anyway
        return values

    def with_sbatch(self, data: Any) -> tuple[Any, dict[str, str]]:
        """``data`` as a body of fields only: its ``sbatch_options`` and its script's
        ``#SBATCH`` directives (``scheduler.jobs.sbatch``) turned into the fields they
        stand for, under the fields it gives itself (sbatch's precedence: this body's
        fields, then its options, then the script's); its ``script_args`` put into its
        script. Also which option each such field came from. A body that is not an object,
        or whose options are not a list of text, is left to the fields' own checks.
        Raises ``ValidationError`` naming each option refused, and each field given both
        as a field and as an option."""
        if not isinstance(data, Mapping):
            return data, {}
        options, arguments = (
            (data.getlist(name) if isinstance(data, QueryDict) else data.get(name, []))
            for name in ("sbatch_options", "script_args")
        )
        script = data.get("script", "")
        if not (_texts(options) and _texts(arguments) and isinstance(script, str)):
            return data, {}
        script_given, script_problems = script_directives(script)
        options_given, options_problems = read_options(options)
        if not (script_given or script_problems or options or arguments):
            return data, {}
        data = {**as_object(data), "sbatch_options": options, "script_args": arguments}
        try:
            request = fields_of(merge(script_given, options_given), given=data)
        except SbatchError as exc:
            script_problems, options_problems = script_problems + exc.script, options_problems + exc.command_line
            request = None
        twice = [
            f"{said.where} says {field}, which this body gives as a field too; say it once"
            for field, said in (request.sources.items() if request else ())
            if field in data and not said.in_script
        ]
        problems = {"script": script_problems, "sbatch_options": options_problems + twice}
        if arguments and not script:
            problems["script_args"] = ["Arguments are for a script; this job has none."]
        if any(problems.values()) or request is None:
            raise serializers.ValidationError({field: lines for field, lines in problems.items() if lines})
        body = {**request.fields, **data}
        if "command" in request.sources and "name" not in body:
            body["name"] = "wrap"  # sbatch's name for a --wrap job
        if arguments:
            body["script"] = with_arguments(script, arguments)
        return body, {field: said.where for field, said in request.sources.items() if field not in data}

    def validate_array(self, value: str | None) -> ArraySpec | None:
        if not value:
            return None
        try:
            return parse_array(value, max_size=settings.JOB_ARRAY_MAX_SIZE)
        except ArraySpecError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_workdir(self, value: str) -> str:
        return checked_workdir(value, self.context["request"].user)

    def validate_output_path(self, value: str) -> str:
        return _checked_pattern(value)

    def validate_error_path(self, value: str) -> str:
        return _checked_pattern(value)

    def validate_files(self, value: dict[str, str]) -> dict[str, str]:
        problems = [problem for name in value if (problem := name_problem(name))]
        if problems:
            raise serializers.ValidationError(problems[:5])
        if len(value) > settings.JOB_FILES_MAX_COUNT:
            raise serializers.ValidationError(f"At most {settings.JOB_FILES_MAX_COUNT} files.")
        size = files_size(value)
        if size > settings.JOB_FILES_MAX_BYTES:
            raise serializers.ValidationError(
                f"The files hold {size} bytes; at most {settings.JOB_FILES_MAX_BYTES} may come with a job "
                "(put larger data on the cluster's storage and give its path)."
            )
        return value

    def validate_mail_user(self, value: str) -> str:
        """The owner's own address (in any case) or user name: a job never makes the
        portal mail anyone else."""
        user = self.context["request"].user
        address = (user.email or "").strip()
        if value.strip() == user.get_username() or (address and value.strip().casefold() == address.casefold()):
            return value
        yours = f"yours is {address}" if address else "you have none yet"
        raise serializers.ValidationError(
            f"mail-user: a job's messages go only to the e-mail address on your profile ({yours}); set it there "
            "(/profile/, or PATCH /api/v1/me/) and leave --mail-user out, or give that address."
        )

    def validate_nice(self, value: int) -> int:
        if value < 0 and not self.context["request"].user.is_staff:
            raise serializers.ValidationError("Only staff may raise a job's priority with a negative nice.")
        return value

    def validate_dependencies(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """At most 100, and every job depended on must exist and be visible to the submitter."""
        if not value:
            return []
        if len(value) > 100:
            raise serializers.ValidationError("At most 100 dependencies.")
        ids = {d["job"] for d in value}
        visible = set(
            visible_jobs(self.context["request"].user, Job.objects.filter(pk__in=ids)).values_list("id", flat=True)
        )
        missing = sorted(ids - visible)
        if missing:
            raise serializers.ValidationError(f"No job you can see has id {', '.join(map(str, missing))}.")
        return [{"type": d["type"], "job": d["job"]} for d in value]

    def validate_env(self, value: dict[str, str]) -> dict[str, str]:
        if len(value) > 200:
            raise serializers.ValidationError("At most 200 environment variables.")
        bad = [k for k in value if not ENV_NAME.fullmatch(k)]
        if bad:
            raise serializers.ValidationError(f"Invalid variable names: {', '.join(sorted(bad)[:5])}.")
        if has_nul(value):
            raise serializers.ValidationError(nul_message("A variable's value"))
        reserved = sorted(k for k in value if is_reserved(k))
        if reserved:
            raise serializers.ValidationError(f"You may not set {', '.join(reserved[:5])}: {RESERVED_WORDS}.")
        return value

    def validate_reservation(self, value: str) -> str:
        if value and not re.fullmatch(r"[-a-zA-Z0-9_]+", value):
            raise serializers.ValidationError("A reservation's name is letters, digits, '-' and '_'.")
        return value

    def validate_node_labels(self, value: dict[str, str]) -> dict[str, str]:
        if len(value) > 20:
            raise serializers.ValidationError("At most 20 labels.")
        if any(not key or len(key) > 128 for key in value):
            raise serializers.ValidationError("Label names must be 1-128 characters.")
        if has_nul(value):
            raise serializers.ValidationError(nul_message("A label"))
        return value

    def validate_gpu_share(self, value: float) -> float:
        if not math.isfinite(value) or value >= 1.0:
            raise serializers.ValidationError("A share is a fraction below 1; ask for whole GPUs with gpus_per_node.")
        return value

    def validate_gpu_model(self, value: str) -> str:
        """One model, or alternatives as ``A|B`` (Slurm's constraint syntax), normalised."""
        choices = gpu_model_choices(value)
        if any(not choice for choice in choices):
            raise serializers.ValidationError("Name one model, or alternatives separated by '|' (V100M16|V100M32).")
        return "|".join(dict.fromkeys(choices))

    def validate_min_compute_capability(self, value: str) -> str:
        if value:
            try:
                parse_compute_capability(value)
            except ValueError as exc:
                raise serializers.ValidationError(str(exc)) from None
        return value


def _checked_pattern(value: str) -> str:
    """An output file's path (where it may lie is admission's: it depends on the workdir)."""
    problem = pattern_problem(value) if value else None
    if problem:
        raise serializers.ValidationError(problem)
    return value


def default_name(command: Any, script: Any, script_name: Any = None) -> str:
    """A job's name when its request gives none (not even ``#SBATCH -J``): its command's
    program (``python`` for ``python train.py``), else its script's file name (sbatch's
    default: ``train.sbatch``), else ``script``."""
    if isinstance(command, str) and command.split():
        return os.path.basename(command.split()[0])[:128] or "job"
    if not (isinstance(script, str) and script):
        return "job"
    file_name = os.path.basename(script_name.strip()) if isinstance(script_name, str) else ""
    return file_name[:128] or "script"


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _named(where: str | None, problems: Any) -> Any:
    """A field's problems, said of the option its value came from (``where``; ``None``:
    the body gave the field itself), as lines."""
    return problems if where is None else [f"{where}: {line}" for line in _lines(problems)]


def _lines(problems: Any) -> list[str]:
    """DRF's nested errors (a list per item, a dict per field) as lines."""
    if isinstance(problems, dict):
        return [f"{key}: {line}" for key, value in problems.items() for line in _lines(value)]
    if isinstance(problems, list):
        return [line for item in problems for line in _lines(item)]
    return [str(problems)]


class JobSubmitSerializer(JobRequestSerializer):
    """A job request: every entry of ``REQUEST_FIELDS`` (each declared here with its
    limits; a test checks none is missing) plus what to run and who pays. Every problem
    is reported against the field that causes it; a field it does not know too
    (:data:`SUBMIT_FIELD_HINTS` for the names Slurm users write)."""

    # The docstring is the schema's; for us: ``POST /api/v1/jobs/`` (a job or an array),
    # its what-if and a job edit. The request is shaped by JobRequestSerializer, then
    # admitted by scheduler.jobs.admission: its standing rules here, the quotas where the
    # job is submitted (under locks) or estimated.

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Admission's standing rules (:func:`scheduler.jobs.admission.admit`); an
        omitted account or QOS becomes the default it stands for."""
        admission = admit(
            attrs,
            owner=self.context["request"].user,
            account=attrs.get("account"),
            qos=attrs.get("qos"),
            hardware=load_inventory(),
            now=timezone.now(),
        )
        if admission.problems:
            raise serializers.ValidationError(admission.problems)
        return {**attrs, "account": admission.account, "qos": admission.qos}

    def create(self, validated_data: dict[str, Any]) -> Job:
        data = dict(validated_data)
        try:
            return submit_job(
                owner=self.context["request"].user, account=data.pop("account"), qos=data.pop("qos"), **data
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None


class JobEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["id", "at", "kind", "message", "data"]


class LogSourceSerializer(serializers.Serializer):
    rank = serializers.IntegerField(allow_null=True, help_text="The rank (QM_NODE_RANK); null: every rank's.")
    stream = serializers.ChoiceField(
        choices=list(LOG_STREAMS),
        help_text="stdout or stderr where the cluster keeps them apart; combined where one log takes both.",
    )


class JobLogSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    log = serializers.CharField(
        allow_blank=True, help_text="The tail; with offset, the piece read (UTF-8, bytes that are none replaced)."
    )
    rank = serializers.IntegerField(allow_null=True, required=False, help_text="With offset: the log read.")
    stream = serializers.CharField(required=False, help_text="With offset: the log read.")
    offset = serializers.IntegerField(required=False, help_text="With offset: where the piece starts, in bytes.")
    next_offset = serializers.IntegerField(
        required=False, help_text="With offset: where it ends; ask from here next to follow the log."
    )
    ended = serializers.BooleanField(
        required=False,
        help_text="With offset: the job had ended before this was read, so once a piece brings nothing new the "
        "log is whole.",
    )
    sources = LogSourceSerializer(many=True, required=False, help_text="With offset: every log the job has.")


class GpuSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name", read_only=True)
    shared = serializers.BooleanField(read_only=True, help_text="In a sharing mode: fractional jobs may share it.")
    parent_index = serializers.IntegerField(source="parent.index", read_only=True, allow_null=True, default=None)

    class Meta:
        model = Gpu
        fields = [
            "id",
            "node",
            "index",
            "uuid",
            "model",
            "memory_mib",
            "compute_capability",
            "mig_profile",
            "shared",
            "sharing",
            "exclusive",
            "parent_index",
        ]


class NodeGpuSerializer(GpuSerializer):
    """A GPU inside its node's answer: the same fields less those the node already says."""

    class Meta(GpuSerializer.Meta):
        fields = [name for name in GpuSerializer.Meta.fields if name not in ("id", "node")]


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    gpus = NodeGpuSerializer(many=True, read_only=True)

    class Meta:
        model = Node
        fields = ["id", "name", "cluster", "state", "reason", "cpus", "memory_mib", "labels", "last_heartbeat", "gpus"]


class DrainSerializer(RejectUnknownFields, serializers.Serializer):
    reason = serializers.CharField(max_length=200)


class ClusterSerializer(RejectUnknownFields, serializers.ModelSerializer):
    """Clusters are checked by building their backend: a bad config is a 400, not a
    broken scheduler later."""

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "kind",
            "config",
            "enabled",
            "created_at",
            "reachable",
            "last_error",
            "last_contact_at",
            "orphans",
        ]
        read_only_fields = ["created_at", "reachable", "last_error", "last_contact_at", "orphans"]

    def validate_config(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        if has_nul(value):
            raise serializers.ValidationError(nul_message("config"))
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind = attrs.get("kind", getattr(self.instance, "kind", "local"))
        if kind not in available_kinds():
            raise serializers.ValidationError(
                {"kind": f"Backend {kind!r} is not available here (available: {', '.join(available_kinds())})."}
            )
        from django.conf import settings

        name = attrs.get("name", getattr(self.instance, "name", ""))
        config = attrs.get("config", getattr(self.instance, "config", {}))
        try:
            load_backend(kind, name, config, work_dir=settings.QM_WORK_DIR)
        except BackendError as exc:
            raise serializers.ValidationError({"config": exc.message}) from None
        return attrs


class PriorityBreakdownSerializer(serializers.Serializer):
    """A pending job's priority and its weighted factors, as ``sprio`` shows them."""

    job_id = serializers.IntegerField()
    total = serializers.FloatField()
    age = serializers.FloatField()
    fairshare = serializers.FloatField()
    jobsize = serializers.FloatField()
    qos = serializers.FloatField()
    nice = serializers.IntegerField()
    shortness = serializers.FloatField(help_text="Expected to be short (0 unless PRIORITY_WEIGHT_SHORTNESS).")
    stretch = serializers.FloatField(help_text="Waited long for its expected run (0 unless PRIORITY_WEIGHT_STRETCH).")


class ShareRowSerializer(serializers.Serializer):
    """One row of the fair-share tree, as ``sshare -l`` shows it (user '' for accounts)."""

    account = serializers.CharField()
    user = serializers.CharField(allow_blank=True)
    depth = serializers.IntegerField()
    raw_shares = serializers.IntegerField()
    norm_shares_level = serializers.FloatField()
    norm_shares = serializers.FloatField()
    raw_usage = serializers.FloatField()
    effective_usage = serializers.FloatField()
    norm_usage = serializers.FloatField()
    level_fs = serializers.SerializerMethodField(help_text="S / U; null when the association has no usage (infinite).")
    fairshare = serializers.FloatField(allow_null=True)
    rank = serializers.IntegerField(allow_null=True)

    def get_level_fs(self, row: Any) -> float | None:
        return None if math.isinf(row.level_fs) else float(row.level_fs)


class WhatIfPrioritySerializer(PriorityBreakdownSerializer):
    """The priority a job submitted now would have (no ``job_id``: it has none yet)."""

    job_id = None  # type: ignore[assignment]  # DRF: None removes an inherited field


class WhatIfSerializer(serializers.Serializer):
    """When a job submitted now would start, and why not sooner (nothing is submitted)."""

    estimated_start = serializers.DateTimeField(
        allow_null=True,
        help_text="Latest expected start if every job runs to its walltime limit and nothing new arrives; "
        "null when the queue alone does not decide it (a dependency, a quota, unavailable nodes).",
    )
    estimated_wait_seconds = serializers.IntegerField(allow_null=True, help_text="From now to estimated_start.")
    would_start_now = serializers.BooleanField(help_text="Whether the next scheduling tick would start it.")
    pending_reason = serializers.CharField(
        allow_blank=True, help_text="Why it would wait, as a job's pending_reason ('' when it would start now)."
    )
    reasons = serializers.ListField(child=serializers.CharField(), help_text="The same, in sentences.")
    priority = WhatIfPrioritySerializer(allow_null=True, help_text="Its priority factors (sprio); null under FIFO.")
    blockers = BlockerSerializer(many=True, help_text="Every blocker it would meet, with evidence (empty: none).")


class StartEstimateSerializer(serializers.Serializer):
    """When a pending job starts at the latest if jobs run to their walltime limits and
    nothing new arrives (``squeue --start``)."""

    job = serializers.IntegerField()
    estimated_start = serializers.DateTimeField()


class StartBacktestSerializer(serializers.ModelSerializer):
    """One backtest of the p50 and p90 starts (``scheduler.backtests``), with its sentence."""

    summary = serializers.CharField(read_only=True)

    class Meta:
        model = StartBacktest
        fields = [
            "id",
            "ran_at",
            "days",
            "jobs",
            "judged",
            "p50_coverage",
            "p90_coverage",
            "p50_error_s",
            "wall_s",
            "summary",
        ]
        read_only_fields = fields
