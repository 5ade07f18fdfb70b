# One image for web, worker and beat.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 QM_VAR_DIR=/var/lib/quartermaster
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
RUN mkdir -p $QM_VAR_DIR && DEBUG=1 python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
