# Ensemble Service: the HTTP API and the ensembles library in one image.
#
#   docker build -t ensemble-service .
#   docker run -d -p 127.0.0.1:8000:8000 -v ensemble-data:/data --stop-timeout 40 ensemble-service
#
# Two stages on debian:bookworm-slim (Debian's Python 3.11): `build` makes a virtual
# environment in /opt/venv with the project installed (not editable) from wheels only (no
# compiler anywhere), then slims it (scripts/slim_venv.sh: no tests, headers, symbol
# tables, installer or caches); `runtime` copies that onto a base with python3 only and
# runs uvicorn as an unprivileged user. What each part costs: docs/docker.md.
#
# Optional build secrets, for machines whose pip needs them (a build elsewhere needs none):
#   --secret id=pipcert,src=$PIP_CERT          CA bundle pip should trust (TLS-intercepting proxy)
#   --secret id=pipconf,src=/path/to/pip.conf  pip configuration, e.g. a private index
# Both are read only while pip runs and end up in no layer. Configuration of the running
# service is only through ENSEMBLE_* environment variables (see docs/settings.md).

ARG DEBIAN_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------------------
FROM ${DEBIAN_IMAGE} AS build

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# DL3008: packages come from the base image's own suite (bookworm and its security
# updates); pinning exact Debian revisions would break the build at every point release.
# libgomp1: LightGBM's wheel links the system's OpenMP runtime (the import check below);
# binutils: strip, for the slimming step (this stage only; no compiler is installed).
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        binutils ca-certificates libgomp1 python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*

# Wheels only (a package without one fails the build rather than compiling), no download
# cache, no bytecode compiled at install (the last step below compiles what runs).
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_DEFAULT_TIMEOUT=120 \
    PIP_ONLY_BINARY=:all:

RUN python3 -m venv /opt/venv

WORKDIR /src

