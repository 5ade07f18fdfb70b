"""The submit form: every field of ``POST /api/v1/jobs/``, shaped by the API's own
serializer and admitted by the API's own rules, so the page and the API accept and
refuse exactly the same jobs, with the same words.

The form offers every request field (``scheduler.jobs.request.REQUEST_FIELDS``) and only
turns what people type into the API's body (walltime as ``2h`` or ``1:30:00``, env as
``KEY=value`` lines, dependencies as ``afterok:12``, node labels as ``rack=r1``). The
body is shaped by :class:`scheduler.api.serializers.JobRequestSerializer` (types, a
field's own limits) and admitted by :func:`scheduler.jobs.admission.admit` (every rule
across fields); their problems are shown against the form field they name.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest
from django.utils import timezone

from people.access import default_account, usable_qos
from people.models import Account, Qos
from scheduler.api.serializers import JobRequestSerializer
from scheduler.jobs.admission import admit
from scheduler.jobs.mail_type import mail_type_text, parse_mail_type
from scheduler.jobs.request import REQUEST_FIELDS, request_values
from scheduler.jobs.sbatch import merge, script_directives
from scheduler.models import Job
from scheduler.reads.inventory import load_inventory
from web.jobs.presets import PRESETS, PRESETS_BY_SLUG
from web.words import format_walltime, parse_walltime


def parse_env(text: str) -> dict[str, str]:
    """``KEY=value`` per line (blank lines and ``#`` comments skipped). Raises ``ValueError``."""
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"Line {number}: write KEY=value.")
        env[key.strip()] = value
    return env


def format_env(env: dict[str, str] | None) -> str:
    return "\n".join(f"{k}={v}" for k, v in (env or {}).items())


def parse_dependencies(text: str) -> list[dict[str, Any]]:
    """``afterok:12 afterany:13`` (commas or spaces) -> the API's list. Raises ``ValueError``."""
    found = []
    for item in re.split(r"[\s,]+", text.strip()):
        if not item:
            continue
        kind, sep, job = item.partition(":")
        if not sep or not (job.isascii() and job.isdigit()):
            raise ValueError(f"{item!r}: write type:job-id, for example afterok:12.")
        found.append({"type": kind, "job": int(job)})
    return found


def format_dependencies(dependencies: list[dict[str, Any]] | None) -> str:
    return " ".join(f"{d['type']}:{d['job']}" for d in dependencies or [])


def parse_labels(text: str) -> dict[str, str]:
    """``rack=r1, network=infiniband`` (commas or lines) -> the API's object of label ->
    value. Raises ``ValueError``."""
    labels: dict[str, str] = {}
    for item in re.split(r"[,\n]", text):
        if not item.strip():
            continue
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key or not value:
            raise ValueError(f"{item.strip()!r}: write each node label as label=value, for example rack=r1.")
        if labels.setdefault(key, value) != value:
            raise ValueError(f"Node label {key!r} is given two values.")
    return labels


def format_labels(labels: dict[str, str] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (labels or {}).items())


#: The fields people type in a friendlier shape than the API's, with the parser that
#: turns the text into the API's value and the formatter that turns a job's value back.
FIELD_SHAPES: dict[str, tuple[Callable[[str], Any], Callable[[Any], str]]] = {
    "walltime_seconds": (parse_walltime, format_walltime),
    "env": (parse_env, format_env),
    "dependencies": (parse_dependencies, format_dependencies),
    "node_labels": (parse_labels, format_labels),
}
#: Fields sent as typed, whose empty value means "the API's default", so they are left
#: out of the body: the request fields without a shape of their own, what to run, the QOS.
_OPTIONAL = (
    "qos",
    *(f for f in REQUEST_FIELDS if f not in FIELD_SHAPES),
    "command",
    "script",
    "image",
    "workdir",
    "output_path",
    "error_path",
    "array",
)


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class TextFilesField(forms.FileField):
    """Several uploaded files as the API's ``files``: name -> UTF-8 text."""

    widget = MultipleFileInput

    def clean(self, data: Any, initial: Any = None) -> dict[str, str]:
        uploads = [f for f in (data if isinstance(data, list | tuple) else [data]) if f]
        files: dict[str, str] = {}
        for upload in uploads:
            try:
                files[upload.name] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError(
                    f"{upload.name} is not a text file (UTF-8); put data on the cluster's storage."
                ) from None
        return files


def job_as_fields(job: Job) -> dict[str, str]:
    """A job as the form's fields (resubmit as a copy): every request field
    (``request_values``), what it runs and who pays, and its own choice of messages."""
    return {
        "name": job.name,
        "account": job.account.name,
        "qos": job.qos.name if job.qos else "",
        **{name: _as_text(name, value) for name, value in request_values(job).items()},
        "command": job.command,
        "script": job.script,
        "image": job.image,
        "workdir": job.workdir,
        "output_path": job.output_path,
        "error_path": job.error_path,
        "env": format_env(job.env),
        "array": job.array_spec,
        "sbatch_options": _mail_type_option(job),
    }


