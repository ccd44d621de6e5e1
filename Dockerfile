# simplequeue serving against SQL Server through Microsoft ODBC Driver 18.
#   docker build -t simplequeue .
#   docker run -p 8000:8000 -e SIMPLEQUEUE_DATABASE_URL='mssql+odbc://user:pw@db:1433/queue?driver=ODBC+Driver+18+for+SQL+Server&TrustServerCertificate=yes' simplequeue
# (Not built in this project's CI: no Docker engine runs there.)
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends curl gnupg ca-certificates unixodbc \
 && curl -fsSL https://packages.microsoft.com/keys/microsoft.asc | gpg --dearmor -o /usr/share/keyrings/microsoft-prod.gpg \
 && curl -fsSL https://packages.microsoft.com/config/debian/12/prod.list -o /etc/apt/sources.list.d/mssql-release.list \
 && apt-get update \
 && ACCEPT_EULA=Y apt-get install -y --no-install-recommends msodbcsql18 \
 && apt-get purge -y curl gnupg && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*

WORKDIR /srv/simplequeue
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
RUN pip install --no-cache-dir '.[mssql]' && useradd --system --no-create-home simplequeue

USER simplequeue
ENV SIMPLEQUEUE_HOST=0.0.0.0 SIMPLEQUEUE_PORT=8000
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"
CMD ["simplequeue", "serve"]
