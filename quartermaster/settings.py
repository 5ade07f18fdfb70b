"""Django settings, read only from the environment (see ``.env.example``).

Defaults give the embedded mode: SQLite under ``var/``, the local simulated cluster,
no Redis (the scheduler loop runs in-process via ``manage.py run_scheduler``).
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url

from quartermaster.env import (
    env_bool,
    env_choice,
    env_float,
    env_group_map,
    env_hosts_and_networks,
    env_int,
    env_int_list,
    env_levels,
    env_list,
    env_port_range,
    env_proxy_ssl_header,
    env_rate,
    env_secret,
    env_sharing_overheads,
    env_str,
    env_weights,
)
from quartermaster.periodic import beat_schedule, periodic_jobs
from scheduler.replay.simulator import POLICIES as REPLAY_POLICIES

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("QM_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_secret("SECRET_KEY", debug=DEBUG, debug_default="insecure-debug-only-key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# --- HTTPS (``manage.py check --deploy`` clean once these are on behind TLS) ----------------
#: Cookies only over HTTPS: on by default outside DEBUG, because a production portal
#: carries passwords and session cookies. It does not break a plain-HTTP trial at
#: http://localhost (browsers treat localhost as secure and keep Secure cookies there);
#: over plain HTTP to another host name, sign-in fails until TLS is set up or these are 0.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
#: Redirect plain HTTP to HTTPS. Off by default: on a plain-HTTP install it would make the
#: portal unreachable, and node agents and scripts posting to /api/ do not follow redirects.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
#: Strict-Transport-Security, in seconds (a year is 31536000). Off (0) by default: browsers
#: remember it for that long, so a host name that later serves plain HTTP (a test portal,
#: a sibling service under INCLUDE_SUBDOMAINS) is locked out; it must be a deliberate choice.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
#: Behind a proxy that terminates TLS: the header and value it sets on HTTPS requests,
#: "HTTP_X_FORWARDED_PROTO,https". Unset: no header is trusted (a client could forge it).
SECURE_PROXY_SSL_HEADER = env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.forms",  # its widget templates, for the FORM_RENDERER below
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "quartermaster",  # its management commands (run_scheduler, seed_demo, oidc_discover)
    "people.apps.PeopleConfig",
    "scheduler",
    "monitoring",
    "notifications",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # A body over DATA_UPLOAD_MAX_MEMORY_SIZE: a 413 (JSON under /api/), DEBUG or not;
    # before the CSRF check, which is the first to read a form's body.
    "common.api.errors.BodyLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A database or broker outage raised by a view: 503 with Retry-After, not a 500.
    "common.outages.OutageMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout answer.
    "axes.middleware.AxesMiddleware",
]

#: Logins go through django-axes first: after AXES_FAILURE_LIMIT failed passwords for one
#: user from one address, that pair is locked out for AXES_COOLOFF_MINUTES.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_MINUTES = env_int("AXES_COOLOFF_MINUTES", 15, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=AXES_COOLOFF_MINUTES)
# Lock the pair, not the user everywhere (an attacker could lock anyone out) nor the
# address alone (a lab behind one NAT address would lock each other out).
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

# --- Logins from the site's LDAP directory (people/directory.py) -------------------------
#: Empty: local accounts only. Set, users sign in with their directory password, and each
#: login brings their POSIX identity and their groups' accounts (LDAP_ACCOUNT_GROUPS).
LDAP_SERVER_URI = env_str("LDAP_SERVER_URI", "")
#: ``<group DN>=<account>:<member|coordinator>`` entries separated by ``;``.
LDAP_ACCOUNT_GROUPS = env_group_map("LDAP_ACCOUNT_GROUPS")
#: How often directory users are read again between logins (a user gone is disabled).
LDAP_SYNC_SECONDS = env_float("LDAP_SYNC_SECONDS", 900.0, minimum=10.0)
if LDAP_SERVER_URI:
    from quartermaster.ldap_settings import ldap_settings

    globals().update(
        ldap_settings(
            uri=LDAP_SERVER_URI,
            user_base=env_str("LDAP_USER_BASE", ""),
            group_base=env_str("LDAP_GROUP_BASE", ""),
            bind_dn=env_str("LDAP_BIND_DN", ""),
            bind_password=env_str("LDAP_BIND_PASSWORD", ""),
            user_filter=env_str("LDAP_USER_FILTER", "(uid=%(user)s)"),
            group_type=env_choice("LDAP_GROUP_TYPE", "posix", ["posix", "groupofnames"]),
            staff_group=env_str("LDAP_STAFF_GROUP", ""),
        )
    )
    AUTHENTICATION_BACKENDS.insert(1, "people.directory.DirectoryBackend")

# --- Logins from the site's OpenID Connect provider (people/oidc.py) -----------------------
#: Empty: no OIDC. Set, the login page offers "Sign in with OIDC_PROVIDER_NAME", and each
#: login brings the claims' POSIX identity and their groups' accounts (OIDC_ACCOUNT_GROUPS).
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID", "")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_POSIX_USERNAME_CLAIM = env_str("OIDC_POSIX_USERNAME_CLAIM", "")
OIDC_UID_CLAIM = env_str("OIDC_UID_CLAIM", "")
OIDC_GID_CLAIM = env_str("OIDC_GID_CLAIM", "")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_STAFF_GROUP = env_str("OIDC_STAFF_GROUP", "")
#: ``<group>=<account>:<member|coordinator>`` entries separated by ``;``.
OIDC_ACCOUNT_GROUPS = env_group_map("OIDC_ACCOUNT_GROUPS")
if OIDC_ENABLED:
    from quartermaster.oidc_settings import oidc_settings

    globals().update(
        oidc_settings(
            client_id=OIDC_RP_CLIENT_ID,
            client_secret=env_str("OIDC_RP_CLIENT_SECRET", ""),
            authorization_endpoint=env_str("OIDC_OP_AUTHORIZATION_ENDPOINT", ""),
            token_endpoint=env_str("OIDC_OP_TOKEN_ENDPOINT", ""),
            userinfo_endpoint=env_str("OIDC_OP_USER_ENDPOINT", ""),
            jwks_endpoint=env_str("OIDC_OP_JWKS_ENDPOINT", ""),
            sign_algo=env_choice("OIDC_RP_SIGN_ALGO", "RS256", ["RS256", "ES256", "HS256"]),
            scopes=env_str("OIDC_RP_SCOPES", "openid email profile"),
        )
    )
    AUTHENTICATION_BACKENDS.insert(1, "people.oidc.ClaimsBackend")

#: Each form field rendered as one box: label, control, help and errors (web/rendering.py).
FORM_RENDERER = "web.rendering.FieldBoxes"

ROOT_URLCONF = "quartermaster.urls"
WSGI_APPLICATION = "quartermaster.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # the pages' own filters (walltime), in every template without a load
            "builtins": ["web.template_filters"],
        },
    },
]

#: Connections are kept for DATABASE_CONN_MAX_AGE seconds (60) and checked before reuse:
#: opening a PostgreSQL connection per request cost a web worker more than a submission's
#: own queries (submit_floor_per_s 109 -> 244 requests/s on the 2-core benchmark machine).
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'quartermaster.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
        conn_health_checks=True,
    )
}
#: The few statements every request runs (``common.db.sql.prepared_cursor``: the token, the
#: account's QOS, the quota, the job's insert) are prepared once per connection; Django's
#: own cursor binds values client-side and never prepares. Behind a pooler that cannot
#: keep prepared statements (PgBouncer before 1.21 in transaction mode), set
#: DATABASE_PREPARED_STATEMENTS=false.
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool("DATABASE_PREPARED_STATEMENTS", True):
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 1
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, so subprocesses started by tests (Celery worker, scheduler
    # loop) see the same test database. WAL lets readers proceed during a tick.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "monitoring.staticfiles.PlotlyFinder",  # plotly/plotly.min.js from the plotly package
]

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "people.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "common.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "common.api.pagination.Pagination",
    "DEFAULT_SCHEMA_CLASS": "common.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "common.api.errors.exception_handler",
}

#: Serve the OpenAPI schema (/api/schema/) and Swagger UI (/api/docs/) to anyone, not only
#: to signed-in users (a session or an API token): common/api/docs.py.
API_SCHEMA_PUBLIC = env_bool("API_SCHEMA_PUBLIC", False)

SPECTACULAR_SETTINGS = {
    "TITLE": "Quartermaster API",
    "DESCRIPTION": "Submit and manage GPU jobs, inspect nodes, accounts and quotas.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI's assets come from the installed sidecar package, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "scheduler.choices.JobState",
        "NodeStateEnum": "scheduler.choices.NodeState",
        "BackendKindEnum": "scheduler.choices.BackendKind",
        "MembershipRoleEnum": "people.choices.Role",
        "NotificationEventEnum": "notifications.models.Event",
        "ReservationKindEnum": "scheduler.models.Reservation.Kind",
    },
}

# --- Scheduler -------------------------------------------------------------------
#: Seconds between scheduling ticks (Celery beat and ``run_scheduler``).
SCHEDULER_TICK_SECONDS = env_float("SCHEDULER_TICK_SECONDS", 5.0, minimum=0.1)
#: Seconds between backend polls.
SCHEDULER_POLL_SECONDS = env_float("SCHEDULER_POLL_SECONDS", 5.0, minimum=0.1)
#: Seconds between passes that store every pending job's start estimate (beat and
#: ``run_scheduler``); each pass plans the whole queue.
SCHEDULER_ESTIMATE_SECONDS = env_float("SCHEDULER_ESTIMATE_SECONDS", 60.0, minimum=1.0)
#: The backtest of calibrated (p50/p90) start times: the days of history it replays,
#: and seconds between runs (beat and ``run_scheduler``; a week takes under a minute).
SCHEDULER_BACKTEST_DAYS = env_int("SCHEDULER_BACKTEST_DAYS", 7, minimum=1)
SCHEDULER_BACKTEST_SECONDS = env_float("SCHEDULER_BACKTEST_SECONDS", 6 * 3600.0, minimum=60.0)
#: What-if answers (POST /api/v1/jobs/estimate/, the submit page's Estimate) per user.
SCHEDULER_WHATIF_RATE = env_rate("SCHEDULER_WHATIF_RATE", "30/minute")
#: How stale the submit-time hardware check may be: each web process reads whether
#: nodes or GPUs changed at most this often (seconds; the tick always reads them afresh).
SCHEDULER_INVENTORY_RECHECK_SECONDS = env_float("SCHEDULER_INVENTORY_RECHECK_SECONDS", 5.0, minimum=0)
#: How often the tick recomputes the cluster overview's stranded GPUs (seconds).
SCHEDULER_STRANDED_SECONDS = env_float("SCHEDULER_STRANDED_SECONDS", 30.0, minimum=0)
#: The longest a preview of an account change may replay (seconds; the Celery task's
#: soft time limit, after which the preview fails saying so).
PREVIEW_TIME_LIMIT_SECONDS = env_int("PREVIEW_TIME_LIMIT_SECONDS", 300, minimum=10)
#: Right-sizing advice (``scheduler.advice``): never given on fewer of a user's ended
#: jobs of a shape than ADVICE_MIN_JOBS; read from the last ADVICE_DAYS days (the
#: longest window its replay of the site's history covers); what a replay measured is
#: used for ADVICE_CACHE_SECONDS, or until another job of the shape ends.
ADVICE_MIN_JOBS = env_int("ADVICE_MIN_JOBS", 10, minimum=1)
ADVICE_DAYS = env_int("ADVICE_DAYS", 30, minimum=1)
ADVICE_CACHE_SECONDS = env_int("ADVICE_CACHE_SECONDS", 21600, minimum=0)
#: A job stuck in DISPATCHING longer than this is dispatched again (submit is idempotent).
SCHEDULER_REDISPATCH_SECONDS = env_int("SCHEDULER_REDISPATCH_SECONDS", 60, minimum=1)
#: Upper bound on starts per tick (keeps one tick's transaction short).
SCHEDULER_MAX_STARTS_PER_TICK = env_int("SCHEDULER_MAX_STARTS_PER_TICK", 500, minimum=1)
#: EASY backfill: later jobs may start ahead of blocked ones when that delays none of
#: the blocked jobs' reservations (Slurm's sched/backfill). Off = strict FIFO.
SCHEDULER_BACKFILL = env_bool("SCHEDULER_BACKFILL", True)
#: How many blocked jobs get a reservation (1 = EASY backfill), and at most how many of
#: one account's (0: no cap; 1 gives each account's first blocked job its own).
SCHEDULER_RESERVATIONS = env_int("SCHEDULER_RESERVATIONS", 1, minimum=1)
SCHEDULER_RESERVATIONS_PER_ACCOUNT = env_int("SCHEDULER_RESERVATIONS_PER_ACCOUNT", 0, minimum=0)
#: Which of the nodes that fit a job it goes to: pack (fewest free GPUs first, fights
#: fragmentation), spread (most free first) or first (name order).
SCHEDULER_PLACEMENT = env_choice("SCHEDULER_PLACEMENT", "fragmentation", ["fragmentation", "pack", "spread", "first"])
#: Queue order: "multifactor" (Slurm's priority/multifactor with Fair Tree fair-share)
#: or "fifo" (submit order).
SCHEDULER_PRIORITY = env_choice("SCHEDULER_PRIORITY", "multifactor", ["multifactor", "fifo"])
#: Multifactor weights (as Slurm's PriorityWeight*), the age cap and the size preference.
PRIORITY_WEIGHT_AGE = env_float("PRIORITY_WEIGHT_AGE", 1000, minimum=0)
PRIORITY_WEIGHT_FAIRSHARE = env_float("PRIORITY_WEIGHT_FAIRSHARE", 10000, minimum=0)
PRIORITY_WEIGHT_JOBSIZE = env_float("PRIORITY_WEIGHT_JOBSIZE", 1000, minimum=0)
PRIORITY_WEIGHT_QOS = env_float("PRIORITY_WEIGHT_QOS", 1000, minimum=0)
PRIORITY_MAX_AGE_DAYS = env_float("PRIORITY_MAX_AGE_DAYS", 7, minimum=0.001)
PRIORITY_FAVOR_SMALL = env_bool("PRIORITY_FAVOR_SMALL", True)
#: For overloaded clusters (off by default, as in Slurm): favour jobs expected to be
#: short (their walltime times what their user's last ended jobs ran of theirs), and
#: lift a job that has waited PRIORITY_STRETCH_TARGET times its walltime. The replay's
#: stretch-las-preempt uses stretch 2000000 and target 20.
PRIORITY_WEIGHT_SHORTNESS = env_float("PRIORITY_WEIGHT_SHORTNESS", 0, minimum=0)
PRIORITY_WEIGHT_STRETCH = env_float("PRIORITY_WEIGHT_STRETCH", 0, minimum=0)
PRIORITY_STRETCH_TARGET = env_float("PRIORITY_STRETCH_TARGET", 2, minimum=0.001)
#: What one GPU-second of each model costs in fair-share usage (Slurm's
#: TRESBillingWeights), e.g. "H100-80GB=2,A100-40GB=1,L4=0.5"; unlisted models cost 1.
SCHEDULER_BILLING_WEIGHTS = env_weights("SCHEDULER_BILLING_WEIGHTS")
#: Fair-share usage half-life in days (Slurm's PriorityDecayHalfLife).
SCHEDULER_USAGE_HALF_LIFE_DAYS = env_float("SCHEDULER_USAGE_HALF_LIFE_DAYS", 7, minimum=0.001)
#: How often the tick charges usage and writes it (Slurm's PriorityCalcPeriod, 5 min
#: there); ticks in between decay the stored usage in memory. 0: every tick.
SCHEDULER_USAGE_CALC_PERIOD_SECONDS = env_float("SCHEDULER_USAGE_CALC_PERIOD_SECONDS", 30, minimum=0)
#: A blocked job whose QOS may preempt others (QOS.may_preempt) evicts running jobs.
SCHEDULER_PREEMPTION = env_bool("SCHEDULER_PREEMPTION", True)
#: What happens to a preempted job: requeue (a new attempt) or cancel (ends PREEMPTED).
SCHEDULER_PREEMPT_MODE = env_choice("SCHEDULER_PREEMPT_MODE", "requeue", ["requeue", "cancel"])
#: A job whose node failed (or that the backend lost) is requeued as a new attempt, up
#: to this many attempts; after that, or with requeue off, it ends NODE_FAIL.
SCHEDULER_REQUEUE_ON_NODE_FAIL = env_bool("SCHEDULER_REQUEUE_ON_NODE_FAIL", True)
SCHEDULER_MAX_REQUEUES = env_int("SCHEDULER_MAX_REQUEUES", 3, minimum=0)
#: An UP node the backend has not listed for this long is marked DOWN.
SCHEDULER_NODE_TIMEOUT_SECONDS = env_int("SCHEDULER_NODE_TIMEOUT_SECONDS", 300, minimum=1)
#: Jobs on a DOWN node are requeued once it has stayed down this long (a restarting
#: workload manager reports nodes down until they register again; Slurm and Kubernetes
#: themselves keep a lost node's jobs for 300 s by default).
SCHEDULER_NODE_DOWN_GRACE_SECONDS = env_int("SCHEDULER_NODE_DOWN_GRACE_SECONDS", 600, minimum=0)
#: Cancel backend jobs that carry our key but that no active job holds.
SCHEDULER_CANCEL_ORPHANS = env_bool("SCHEDULER_CANCEL_ORPHANS", True)
#: A job cannot be preempted during its first N seconds.
SCHEDULER_PREEMPT_MIN_RUNTIME_SECONDS = env_int("SCHEDULER_PREEMPT_MIN_RUNTIME_SECONDS", 300, minimum=0)
#: Least-attained-service preemption: GPU-second thresholds, ascending ("1800" or
#: "1800,86400"); a job below one may evict jobs past it (requeued, so they keep their
#: checkpoints). Empty: off.
SCHEDULER_SERVICE_LEVELS = env_levels("SCHEDULER_SERVICE_LEVELS")
#: A preempted job gets SIGTERM and this many seconds to checkpoint before SIGKILL.
SCHEDULER_PREEMPT_GRACE_SECONDS = env_int("SCHEDULER_PREEMPT_GRACE_SECONDS", 60, minimum=0)
#: An account below its guaranteed GPUs (Quota.guaranteed_gpus) evicts jobs running on
#: borrowed GPUs to get them back (Kueue's reclaimWithinCohort).
SCHEDULER_RECLAIM = env_bool("SCHEDULER_RECLAIM", True)
#: What sharing a GPU costs, charged in accounting on each share (a share s is charged
#: s * (1 + overhead) GPUs; placement gives it exactly s): per sharing mode, and per GPU
#: model as MODEL/mode, e.g. "time-slicing=0.1, mps=0.05, T4/mps=0.03".
SCHEDULER_SHARING_OVERHEAD = env_sharing_overheads("SCHEDULER_SHARING_OVERHEAD", {"time-slicing": 0.1, "mps": 0.05})
#: Where the local backend keeps job directories and logs.
QM_WORK_DIR = Path(env_str("QM_WORK_DIR", str(VAR_DIR / "work")))
# --- Notifications (notifications/) -----------------------------------------------------
#: The portal's address as its users reach it, for links in messages.
PORTAL_URL = env_str("PORTAL_URL", "http://127.0.0.1:8000")
#: Mail: Django's SMTP backend by default (any server; EMAIL_BACKEND for others).
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
#: Where Django's file backend (the demo's, ``run_demo``) writes each message.
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH") or str(VAR_DIR / "mail")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "quartermaster@localhost")
#: How often the notifier reads what happened and sends what is due.
NOTIFY_SECONDS = env_float("NOTIFY_SECONDS", 15.0, minimum=1.0)
#: How often it looks at the queue's state (quotas, estimates): it reads every waiting job.
NOTIFY_CONDITIONS_SECONDS = env_float("NOTIFY_CONDITIONS_SECONDS", 300.0, minimum=1.0)
#: Tries before a message is given up (backoff 30 s doubling, at most an hour apart).
NOTIFY_MAX_ATTEMPTS = env_int("NOTIFY_MAX_ATTEMPTS", 8, minimum=1)
NOTIFY_WEBHOOK_TIMEOUT = env_float("NOTIFY_WEBHOOK_TIMEOUT", 10.0, minimum=0.5)
#: Webhooks are never sent to internal addresses (loopback, private, link-local, the
#: portal's own: notifications/outbound.py); these host names and IP networks are let
#: through anyway, for a receiver inside the site. Empty by default.
NOTIFY_WEBHOOK_ALLOWED_HOSTS = env_hosts_and_networks("NOTIFY_WEBHOOK_ALLOWED_HOSTS")
#: The idle-GPU rule's defaults (an account may set its own, monitoring/idle.py): a
#: running job whose measured GPUs average under IDLE_BELOW_PCT for IDLE_MINUTES is
#: flagged; IDLE_ACTION (none, requeue or cancel) runs IDLE_ACTION_MINUTES later if it
#: is still idle.
IDLE_BELOW_PCT = env_float("IDLE_BELOW_PCT", 5.0, minimum=0)
IDLE_MINUTES = env_int("IDLE_MINUTES", 30, minimum=1)
IDLE_ACTION = env_choice("IDLE_ACTION", "none", ["none", "requeue", "cancel"])
IDLE_ACTION_MINUTES = env_int("IDLE_ACTION_MINUTES", 30, minimum=1)
#: An account is near its GPU quota at this share of it, in percent.
NOTIFY_QUOTA_PCT = env_float("NOTIFY_QUOTA_PCT", 80.0, minimum=1)
#: A waiting job's estimate "moved" when it shifts by more than this many minutes.
NOTIFY_ESTIMATE_SHIFT_MINUTES = env_int("NOTIFY_ESTIMATE_SHIFT_MINUTES", 30, minimum=1)

#: Interactive sessions (``scheduler.models.InteractiveSession``): the ports a session's
#: server may listen on, on its node (picked free there; the proxy reaches no other port),
#: and how long a session may go without a request through the proxy before it is ended
#: (0: never; its walltime still ends it).
SESSION_PORTS = env_port_range("SESSION_PORTS", (20000, 29999))
SESSION_IDLE_MINUTES = env_int("SESSION_IDLE_MINUTES", 120, minimum=0)

#: Where a job may start (its ``workdir``): these directories and their subtrees, with
#: ``{user}`` for the owner's cluster user name (Open OnDemand's allowlist). Never the
#: portal's own tree, whatever is listed.
JOB_WORKDIR_ROOTS = env_list("JOB_WORKDIR_ROOTS", ["/home/{user}", "/scratch/{user}"])
#: The Files page and API (``scheduler.files``) reach these same roots, as the user's
#: cluster identity: the most one upload may hold, the most a folder downloaded as an
#: archive may hold (bytes, entries), and the most entries one listing shows.
FILES_MAX_UPLOAD_BYTES = env_int("FILES_MAX_UPLOAD_BYTES", 10 * 1024**3, minimum=1)
FILES_ARCHIVE_MAX_BYTES = env_int("FILES_ARCHIVE_MAX_BYTES", 20 * 1024**3, minimum=1)
FILES_ARCHIVE_MAX_ENTRIES = env_int("FILES_ARCHIVE_MAX_ENTRIES", 100_000, minimum=1)
FILES_LIST_MAX_ENTRIES = env_int("FILES_LIST_MAX_ENTRIES", 50_000, minimum=1)
#: When the portal is neither root nor the user, the files agent runs as the user through
#: ``FILES_SUDO -n -u <user> -- FILES_AGENT_PYTHON -I -S <agent>`` (the sudoers rule in
#: deploy/sudoers.d/quartermaster names the same; docs/admin/files.md).
FILES_SUDO = env_str("FILES_SUDO", "/usr/bin/sudo")
FILES_AGENT_PYTHON = env_str("FILES_AGENT_PYTHON", "/usr/bin/python3")
#: The most a job's files may hold in all (bytes of UTF-8 text), and how many files.
JOB_FILES_MAX_BYTES = env_int("JOB_FILES_MAX_BYTES", 1_000_000, minimum=1)
JOB_FILES_MAX_COUNT = env_int("JOB_FILES_MAX_COUNT", 50, minimum=1)
#: Job arrays: task indices run from 0 to JOB_ARRAY_MAX_SIZE - 1, so an array has at most
#: that many tasks (Slurm's MaxArraySize, same default).
JOB_ARRAY_MAX_SIZE = env_int("JOB_ARRAY_MAX_SIZE", 10001, minimum=1)
#: Every task stores its own command and script, the array its files once: an array may
#: hold at most this many bytes of them in all (tasks x bytes per task, plus the files);
#: larger inputs belong on the cluster's storage, the script reading them by $QM_ARRAY_TASK_ID.
JOB_ARRAY_MAX_BYTES = env_int("JOB_ARRAY_MAX_BYTES", 256_000_000, minimum=1)
#: The lowest uid a job may run as: cluster identities below it (root, system accounts)
#: are refused, in the API and again by the backends (Debian's FIRST_UID).
QM_MIN_JOB_UID = env_int("QM_MIN_JOB_UID", 1000, minimum=1)
#: The QOS of jobs whose account tree sets no QOS list or default (Slurm's "normal").
SCHEDULER_DEFAULT_QOS = env_str("SCHEDULER_DEFAULT_QOS", "normal")

# --- Monitoring ------------------------------------------------------------------
#: Raw samples are kept this long, then only their rollups.
MONITORING_RAW_RETENTION_HOURS = env_int("MONITORING_RAW_RETENTION_HOURS", 48, minimum=1)
MONITORING_MINUTE_RETENTION_DAYS = env_int("MONITORING_MINUTE_RETENTION_DAYS", 30, minimum=1)
MONITORING_HOUR_RETENTION_DAYS = env_int("MONITORING_HOUR_RETENTION_DAYS", 400, minimum=1)
#: Seconds between rollup passes (beat); each pass recomputes the last lookback window.
MONITORING_ROLLUP_SECONDS = env_float("MONITORING_ROLLUP_SECONDS", 60.0, minimum=1.0)
MONITORING_ROLLUP_LOOKBACK_MINUTES = env_int("MONITORING_ROLLUP_LOOKBACK_MINUTES", 120, minimum=2)
#: How often agents sample (the raw resolution charts assume).
MONITORING_SAMPLE_SECONDS = env_float("MONITORING_SAMPLE_SECONDS", 10.0, minimum=1.0)
#: Most samples one ingest request may carry.
MONITORING_MAX_BATCH = env_int("MONITORING_MAX_BATCH", 10000, minimum=1)
#: Charts: most points per series, and most rows a chart may read before a coarser
#: resolution is used.
MONITORING_CHART_MAX_POINTS = env_int("MONITORING_CHART_MAX_POINTS", 720, minimum=10)
MONITORING_CHART_ROW_BUDGET = env_int("MONITORING_CHART_ROW_BUDGET", 200_000, minimum=1000)
#: Health: a GPU over this temperature, or throttling for one of these reasons, gets no
#: new jobs; nor does one with a new XID for MONITORING_XID_HOLD_SECONDS. A critical XID
#: drains the node.
MONITORING_TEMPERATURE_LIMIT_C = env_float("MONITORING_TEMPERATURE_LIMIT_C", 85.0, minimum=0)
MONITORING_UNHEALTHY_THROTTLE_REASONS = env_list(
    "MONITORING_UNHEALTHY_THROTTLE_REASONS",
    ["hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"],
)
MONITORING_XID_HOLD_SECONDS = env_int("MONITORING_XID_HOLD_SECONDS", 3600, minimum=0)
MONITORING_CRITICAL_XIDS = env_int_list("MONITORING_CRITICAL_XIDS", [48, 63, 64, 74, 79, 94, 95])
#: The GPU process audit: a process still on a job's GPUs this long after the job ended
#: is reported as a leftover (and the GPU gets no new jobs until it is gone).
MONITORING_PROCESS_GRACE_SECONDS = env_int("MONITORING_PROCESS_GRACE_SECONDS", 120, minimum=0)
#: Bearer token Prometheus must send to GET /metrics; empty = /metrics is open.
MONITORING_METRICS_TOKEN = env_str("MONITORING_METRICS_TOKEN", "")
#: Serve /metrics without a token outside DEBUG (e.g. behind a private network).
MONITORING_METRICS_PUBLIC = env_bool("MONITORING_METRICS_PUBLIC", False)
#: The fairness watch (every 5 minutes): when Jain's index over accounts' mean bounded
#: slowdowns of the GPU jobs ended in the last 24 h falls below this, staff are told
#: which account is starving, once per episode, and a replay of the last
#: FAIRNESS_SWITCH_DAYS compares the site's policy with FAIRNESS_SWITCH_POLICY. 0: off.
FAIRNESS_WATCH_BELOW = env_float("FAIRNESS_WATCH_BELOW", 0.8, minimum=0, maximum=1)
FAIRNESS_SWITCH_POLICY = env_choice("FAIRNESS_SWITCH_POLICY", "stretch-las-preempt", sorted(REPLAY_POLICIES))
FAIRNESS_SWITCH_DAYS = env_int("FAIRNESS_SWITCH_DAYS", 7, minimum=1)
#: Simulated samples for GPUs of local (simulated) clusters, from the scheduler loop or
#: beat. Default: on in the embedded mode (no broker), off otherwise.
MONITORING_SIMULATE = env_bool("MONITORING_SIMULATE", not env_str("CELERY_BROKER_URL", env_str("REDIS_URL", "")))

# --- Celery ----------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL", "")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
#: Queue our tasks use; lets several deployments (or test runs) share one Redis.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "quartermaster")
CELERY_TASK_ACKS_LATE = True  # a task killed mid-way is redelivered, not lost
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
#: "celery" when a broker is configured, else dispatch runs inline in the scheduler loop.
SCHEDULER_DISPATCH = env_choice("SCHEDULER_DISPATCH", "celery" if CELERY_BROKER_URL else "inline", ["celery", "inline"])
#: Beat's entries: the periodic jobs of ``quartermaster.periodic`` (``run_scheduler`` runs the same).
CELERY_BEAT_SCHEDULE = beat_schedule(periodic_jobs(sys.modules[__name__]))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # django-axes says at INFO when each process starts and on every login ("Deleted 0
    # failed login attempts"); its failures and lockouts are WARNINGs, and stay.
    "loggers": {"axes": {"level": env_str("AXES_LOG_LEVEL", "WARNING")}},
}

# --- Job files and submissions: storage and rate (issue 34) -------------------------------
#: The most bytes of job files one user may have stored, across their jobs whose files have
#: not expired (an array's files count once, as they are stored once).
JOB_FILES_MAX_BYTES_PER_USER = env_int("JOB_FILES_MAX_BYTES_PER_USER", 50_000_000, minimum=1)
#: Days after the last job that runs them ended that a submission's files are dropped
#: (the job's page and the API then say they expired; a requeue needs them resubmitted).
JOB_FILES_RETENTION_DAYS = env_int("JOB_FILES_RETENTION_DAYS", 30, minimum=1)
#: Submissions per user (POST /api/v1/jobs/, the submit page); a job array is one. Over it: 429.
JOB_SUBMIT_RATE = env_rate("JOB_SUBMIT_RATE", "60/minute")
