"""The prefetch Job ``<dm>-pf-<rev>``: pull the model into the revision's store and prove the
stored manifest has the expected digest (seed 000 §7, seed 001 "Prefetch failures").

Exit codes of container ``prefetch`` (the Job's podFailurePolicy turns 3-5 into an immediate
FailJob; anything else is retried up to backoffLimit within activeDeadlineSeconds):

- 3 ``ModelNotFound``: ``ollaya pull`` said the tag is not in the registry.
- 4 ``DigestMismatch``: the stored manifest's sha256 differs from a digest the user pinned in
  spec.digest (the tag moved, or the content is not what was pinned).
- 5 ``TagMoved``: the same mismatch when dmrollout resolved the digest from the tag itself:
  the tag moved between resolve and pull, and a fresh resolve (a new revision) is the fix.
- 1 ``PullFailed`` / ``ManifestMissing``: anything else (network, registry 5xx, disk), which
  may be transient.

The first line of ``/dev/termination-log`` is ``<Reason>: <message>``; dmrollout reads it from
the failed Pod's terminated state.
"""

from __future__ import annotations

from typing import Any

from decisionmodel.engine.params import PrefetchParams
from decisionmodel.engine.render import labels as L
from decisionmodel.engine.render.pod import (
    HOME_PATH,
    MODELS_PATH,
    container_security_context,
    pod_security_context,
    scheduling_fields,
    scratch_mounts,
    scratch_volumes,
    store_mount,
    store_volume,
)
from decisionmodel.engine.render.proxy import prefetch_proxy_env
from decisionmodel.vocabulary import ConditionStatus, Reason

CONTAINER_NAME = "prefetch"
BACKOFF_LIMIT = 4
EXIT_MODEL_NOT_FOUND = 3
EXIT_DIGEST_MISMATCH = 4
EXIT_TAG_MOVED = 5
PERMANENT_EXIT_CODES = (EXIT_MODEL_NOT_FOUND, EXIT_DIGEST_MISMATCH, EXIT_TAG_MOVED)

REASON_MODEL_NOT_FOUND = Reason.MODEL_NOT_FOUND.value
REASON_DIGEST_MISMATCH = Reason.DIGEST_MISMATCH.value
REASON_TAG_MOVED = Reason.TAG_MOVED.value
REASON_PULL_FAILED = "PullFailed"
REASON_MANIFEST_MISSING = "ManifestMissing"

# `ollaya pull` is I/O-bound and does not load the model: the Go reference measured a peak
# RSS of 36-39 MiB pulling laya:en. A small request keeps the Job out of BestEffort (first to
# be evicted); the 1 GiB limit leaves headroom for multi-GB GGUF pulls. No CPU limit, so the
# download is not throttled.
PREFETCH_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "100m", "memory": "256Mi"},
    "limits": {"memory": "1Gi"},
}

# Everything variable comes from the environment, so the script is one constant and cannot
# be injected through a model name. POSIX sh with only tee and sha256sum beyond builtins.
# `ollaya pull` starts its own local daemon, which needs a writable $HOME/.ollaya.
PREFETCH_SCRIPT = f"""\
set -u
fail() {{
  printf '%s\\n' "$2" > /dev/termination-log
  printf '%s\\n' "$2" >&2
  exit "$1"
}}
mkdir -p "$HOME"
{{ ollaya pull "$MODEL" 2>&1; echo "$?" > "$HOME/pull.rc"; }} | tee "$HOME/pull.log"
rc="$(cat "$HOME/pull.rc" 2>/dev/null || echo 1)"
if [ "$rc" != 0 ]; then
  case "$(cat "$HOME/pull.log")" in
    *"not found in registry"*)
      fail {EXIT_MODEL_NOT_FOUND} "{REASON_MODEL_NOT_FOUND}: $MODEL not found in registry" ;;
  esac
  last=""
  while IFS= read -r line; do [ -n "$line" ] && last="$line"; done < "$HOME/pull.log"
  fail 1 "{REASON_PULL_FAILED}: ollaya pull exited $rc: $last"
fi
if [ ! -f "$STORE_MANIFEST" ]; then
  fail 1 "{REASON_MANIFEST_MISSING}: $STORE_MANIFEST not written by ollaya pull"
fi
set -- $(sha256sum "$STORE_MANIFEST")
got="${{1:-}}"
if [ -z "$got" ]; then
  fail 1 "{REASON_MANIFEST_MISSING}: cannot read $STORE_MANIFEST"
fi
if [ "$got" != "$EXPECTED_DIGEST" ]; then
  if [ "$DIGEST_PINNED" = true ]; then
    fail {EXIT_DIGEST_MISMATCH} \\
      "{REASON_DIGEST_MISMATCH}: expected $EXPECTED_DIGEST got $got"
  fi
  fail {EXIT_TAG_MOVED} \\
    "{REASON_TAG_MOVED}: $MODEL now has digest $got, resolved $EXPECTED_DIGEST"
fi
echo "verified $MODEL sha256:$got"
"""


