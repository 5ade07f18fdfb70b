"""Create a demo cluster, account tree, users and a few jobs. Safe to run twice."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.utils import timezone

from people.choices import Role
from people.models import Account, ClusterIdentity, Membership, Qos, Quota
from quartermaster.demo_history import seed_history
from scheduler.backends.base import BackendError
from scheduler.backends.local import LocalBackend
from scheduler.clusters.poll import poll_cluster
from scheduler.jobs.remote import backend_for
from scheduler.jobs.submit import submit_job
from scheduler.models import Cluster, Job

DEMO_INVENTORY = Path(settings.BASE_DIR) / "scheduler" / "backends" / "local_clusters" / "demo.yaml"
#: Where ``make apps`` builds the interactive apps' environment (its ``APPS_ENV``).
DEMO_APPS_ENV = Path(settings.BASE_DIR) / "var" / "apps-env"

#: (name, parent, shares)
ACCOUNTS = [
    ("root", None, 1),
    ("ai-research", "root", 60),
    ("nlp", "ai-research", 30),
    ("vision", "ai-research", 30),
    ("platform", "root", 40),
]

#: (username, staff, [(account, role)])
USERS = [
    ("admin", True, []),
    ("alice", False, [("nlp", Role.MEMBER), ("vision", Role.MEMBER)]),
    ("bob", False, [("nlp", Role.COORDINATOR)]),
]

#: The demo users' e-mail addresses are ``<username>@demo.invalid``: a domain that can never
#: exist (RFC 2606), so nothing leaves the machine even where a site's mail server is set;
#: the demo (``run_demo``) writes its mail to files in ``EMAIL_FILE_PATH``.
DEMO_MAIL_DOMAIN = "demo.invalid"

#: Which QOS each part of the tree may use (the rest inherit): only the research side may
#: use "high", which preempts "low".
QOS_ACCESS = {"root": ["low", "normal"], "ai-research": ["low", "normal", "high"]}

#: The demo researchers' cluster identities: the uid (and gid) their jobs run as when the
#: portal runs as root. No such Unix users need to exist: the local backend sets the ids.
DEMO_UIDS = {"alice": 20001, "bob": 20002}

#: (owner, account, name, command, nodes, gpus_per_node, gpu_model)
JOBS = [
    ("alice", "nlp", "llama-finetune", "echo training on $CUDA_VISIBLE_DEVICES; sleep 120", 1, 8, "H100-80GB"),
    ("alice", "vision", "vit-eval", "echo evaluating; sleep 45", 1, 2, "A100-40GB"),
    ("bob", "nlp", "tokenizer-sweep", "for i in 1 2 3; do echo step $i; sleep 10; done", 1, 1, "L4"),
    ("bob", "nlp", "gang-pretrain", "echo nodes $QM_NODELIST; sleep 300", 2, 8, "H100-80GB"),
]


class Command(BaseCommand):
    help = "Seed the embedded demo: a local simulated cluster, accounts, users and jobs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--reset-passwords", action="store_true", help="Give existing demo users new passwords.")
        parser.add_argument("--no-jobs", action="store_true", help="Do not submit the demo jobs.")
        parser.add_argument(
            "--apps-env",
            default=str(DEMO_APPS_ENV),
            help="The interactive apps' environment (make apps) the demo cluster's sessions run.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            cluster, _ = Cluster.objects.get_or_create(
                name="demo", defaults={"kind": "local", "config": {"nodes_file": str(DEMO_INVENTORY)}}
            )
            apps_note = self._apps_env(cluster, Path(options["apps_env"]))
            accounts = self._accounts()
            passwords = self._users(accounts, reset=options["reset_passwords"])
            for username, uid in DEMO_UIDS.items():
                ClusterIdentity.objects.get_or_create(
                    user=get_user_model().objects.get(username=username),
                    defaults={"username": username, "uid": uid, "gid": uid},
                )
            normal = self._qos()
            for account, names in QOS_ACCESS.items():
                if not accounts[account].allowed_qos.exists():
                    accounts[account].allowed_qos.set(Qos.objects.filter(name__in=names))
            Quota.objects.get_or_create(
                account=accounts["nlp"],
                defaults={"max_pending_jobs": 100, "max_gpus": 48, "guaranteed_gpus": 24, "borrowing_limit_gpus": 16},
            )
            Quota.objects.get_or_create(account=accounts["vision"], defaults={"guaranteed_gpus": 16})
        try:
            poll_cluster(cluster)
        except BackendError as exc:
            self.stderr.write(f"could not read the demo inventory: {exc}")
            raise SystemExit(1) from None
        if not options["no_jobs"] and not Job.objects.exists():
            user_model = get_user_model()
            people = {name: user_model.objects.get(username=name) for name in ("alice", "bob")}
            with transaction.atomic():
                done = seed_history(accounts, people, normal, timezone.now())
            self.stdout.write(f"A week of history: {done} finished jobs.")
            for owner, account, name, command, nodes, gpus, model in JOBS:
                submit_job(
                    owner=user_model.objects.get(username=owner),
                    account=accounts[account],
                    qos=normal,
                    name=name,
                    command=command,
                    nodes=nodes,
                    gpus_per_node=gpus,
                    gpu_model=model,
                    walltime_seconds=3600,
                )
        self.stdout.write(f"Demo cluster {cluster.name!r}: {cluster.nodes.count()} nodes.")
        self.stdout.write(apps_note)
        backend = backend_for(cluster)
        if isinstance(backend, LocalBackend):  # the demo's own; an admin may have pointed it elsewhere
            self.stdout.write(isolation_note(backend))
        if passwords:
            self.stdout.write("Demo logins (shown once; rerun with --reset-passwords for new ones):")
            for username, password in passwords.items():
                self.stdout.write(f"  {username:<8} {password}")
        else:
            logins = ", ".join(username for username, _, _ in USERS)
            self.stdout.write(
                f"Demo logins: {logins}. Their passwords were printed when they were made; for new ones run:\n"
                "  DEBUG=1 .venv/bin/python manage.py seed_demo --reset-passwords"
            )

    @staticmethod
    def _apps_env(cluster: Cluster, apps_env: Path) -> str:
        """Give the demo cluster the apps' environment ``make apps`` built (its
        ``apps_env``: JupyterLab and TensorBoard first on session jobs' PATH), unless an
        admin set one already; a sentence saying what its sessions run."""
        if cluster.kind != "local":
            return f"Interactive apps: {cluster.name!r} is not the local demo cluster; its apps_env is the admin's."
        configured = cluster.config.get("apps_env")
        if configured:
            return f"Interactive apps: sessions on {cluster.name!r} run the apps of {configured}."
        if not (apps_env / "bin").is_dir():
            return f"Interactive apps: none on {cluster.name!r} yet: {apps_env} is not built (make apps)."
        cluster.config = {**cluster.config, "apps_env": os.path.abspath(apps_env)}
        cluster.save(update_fields=["config"])
        return f"Interactive apps: sessions on {cluster.name!r} run the apps of {cluster.config['apps_env']}."

    def _accounts(self) -> dict[str, Account]:
        accounts: dict[str, Account] = {}
        for name, parent, shares in ACCOUNTS:
            accounts[name], _ = Account.objects.get_or_create(
                name=name, defaults={"parent": accounts.get(parent) if parent else None, "shares": shares}
            )
        return accounts

    def _users(self, accounts: dict[str, Account], *, reset: bool) -> dict[str, str]:
        user_model = get_user_model()
        passwords: dict[str, str] = {}
        for username, staff, memberships in USERS:
            address = f"{username}@{DEMO_MAIL_DOMAIN}"
            user, created = user_model.objects.get_or_create(
                username=username, defaults={"is_staff": staff, "is_superuser": staff, "email": address}
            )
            if not user.email:  # seeded before demo users had addresses; one a user set stays
                user.email = address
                user.save(update_fields=["email"])
            if created or reset:
                password = secrets.token_urlsafe(9)
                user.set_password(password)
                user.save(update_fields=["password"])
                passwords[username] = password
            for account, role in memberships:
                Membership.objects.get_or_create(user=user, account=accounts[account], defaults={"role": role})
        return passwords

    def _qos(self) -> Qos:
        low, _ = Qos.objects.get_or_create(
            name="low", defaults={"priority": 0, "preemptible": True, "usage_factor": 0.5}
        )
        normal, _ = Qos.objects.get_or_create(
            name="normal", defaults={"priority": 10, "max_walltime_seconds": 2 * 86400}
        )
        high, created = Qos.objects.get_or_create(
            name="high", defaults={"priority": 100, "max_walltime_seconds": 86400, "usage_factor": 2.0}
        )
        if created:
            high.may_preempt.add(low)
        return normal


def isolation_note(backend: LocalBackend) -> str:
    """How the demo's jobs are kept from the portal and from each other, in the backend's
    own words (so it is never more than is true), and loudly when they are not."""
    if backend.sandbox:
        return f"Job isolation: {backend.isolation}."
    return (
        f"WARNING: job isolation: {backend.isolation}. This demo is single-user: keep it on localhost "
        "(apt-get install bubblewrap to sandbox its jobs)."
    )
