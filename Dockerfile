# pricing-ha container image: one process per container, chosen by the command, e.g.
#   docker run IMAGE run --group p1 | dedupe | feed | topics create
# Configuration comes from the environment (PRICING_HA__SECTION__KEY, PRICING_HA_BOOTSTRAP,
# OTEL_*), see config/default.toml; deploy/terraform sets it per service.
#
# Base images are pinned to an exact patch release of the Python that requirements/lock.txt is
# made for (CPython 3.11, linux x86_64). Pin the digest as well where your registry allows:
#   FROM python:3.11.14-slim-bookworm@sha256:<digest>   (docker buildx imagetools inspect ...)

# --- build: a venv with exactly the hash-pinned runtime dependencies, then pricing-ha --------
FROM python:3.11.14-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_NO_INPUT=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Dependencies first, in their own layer: it is rebuilt only when the lock changes.
# deploy/docker/requirements.txt = pyproject.toml's runtime dependencies + the aws extra
# (MSK IAM), with hashes, held to requirements/lock.txt's versions (scripts/deploy-tools --lock).
COPY deploy/docker/requirements.txt /tmp/requirements.txt
RUN python -m venv /opt/pricing-ha \
 && /opt/pricing-ha/bin/python -m pip install --no-cache-dir --require-hashes \
      --only-binary :all: -r /tmp/requirements.txt
# The build backend (setuptools) from the project's own lock, in a throwaway venv, so that the
# runtime venv carries no build tools.
COPY requirements/lock.txt /tmp/lock.txt
RUN awk '/^setuptools==/ {p = 1} p {print} p && !/\\$/ {exit}' /tmp/lock.txt >/tmp/setuptools.txt \
 && python -m venv /tmp/build-venv \
 && /tmp/build-venv/bin/python -m pip install --no-cache-dir --require-hashes \
      --no-deps -r /tmp/setuptools.txt
COPY pyproject.toml README.md ./
COPY neli ./neli
COPY pricing_ha ./pricing_ha
RUN /tmp/build-venv/bin/python -m pip wheel --no-cache-dir --no-deps --no-build-isolation \
      --wheel-dir /tmp/wheels . \
 && /opt/pricing-ha/bin/python -m pip install --no-cache-dir --no-deps /tmp/wheels/*.whl \
 && /opt/pricing-ha/bin/python -m pip check \
 && /opt/pricing-ha/bin/pricing-ha --help >/dev/null

# --- runtime: the venv, the configuration examples and an unprivileged user ------------------
FROM python:3.11.14-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="pricing-ha" \
      org.opencontainers.image.description="Continuously available price distribution over Kafka (NELI)" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 pricing \
 && useradd --system --uid 10001 --gid pricing --home-dir /var/lib/pricing-ha \
      --create-home --shell /usr/sbin/nologin pricing
COPY --from=build /opt/pricing-ha /opt/pricing-ha
COPY config /etc/pricing-ha
COPY deploy/docker/healthcheck.py /opt/pricing-ha/healthcheck.py
# One process per container, so every long-running role serves /healthz, /readyz and /metrics
# on the same port, on all interfaces (the task's security group decides who may connect).
ENV PATH="/opt/pricing-ha/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PRICING_HA__HEALTH__HOST=0.0.0.0 \
    PRICING_HA__HEALTH__PUBLISHER_PORT=8080 \
    PRICING_HA__HEALTH__RELAY_PORT=8080 \
    PRICING_HA__HEALTH__SUBSCRIBER_PORT=8080 \
    PRICING_HA__TELEMETRY__TRACES_DIR=/var/lib/pricing-ha/traces
WORKDIR /var/lib/pricing-ha
USER 10001:10001
EXPOSE 8080
# Liveness only (/healthz: the process's loop runs); /readyz also needs the broker, and a broker
# outage must not get every member restarted at once. The feed and one-shot commands serve no
# health port: their task definitions do not use this check.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["/opt/pricing-ha/bin/python", "/opt/pricing-ha/healthcheck.py"]
# Exec form: pricing-ha is PID 1's direct child-less process and receives SIGTERM itself, which
# starts the graceful hand-over (stop leading, flush, leave the group); see stopTimeout in
# deploy/terraform for the grace it is given.
STOPSIGNAL SIGTERM
ENTRYPOINT ["pricing-ha"]
CMD ["--help"]
