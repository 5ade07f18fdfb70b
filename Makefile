# Quartermaster. `make demo` runs the portal on the embedded defaults; `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
HOST ?= 127.0.0.1

.PHONY: venv native apps demo test check bench clean

$(BIN)/.installed: requirements.txt requirements-dev.txt requirements-ldap.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	@# qm (and qm-agent) as commands of the venv: .venv/bin/qm, editable, so it follows the checkout.
	@# setuptools' boxed "Editable installation" notice goes to a log, shown only if it fails.
	$(BIN)/pip install --quiet --no-deps -e . >$(VENV)/qm-install.log 2>&1 || { cat $(VENV)/qm-install.log; exit 1; }
	@# LDAP login builds python-ldap against libldap (libldap2-dev, libsasl2-dev): optional,
	@# so a machine without them gets one line, and the compiler's words go to a log.
	@$(BIN)/pip install --quiet -r requirements-ldap.txt >$(VENV)/ldap-build.log 2>&1 || \
	  echo "make venv: LDAP login unavailable (needs apt-get install libldap2-dev libsasl2-dev, then make venv; see $(VENV)/ldap-build.log)"
	touch $@

venv: $(BIN)/.installed

## The scheduling core compiled with mypyc (about 1.7x faster); used only while it matches
## the sources, else the core runs interpreted (scheduler/core/compiled.py).
NATIVE := build/native/manifest.json
$(NATIVE): $(BIN)/.installed scripts/build_native_core.py $(wildcard scheduler/core/*.py)
	DEBUG=1 $(BIN)/python scripts/build_native_core.py

native: $(NATIVE)

## The interactive apps' environment (JupyterLab, TensorBoard: requirements-apps.txt), apart
## from the portal's venv: session jobs run its servers, read-only, with its bin/ first on
## PATH (cluster config apps_env). Made from Debian's Python where there is one, which the
## job sandbox and every Debian node have; JupyterLab's assets ship built, so no build step.
APPS_ENV ?= var/apps-env
## Debian's Python where it can make a venv (python3-venv), else the portal's own.
APPS_PYTHON ?= $(shell /usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1 && echo /usr/bin/python3 || echo $(PYTHON))
$(APPS_ENV)/.installed: requirements-apps.txt
	$(APPS_PYTHON) -m venv $(APPS_ENV)
	$(APPS_ENV)/bin/pip install --quiet --upgrade pip
	$(APPS_ENV)/bin/pip install --quiet -r requirements-apps.txt
	touch $@

apps: $(APPS_ENV)/.installed

## The embedded demo: SQLite, the local simulated cluster, no Redis, scheduler loop in-process.
demo: venv native apps
	@# Without bubblewrap demo jobs are not isolated from the portal: single-user, localhost only.
	@if ! command -v bwrap >/dev/null 2>&1; then case "$(HOST)" in 127.*|localhost|::1) ;; \
	  *) echo "Refusing to listen on $(HOST): without bubblewrap (apt-get install bubblewrap) demo jobs run unsandboxed and can read whatever their uid can, the portal's files perhaps; the demo is single-user and stays on localhost."; exit 1;; esac; fi
	DEBUG=1 $(BIN)/python manage.py migrate --noinput
	DEBUG=1 $(BIN)/python manage.py seed_demo --apps-env $(abspath $(APPS_ENV))
	@echo ""
	@echo "Quartermaster is starting at http://$(HOST):$(PORT)/  (API docs: /api/docs/, admin: /admin/)"
	@echo "Log in as one of the demo logins listed above. Ctrl-C stops the web server, the scheduler and the demo's jobs."
	@DEBUG=1 $(BIN)/python manage.py run_demo $(HOST):$(PORT)

## All tests (the core compiled, if it builds), then the core's own tests interpreted.
## Set DATABASE_URL/REDIS_URL to test against PostgreSQL and Redis.
test: venv native
	DEBUG=1 $(BIN)/python -m pytest $(PYTEST_ARGS)
	QM_NATIVE_CORE=off DEBUG=1 $(BIN)/python -m pytest -q tests/core

## Lint, types, the import fence, migrations, the API schema and the documentation site.
check: venv native
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	DEBUG=1 $(BIN)/mypy .
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_import_cycles.py
	DEBUG=1 $(BIN)/python manage.py makemigrations --check --dry-run
	DEBUG=1 $(BIN)/python manage.py spectacular --validate --fail-on-warn --file /dev/null
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

## Benchmarks (print one JSON object per figure). Needs DATABASE_URL for PostgreSQL figures.
bench: venv native
	DEBUG=1 $(BIN)/python benchmarks/tick.py
	DEBUG=1 $(BIN)/python benchmarks/submit.py
	DEBUG=1 $(BIN)/python benchmarks/pages.py

clean:
	rm -rf $(VENV) var build