def _env(p: PrefetchParams) -> list[dict[str, Any]]:
    # MODEL, EXPECTED_DIGEST, STORE_MANIFEST and OLLAYA_REGISTRY are read by the simulated
    # kubelet of the local environment: keep these names.
    env: list[dict[str, Any]] = [
        {"name": "MODEL", "value": p.model},
        {"name": "EXPECTED_DIGEST", "value": p.digest},
        {"name": "DIGEST_PINNED", "value": "true" if p.digest_pinned else "false"},
        {"name": "STORE_MANIFEST", "value": f"{MODELS_PATH}/{p.store_manifest_path}"},
        {"name": "OLLAYA_MODELS", "value": MODELS_PATH},
        {"name": "HOME", "value": HOME_PATH},
    ]
    if p.registry_url:
        # The pull must target the mirror the digest was resolved from (seed 001).
        env.append({"name": "OLLAYA_REGISTRY", "value": p.registry_url})
    if p.hf_endpoint:
        # Weights mirror: the Job only; serving Pods never download (seed 001).
        env.append({"name": "OLLAYA_HF_ENDPOINT", "value": p.hf_endpoint})
    if p.download_token_secret_ref is not None:
        env.append(
            {
                "name": "OLLAYA_HF_TOKEN",
                "valueFrom": {
                    "secretKeyRef": {
                        "name": p.download_token_secret_ref.name,
                        "key": p.download_token_secret_ref.key,
                        "optional": False,
                    }
                },
            }
        )
    env.extend(prefetch_proxy_env(p.proxy))
    return env


def _pod_failure_policy() -> dict[str, Any]:
    return {
        "rules": [
            {
                # Permanent failures: retrying cannot help, fail the Job at once.
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": CONTAINER_NAME,
                    "operator": "In",
                    "values": list(PERMANENT_EXIT_CODES),
                },
            },
            {
                # Evictions and preemptions do not count against backoffLimit.
                "action": "Ignore",
                "onPodConditions": [
                    {"type": "DisruptionTarget", "status": str(ConditionStatus.TRUE)}
                ],
            },
        ]
    }


def _pod_spec(p: PrefetchParams) -> dict[str, Any]:
    """The prefetch Pod: one container running the pull script into the store, read-only
    root, no service account token, the revision's placement."""
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": p.image,
        "command": ["/bin/sh", "-c"],
        "args": [PREFETCH_SCRIPT],
        "env": _env(p),
        "resources": {k: dict(v) for k, v in PREFETCH_RESOURCES.items()},
        "volumeMounts": [store_mount(read_only=False), *scratch_mounts()],
        "securityContext": container_security_context(),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    return {
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [
            store_volume(p.store_claim_name, read_only=False),
            *scratch_volumes(p.scratch_size_limit),
        ],
        "securityContext": pod_security_context(),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        **scheduling_fields(p.scheduling, p.device),
    }


def render_prefetch_job(p: PrefetchParams) -> dict[str, Any]:
    """The Job that fills store ``p.store_claim_name``, the only writer of it.

    ``p.image`` is used as given; a CPU image is enough (the pull needs no GPU, and the
    ``-cuda`` images are amd64-only). For cuda the Pod tolerates the GPU taint without
    requesting a GPU, so, with the revision's placement, it lands where the serving Pods can
    (an RWO volume binds to the node of its first consumer). No ttlSecondsAfterFinished: the
    rollout deletes the Job once it has read the outcome.
    """
    dm, rev = p.dm_name, p.revision
    pod_labels = {
        L.LABEL_NAME: dm,
        L.LABEL_PREFETCH_REVISION: rev,
        L.LABEL_APP_NAME: L.APP_NAME,
        L.LABEL_MANAGED_BY: L.MANAGED_BY,
        L.LABEL_COMPONENT: L.COMPONENT_PREFETCH,
    }
    pod_spec = _pod_spec(p)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": L.prefetch_job_name(dm, rev),
            "namespace": p.namespace,
            "labels": {**L.common_labels(dm, rev), L.LABEL_COMPONENT: L.COMPONENT_PREFETCH},
            "ownerReferences": [L.owner_reference(p.owner)],
        },
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            "activeDeadlineSeconds": p.caching_timeout_seconds,
            "podFailurePolicy": _pod_failure_policy(),
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {L.ANNOTATION_EXPECTED_DIGEST: p.digest},
                },
                "spec": pod_spec,
            },
        },
    }
