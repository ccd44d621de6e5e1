# simplequeue, with Microsoft ODBC Driver 18 for SQL Server; SQLite in /data by default.
#   docker build -t simplequeue .
#   docker run -p 127.0.0.1:8000:8000 -v sq-data:/data -e SIMPLEQUEUE_API_KEYS='[{"key": "…", "role": "admin"}]' simplequeue
# It listens on 0.0.0.0 inside the container, so it needs SIMPLEQUEUE_API_KEYS (or
# SIMPLEQUEUE_ALLOW_ANONYMOUS=true). compose.yaml runs it against SQL Server 2022.
# The image installs the wheel the first stage builds, as pip users install it: what runs is the
# package (SQL, migrations, dashboard inside it), not a checkout. Not built in this project's CI
# (no Docker engine there); hadolint lints it in ./scripts/test, and tests/test_wheel.py runs the
# same wheel from a clean virtualenv.

FROM python:3.11-slim-bookworm AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
# hadolint ignore=DL3013
RUN pip install --no-cache-dir build \
 && python -m build --wheel --outdir /dist .

FROM python:3.11-slim-bookworm

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends curl gnupg ca-certificates unixodbc \
 && curl -fsSL https://packages.microsoft.com/keys/microsoft.asc | gpg --dearmor -o /usr/share/keyrings/microsoft-prod.gpg \
 && curl -fsSL https://packages.microsoft.com/config/debian/12/prod.list -o /etc/apt/sources.list.d/mssql-release.list \
 && apt-get update \
 && ACCEPT_EULA=Y apt-get install -y --no-install-recommends msodbcsql18 \
 && apt-get purge -y curl gnupg && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*

# /data belongs to uid 10001 and group 0, so that the image's user, or an arbitrary uid in group 0
# (OpenShift), can write the SQLite database there. (DL3013: the wheel is this release's; its
# dependencies' lower bounds are in pyproject.toml.)
COPY --from=wheel /dist /tmp/dist
# hadolint ignore=DL3013
RUN whl="$(ls /tmp/dist/simplequeue-*.whl)" \
 && pip install --no-cache-dir "${whl}[postgres,mssql]" \
 && rm -rf /tmp/dist \
 && mkdir -p /data && chown 10001:0 /data && chmod 0770 /data

WORKDIR /data
USER 10001:0
ENV SIMPLEQUEUE_HOST=0.0.0.0 \
    SIMPLEQUEUE_PORT=8000 \
    SIMPLEQUEUE_WORKERS=1 \
    SIMPLEQUEUE_DATABASE_URL=sqlite:////data/simplequeue.db \
    SIMPLEQUEUE_LOG_FORMAT=json
VOLUME ["/data"]
EXPOSE 8000
# Ready, not merely alive: the database answers and is migrated. The start period covers a
# database that comes up with the container (the service waits for it; see docs/operations.md, Outages).
HEALTHCHECK --start-period=60s --interval=10s --timeout=5s --retries=3 CMD ["simplequeue", "probe", "--ready"]
CMD ["simplequeue", "serve"]
