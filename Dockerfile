# syntax=docker/dockerfile:1
# One image for both processes: `dmrollout controller` (the default CMD) and `dmrollout worker`
# (the worker Deployment sets `args: ["worker"]`); the Helm hook runs `dmrollout temporal setup`.
#
#   docker build -t dmrollout:0.1.0.dev0 .
#
# The base is pinned by digest: a tag can be re-pointed under a running cluster, a digest cannot.
# Both stages must use the same base, because the virtualenv's python is a symlink into it.
# The digest must be refreshed (and reviewed) with
#   docker buildx imagetools inspect python:3.11-slim --format '{{json .Manifest.Digest}}'
# which prints the multi-platform index digest; no Docker engine or registry was reachable where
# this file was written, so the value below was not pulled from here.
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# --- builder: the project and its runtime dependencies in a virtualenv ------------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/venv
WORKDIR /src
# Only what `pip install .` reads (the .dockerignore is an allow-list of the same paths).
COPY pyproject.toml README.md ./
COPY decisionmodel/ decisionmodel/
COPY kube/ kube/
COPY activities/ activities/
COPY workflows/ workflows/
COPY controller/ controller/
COPY simulators/ simulators/
COPY localenv/ localenv/
# Runtime dependencies only: neither the `dev` nor the `local` extra (no test tools, no kubectl
# or Temporal CLI binaries). pip compiles the bytecode here, so the read-only runtime never
# needs to write it.
RUN /opt/venv/bin/pip install --no-cache-dir . \
    && /opt/venv/bin/dmrollout --help > /dev/null

# --- runtime ----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="dmrollout" \
      org.opencontainers.image.description="Safe, auditable rollout of decision models on Kubernetes, orchestrated by Temporal" \
      org.opencontainers.image.licenses="Apache-2.0"
# A numeric, fixed UID/GID (the distroless "nonroot" number): the kubelet can verify
# runAsNonRoot against a numeric USER without reading /etc/passwd, and the manifests pin the
# same numbers. The passwd entry only gives tools a name and HOME for it.
RUN groupadd --system --gid 65532 dmrollout \
    && useradd --system --uid 65532 --gid 65532 --home-dir /tmp --no-create-home \
       --shell /usr/sbin/nologin dmrollout
COPY --from=builder /opt/venv /opt/venv
# Read-only root filesystem: no bytecode writes, HOME and temp files on the /tmp emptyDir the
# manifests mount (the kubernetes client writes inline kubeconfig certificates there).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
WORKDIR /tmp
USER 65532:65532
ENTRYPOINT ["dmrollout"]
CMD ["controller"]