def _mail_type_option(job: Job) -> str:
    """``--mail-type=...`` for a copy of ``job`` whose choice of messages did not come
    from its script (the API's field, the options); empty when its script's own line
    gives it, which stays the one to edit there."""
    if job.mail_events is None:
        return ""
    said = merge(script_directives(job.script)[0], []).get("--mail-type")
    try:
        in_script = said is not None and parse_mail_type(said.value or "") == job.mail_events
    except ValueError:
        in_script = False
    return "" if in_script else f"--mail-type={mail_type_text(job.mail_events)}"


def _as_text(name: str, value: Any) -> str:
    """One request field as typed on the form: in its shape (``FIELD_SHAPES``), else as text,
    left empty where nothing is asked (0, '') unless the API's default is something else
    (0 GPUs per node is a CPU-only job, not the default 1)."""
    if name in FIELD_SHAPES:
        return FIELD_SHAPES[name][1](value)
    if isinstance(value, Decimal):  # CPUs: 8, not 8.000
        return format(value.normalize(), "f")
    default = JobRequestSerializer._declared_fields[name].default
    return "" if not value and not default else str(value)


def _offered_qos(user: Any, accounts: Any) -> list[str]:
    """The QOS names the form offers: every one to staff, else those some account of the
    user may use (``people.access.usable_qos``); the API refuses any other."""
    if user.is_staff:
        return list(Qos.objects.order_by("name").values_list("name", flat=True))
    return sorted({qos.name for account in accounts for qos in usable_qos(account)[0]})


def _text(label: str, help_text: str = "", **kwargs: Any) -> forms.CharField:
    return forms.CharField(label=label, required=False, help_text=help_text, strip=True, **kwargs)


class LinesField(forms.CharField):
    """A textarea's text with Unix line ends: browsers send a textarea's lines ending in
    CRLF (the HTML standard), and a script's ``#!/bin/bash\r`` or ``set -o pipefail\r``
    fails in the shell."""

    def to_python(self, value: Any) -> str:
        return str(super().to_python(value)).replace("\r\n", "\n")


def _lines(label: str, help_text: str, rows: int) -> LinesField:
    return LinesField(label=label, required=False, help_text=help_text, widget=forms.Textarea(attrs={"rows": rows}))


def _number(label: str, help_text: str = "", placeholder: str = "") -> forms.CharField:
    # Parsed by the serializer, so "abc" gets the API's message, not a second dialect.
    return _text(label, help_text, widget=forms.TextInput(attrs={"inputmode": "numeric", "placeholder": placeholder}))


