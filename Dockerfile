# Compiles the scheduling core with mypyc (scheduler/core/compiled.py). Should the compile
# fail, the stage still ends with an empty build/native and the image runs the core
# interpreted: same decisions, slower.
FROM python:3.11-slim AS native
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
COPY requirements-dev.txt .
RUN pip install --no-cache-dir $(grep -E '^(mypy|setuptools)==' requirements-dev.txt)
COPY scheduler/__init__.py scheduler/
COPY scheduler/core scheduler/core
COPY scripts/build_native_core.py scripts/
RUN mkdir -p build/native && python scripts/build_native_core.py

# One image for web, worker and beat.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 QM_VAR_DIR=/var/lib/quartermaster
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
COPY --from=native /app/build/native build/native
RUN mkdir -p $QM_VAR_DIR && DEBUG=1 python manage.py collectstatic --noinput
EXPOSE 8000
# ASGI under gunicorn's uvicorn workers: the portal and the interactive sessions' proxy
# (/sessions/<id>/, HTTP and WebSocket) on one port (docs/admin/sessions-proxy.md).
CMD ["gunicorn", "quartermaster.asgi:application", "--worker-class", "uvicorn_worker.UvicornWorker", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
