# syntax=docker/dockerfile:1
# One image for both processes: `dmrollout controller` (the default CMD) and `dmrollout worker`
# (the worker Deployment sets `args: ["worker"]`); the Helm hook runs `dmrollout temporal setup`.
#
#   make image        # without Docker: mmdebstrap base + buildah, an OCI archive in build/
#   docker build -t dmrollout:0.1.0.dev0 .
#
# `make image` (hack/image.sh) builds on a Debian bookworm base with Debian's python3.11
# (--build-arg PYTHON_IMAGE=localhost/dmrollout-base:bookworm); the default below is used
# where a registry is reachable.
# The base is pinned by digest: a tag can be re-pointed under a running cluster, a digest cannot.
# Both stages must use the same base, because the virtualenv's python is a symlink into it.
# The digest must be refreshed (and reviewed) with
#   docker buildx imagetools inspect python:3.11-slim --format '{{json .Manifest.Digest}}'
# which prints the multi-platform index digest; no Docker engine or registry was reachable where
# this file was written, so the value below was not pulled from here.
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# --- builder: the runtime packages and their dependencies in a virtualenv ---------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/venv
WORKDIR /src
# Only what the runtime image runs (the .dockerignore is an allow-list of the same paths).
# simulators/ and localenv/ (the local environment: `dmrollout dev up`, `demo`, the tests) are
# not copied, so setuptools' package discovery does not find them and they stay out of the
# image; `dmrollout dev up` in the image says so instead of failing on an import.
COPY pyproject.toml README.md ./
COPY decisionmodel/ decisionmodel/
COPY kube/ kube/
COPY activities/ activities/
COPY workflows/ workflows/
COPY controller/ controller/
# Runtime dependencies only: neither the `dev` nor the `local` extra (no test tools, no kubectl
# or Temporal CLI binaries). pip compiles the bytecode here, so the read-only runtime never
# needs to write it. Then what the processes never load goes: the kubernetes client's asyncio
# twin (kubernetes.aio, 68 MB, and aiohttp, which only it imports; dmrollout uses the sync
# client), and pip and setuptools themselves. The import line loads every runtime module from
# the venv (-I: not from /src), so a removal that something needs fails the build, not a Pod.
RUN /opt/venv/bin/pip install --no-cache-dir . \
    && /opt/venv/bin/pip uninstall --yes aiohttp aiohttp-retry \
    && rm -rf /opt/venv/lib/python3.11/site-packages/kubernetes/aio \
    && /opt/venv/bin/pip uninstall --yes pip setuptools \
    && /opt/venv/bin/python -I -c "import importlib, pkgutil; [importlib.import_module(m.name) \
       for p in ('decisionmodel', 'kube', 'activities', 'workflows', 'controller') \
       for m in pkgutil.walk_packages(importlib.import_module(p).__path__, p + '.')]" \
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