class JobForm(forms.Form):
    """What the submit page posts; :meth:`clean` shapes it as the API does and asks
    admission's standing rules (the quotas are asked by the submission or what-if)."""

    name = forms.CharField(
        max_length=128, required=False, help_text="Empty: the script's #SBATCH -J, else the command's program."
    )
    account = forms.ChoiceField(
        required=False,
        help_text="The account the GPU-hours are charged to; empty: the script's #SBATCH -A, else yours.",
    )
    qos = forms.ChoiceField(label="QOS", required=False)
    nodes = _number("Nodes", "Gang: all nodes start together.", "1")
    gpus_per_node = _number("GPUs per node", "0 for a CPU-only job.", "1")
    gpu_model = _text("GPU model", "Empty: any model.", widget=forms.TextInput(attrs={"list": "gpu-models"}))
    min_gpu_memory_mib = _number("Min GPU memory (MiB)", "", "0")
    min_compute_capability = _text("Min compute capability", "For example 8.0.")
    gpu_share = _number("GPU share", "A fraction of one shared GPU (0 < share < 1); empty: whole GPUs.", "0")
    gpu_memory_mib_share = _number("GPU memory of the share (MiB)", "", "0")
    cpus_per_node = _number("CPUs per node", "Part of a CPU (0.5 or 500m) where the cluster allows it.", "1")
    memory_mib_per_node = _number("Memory per node (MiB)", "", "0")
    walltime_seconds = forms.CharField(
        label="Walltime", required=False, help_text="2h, 90m, 1:30:00 or seconds; empty: the script's #SBATCH -t."
    )
    array = _text(
        "Job array",
        "One job per index, each told its $QM_ARRAY_TASK_ID: 0-99, 1,3,5-7 or 0-15:4; "
        "add %10 to run at most 10 at once. Empty: one job.",
        max_length=1024,
    )
    command = _lines("Command", "A command line, or use a script below.", 2)
    script = _lines("Script", "Run instead of a command.", 5)
    image = _text("Container image")
    workdir = _text("Working directory", "Where it starts, e.g. /home/you/project; empty: a fresh directory.")
    output_path = _text(
        "Output file",
        "Its output is also written here (sbatch -o), e.g. logs/%x-%j.out in the working directory: %j its id, "
        "%x its name, %A_%a an array's task. Empty: the log only.",
        max_length=1024,
    )
    error_path = _text(
        "Error file", "Its stderr goes here instead (sbatch -e). Empty: with the output.", max_length=1024
    )
    # Not "files": a form's ``files`` is its uploads (request.FILES).
    job_files = TextFilesField(
        label="Files", required=False, help_text="Small text files (a script, a config) put in its working directory."
    )
    env = _lines("Environment", "KEY=value, one per line.", 3)
    nice = _number("Nice", "Lowers the job's priority by this much.", "0")
    dependencies = _text("Dependencies", "afterok:12 afterany:13", widget=forms.TextInput())
    reservation = _text("Reservation", "Run in this reservation of your account (its nodes, its hours).")
    node_labels = _text(
        "Node labels", "Labels every node must carry: rack=r1, network=infiniband.", widget=forms.TextInput()
    )
    sbatch_options = _text(
        "Slurm options",
        "sbatch's options, over the script's #SBATCH lines: -t 60 --gres=gpu:2",
        widget=forms.TextInput(),
    )
    hold = forms.BooleanField(required=False, label="Hold", help_text="Submit it held until released (sbatch -H).")
    #: The built-in template the form started from: its example files go with the job.
    template = forms.ChoiceField(
        required=False,
        widget=forms.HiddenInput,
        choices=[("", "")] + [(p.slug, p.title) for p in PRESETS],
    )

    def __init__(self, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.request = request
        user: Any = request.user
        accounts = Account.objects.all() if user.is_staff else Account.objects.filter(memberships__user=user)
        names = list(accounts.order_by("name").values_list("name", flat=True))
        account_field: Any = self.fields["account"]
        default = default_account(user)
        # Empty by default, so that a script's #SBATCH -A applies; the API then takes the user's.
        yours = f"default ({default.name})" if default is not None else "default"
        account_field.choices = [("", yours)] + [(n, n) for n in names]
        qos_field: Any = self.fields["qos"]
        qos_field.choices = [("", "default")] + [(n, n) for n in _offered_qos(user, accounts)]
        self.inventory = load_inventory()
        self.gpu_models = self.inventory.models
        self.api_data: dict[str, Any] = {}
        self.validated: dict[str, Any] = {}

    def clean(self) -> dict[str, Any]:
        """Build the API body, shape it with ``JobRequestSerializer``, then admit it
        (``scheduler.jobs.admission.admit``)."""
        data = super().clean() or {}
        body: dict[str, Any] = {key: data[key] for key in ("name", "account") if data.get(key)}
        if data.get("hold"):
            body["hold"] = True
        if data.get("sbatch_options"):
            try:
                body["sbatch_options"] = shlex.split(data["sbatch_options"])
            except ValueError as exc:
                self.add_error("sbatch_options", f"Cannot read the options: {exc}.")
        for name in _OPTIONAL:
            if data.get(name) not in (None, ""):
                body[name] = data[name]
        preset = PRESETS_BY_SLUG.get(data.get("template") or "")
        # The template's example files first: an upload of the same name replaces one.
        if files := {**(preset.bundled_files() if preset else {}), **(data.get("job_files") or {})}:
            body["files"] = files
        for name, (parse, _) in FIELD_SHAPES.items():
            raw = data.get(name) or ""
            if not raw:
                continue
            try:
                body[name] = parse(raw)
            except ValueError as exc:
                self.add_error(name, str(exc))
        # Shaped and admitted even when a field above failed, so that every error shows at
        # once; a field that already has its own error does not get the API's second word.
        shaped = JobRequestSerializer(data=body, context={"request": self.request})
        if not shaped.is_valid():
            self._add_api_errors({k: v for k, v in shaped.errors.items() if k not in self.errors})
            return data
        values = dict(shaped.validated_data)
        admission = admit(
            values,
            owner=self.request.user,
            account=values.get("account"),
            qos=values.get("qos"),
            hardware=self.inventory,
            now=timezone.now(),
        )
        self._add_api_errors({k: v for k, v in admission.problems.items() if k not in self.errors})
        if self.errors:
            return data
        self.api_data = body
        self.validated = {**values, "account": admission.account, "qos": admission.qos}
        return data

    def _add_api_errors(self, errors: Any) -> None:
        for name, problems in errors.items():
            name = "job_files" if name == "files" else name
            target = name if name in self.fields else None
            self.add_error(target, flatten_errors(problems))

    def add_django_errors(self, exc: DjangoValidationError) -> None:
        """Errors from a service (quota refusals), each against its field."""
        self._add_api_errors(exc.message_dict)


def flatten_errors(problems: Any) -> list[str]:
    """DRF's nested error structures (a list per item of env or dependencies) as lines."""
    if isinstance(problems, dict):
        return [f"{key}: {line}" for key, value in problems.items() for line in flatten_errors(value)]
    if isinstance(problems, list | tuple):
        return [line for item in problems for line in flatten_errors(item)]
    return [str(problems)]
