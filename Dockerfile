# tiermem HTTP service. Built by compose.yaml; on its own:
#   docker build -t tiermem .
#   docker run -p 8080:8080 -v tiermem-data:/data \
#     -e TIERMEM_REDIS_URL=redis://redis-host:6379/0 \
#     -e TIERMEM_AUTH_TOKENS='{"<long random token>": "<namespace>"}' tiermem
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false

# CPU-only torch first, from the PyTorch CPU index, so the project's torch==2.13.0
# requirement is already met and pip never pulls a multi-GB CUDA build.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

WORKDIR /app
COPY pyproject.toml README.md ./
COPY tiermem ./tiermem
COPY tiers ./tiers
COPY planner ./planner
COPY consolidation ./consolidation
COPY evals ./evals
# the embedding model is exported to ONNX at build time, into the image: a container
# starts without torch and without exporting (tiers/embed_onnx.py)
ENV TIERMEM_EMBEDDING_CACHE_DIR=/opt/tiermem/onnx
# with the `postgres` extra (psycopg): the same image serves a SQLite data dir or, with
# TIERMEM_COLD_URL, a PostgreSQL log (compose.postgres.yaml, compose.cluster.yaml)
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu ".[postgres]" \
    && python -c "import tiermem.cli, tiermem.service" \
    && tiermem model

# An unprivileged user owns the data dir (the SQLite log; the embedded Redis when no
# TIERMEM_REDIS_URL is given). Mount a volume at /data to keep the log.
RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin tiermem \
    && mkdir -p /data && chown tiermem:tiermem /data && chmod 0700 /data
USER tiermem
VOLUME ["/data"]

ENV TIERMEM_DATA_DIR=/data \
    TIERMEM_HTTP_HOST=0.0.0.0 \
    TIERMEM_HTTP_PORT=8080
EXPOSE 8080

# python:3.11-slim has no curl; the health check uses the standard library.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]

# Auth tokens are required (TIERMEM_AUTH_TOKENS); the service refuses to start without them.
CMD ["tiermem", "serve"]