# Dependencies first, from pyproject.toml alone, so that a change to the code or the README
# reuses this (large) layer. The version ranges are the ones pyproject.toml declares, with
# its postgres, s3 and dask extras (the image serves the scaled-out deployment), its
# export extra (skops and ONNX exports, docs/export.md) and its boosting extra (the kinds
# xgboost, lightgbm, catboost; xgboost-cpu: no CUDA libraries) and its explain extra (shap).
# scripts/image_requirements.py lists them; CatBoost goes in without plotly and graphviz,
# which only its plotting methods import, and shap without numba and llvmlite (LLVM): the
# service loads only shap's compiled TreeSHAP, never `import shap`.
COPY pyproject.toml ./
COPY scripts/image_requirements.py ./scripts/
RUN --mount=type=secret,id=pipcert,required=false \
    --mount=type=secret,id=pipconf,required=false \
    if [ -s /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \
    python3 scripts/image_requirements.py requirements > /tmp/requirements.txt \
    && python3 scripts/image_requirements.py no-deps > /tmp/no-deps.txt \
    && /opt/venv/bin/pip install --no-compile -r /tmp/requirements.txt \
    && /opt/venv/bin/pip install --no-compile --no-deps -r /tmp/no-deps.txt \
    && /opt/venv/bin/python scripts/image_requirements.py deps > /tmp/their-deps.txt \
    && /opt/venv/bin/pip install --no-compile -r /tmp/their-deps.txt

# Then the project itself: a regular (non-editable) install into site-packages (setuptools
# builds its wheel: pure Python, no compiler).
COPY README.md ./
COPY ensembles ./ensembles
COPY app ./app
# The client and the `ensemble` CLI too: `docker run ... ensemble models list` works.
COPY ensemble_client ./ensemble_client
RUN --mount=type=secret,id=pipcert,required=false \
    --mount=type=secret,id=pipconf,required=false \
    if [ -s /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \
    /opt/venv/bin/pip install --no-compile --no-deps . \
    && /opt/venv/bin/python scripts/image_requirements.py check

# Slim the venv (no tests, headers, static libraries, symbol tables, installer, bytecode)
# and prove that what the service uses still imports, and that TreeSHAP runs without
# numba (-B: writing no bytecode); then
# compile the bytecode of what a server process and the training fork server import at
# start (the venv is read-only to the service: without it every start would compile it
# again); the rest compiles in memory when a process first imports it. -P: the installed
# packages, not the sources in this folder. os._exit: pyarrow 26 aborts now and then at
# interpreter exit after a Parquet write and read (1 run in 120 under load, the same
# before this stage removed anything); the check is Parquet, not that.
COPY scripts/slim_venv.sh ./scripts/
RUN bash scripts/slim_venv.sh /opt/venv \
    && /opt/venv/bin/python -B -P -c 'import app.main, app.jobs.worker, catboost, lightgbm, xgboost, skl2onnx, onnxmltools, onnxruntime, skops.io, distributed, psycopg, boto3' \
    && /opt/venv/bin/python -B -P -c 'import numpy as np; from sklearn.ensemble import RandomForestClassifier as F; from ensembles.explain.trees import tree_attribution as t; X = np.arange(40.0).reshape(20, 2); assert t(F(3, random_state=0).fit(X, X[:, 0] > 9), X, "proba", "probability").method == "tree_shap"' \
    && /opt/venv/bin/python -B -P -c 'import io, os, pyarrow as pa, pyarrow.dataset, pyarrow.parquet as pq; b = io.BytesIO(); pq.write_table(pa.table({"x": [1.5]}), b); assert pq.read_table(io.BytesIO(b.getvalue()))["x"][0].as_py() == 1.5; os._exit(0)' \
    && /opt/venv/bin/python -P -c 'import app.__main__, app.main, app.jobs.worker' \
    && du -sm /opt/venv

# ---------------------------------------------------------------------------------------
FROM ${DEBIAN_IMAGE} AS runtime

LABEL org.opencontainers.image.title="Ensemble Service" \
      org.opencontainers.image.description="Train, version and serve ensemble models over HTTP." \
      org.opencontainers.image.base.name="debian:bookworm-slim"

# DL3008: as in the build stage. The venv's python is a link to /usr/bin/python3, the
# same Debian Python 3.11 as in the build stage; libgomp1 is LightGBM's OpenMP runtime.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libgomp1 python3 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 ensemble \
    && useradd --uid 10001 --gid ensemble --no-create-home --no-log-init \
        --home-dir /nonexistent --shell /usr/sbin/nologin ensemble \
    && install -d -o ensemble -g ensemble -m 0750 /data

COPY --from=build /opt/venv /opt/venv

# MPLCONFIGDIR: matplotlib (the report plots) keeps its font cache there; the user has no
# home, and without a writable folder it would warn at every start.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ENSEMBLE_DATA_DIR=/data \
    MPLCONFIGDIR=/tmp/matplotlib

# An empty, root-owned working directory: uvicorn puts its --app-dir (default: the working
# directory) first on sys.path, so nothing writable may sit there.
WORKDIR /srv
# Numeric, so that Kubernetes' runAsNonRoot can verify it; a bind-mounted /data must be
# writable by uid 10001.
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000

# Liveness only (readiness is /readyz). Needs no curl: the venv's Python does the request.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

# SIGTERM (docker stop) starts uvicorn's graceful shutdown: stop accepting, let in-flight
# requests finish for up to ENSEMBLE_SHUTDOWN_TIMEOUT_S (default 30 s), run the app's
# shutdown (workers stopped, running jobs failed), exit 0. Give `docker stop` more than
# that: --stop-timeout 40 / stop_grace_period. `python -m app` is uvicorn with the
# service's settings (HOST, PORT, ENSEMBLE_SHUTDOWN_TIMEOUT_S, ENSEMBLE_WORKERS: with N > 1
# it supervises N server processes on the one port and passes SIGTERM to each).
ENV HOST=0.0.0.0 \
    PORT=8000
STOPSIGNAL SIGTERM
CMD ["python", "-m", "app"]
