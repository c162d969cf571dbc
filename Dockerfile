# One image for the four Tessera services; the command picks the service:
#   docker run tessera:latest python -m services.issuer
# Build: docker build -t tessera:latest .   (docker compose builds it for you)

# --- build: the pinned runtime dependencies, then the project, into a self-contained venv ---
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
# The lock (no dev/embedded extras; `make lock` writes it) in a layer of its own: a code change
# does not reinstall the dependencies, and a tampered download fails its hash.
COPY requirements.txt ./
RUN pip install --require-hashes -r requirements.txt
COPY pyproject.toml README.md ./
COPY shared/ shared/
COPY services/ services/
COPY tessera/ tessera/
RUN pip install --no-deps . && pip check

# --- runtime: the venv, a non-root user, nothing else ---
FROM python:3.11-slim

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TESSERA_HOST=0.0.0.0 \
    TESSERA_DATA_DIR=/var/lib/tessera

RUN groupadd --system --gid 10001 tessera \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /var/lib/tessera --shell /usr/sbin/nologin tessera \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/tessera

COPY --from=build /opt/venv /opt/venv

WORKDIR /app
USER 10001:10001

EXPOSE 8000 8001 8002 8003

CMD ["python", "-m", "services.api"]
