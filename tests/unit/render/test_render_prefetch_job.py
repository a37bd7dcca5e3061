"""The prefetch Job: env contract, credential-free proxy, failure policy, RW store."""

from __future__ import annotations

from typing import Any

from decisionmodel.engine.params import PrefetchParams, ProxyEnv, Scheduling
from decisionmodel.engine.render import render_prefetch_job
from decisionmodel.engine.render.labels import LABEL_REVISION


def _pod(j: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = j["spec"]["template"]["spec"]
    return pod


def _env_list(j: dict[str, Any]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = _pod(j)["containers"][0]["env"]
    return env


def _env(j: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in _env_list(j)}


def test_default_job(default_prefetch: PrefetchParams) -> None:
    j = render_prefetch_job(default_prefetch)
    assert j["metadata"]["name"] == "support-router-pf-7c9f0e1d2b3a4c5d"
    spec = j["spec"]
    assert spec["backoffLimit"] == 4
    assert spec["activeDeadlineSeconds"] == 1800  # the 30m caching default
    assert "ttlSecondsAfterFinished" not in spec
    assert _pod(j)["restartPolicy"] == "Never"
    assert _env(j) == {
        "MODEL": "laya:en",
        "EXPECTED_DIGEST": default_prefetch.digest,
        "DIGEST_PINNED": "false",
        "STORE_MANIFEST": "/models/manifests/ollaya.dev/library/laya/en",
        "OLLAYA_MODELS": "/models",
        "HOME": "/tmp/home",
    }
    template_meta = spec["template"]["metadata"]
    assert template_meta["annotations"] == {
        "decisionmodel.io/expected-digest": default_prefetch.digest
    }


def test_failure_policy_fails_fast_on_permanent_exit_codes(
    default_prefetch: PrefetchParams,
) -> None:
    rules = render_prefetch_job(default_prefetch)["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {
        "action": "FailJob",
        "onExitCodes": {"containerName": "prefetch", "operator": "In", "values": [3, 4, 5]},
    }
    assert rules[1] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }


def test_store_mounted_read_write(default_prefetch: PrefetchParams) -> None:
    j = render_prefetch_job(default_prefetch)
    container = _pod(j)["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "models")
    assert mount == {"name": "models", "mountPath": "/models"}
    vol = next(v for v in _pod(j)["volumes"] if v["name"] == "models")
    assert vol["persistentVolumeClaim"] == {"claimName": "support-router-store-7c9f0e1d2b3a4c5d"}
    assert container["name"] == "prefetch"
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert _pod(j)["automountServiceAccountToken"] is False


def test_prefetch_pods_are_never_selected_as_serving_pods(
    default_prefetch: PrefetchParams,
) -> None:
    # The Service and PDB select decisionmodel.io/name + decisionmodel.io/revision; a
    # prefetch Pod carrying both would receive traffic while it runs.
    j = render_prefetch_job(default_prefetch)
    labels = j["spec"]["template"]["metadata"]["labels"]
    assert LABEL_REVISION not in labels
    assert labels["decisionmodel.io/prefetch-revision"] == "7c9f0e1d2b3a4c5d"
    assert labels["decisionmodel.io/name"] == "support-router"
    # The Job object itself is labelled like every other object of the revision.
    assert j["metadata"]["labels"][LABEL_REVISION] == "7c9f0e1d2b3a4c5d"


def test_mirror_token_and_credential_free_proxy(mirror_prefetch: PrefetchParams) -> None:
    env = _env(render_prefetch_job(mirror_prefetch))
    assert env["OLLAYA_REGISTRY"] == "http://mirror.corp:8080"
    assert env["OLLAYA_HF_ENDPOINT"] == "https://hf-mirror.internal"
    assert env["OLLAYA_HF_TOKEN"] == {
        "secretKeyRef": {"name": "my-hf-token", "key": "token", "optional": False}
    }
    assert env["DIGEST_PINNED"] == "true"
    assert env["STORE_MANIFEST"] == "/models/manifests/mirror.corp_8080/library/laya/en"
    assert env["HTTP_PROXY"] == env["http_proxy"] == "http://proxy.corp:3128"
    assert env["NO_PROXY"] == env["no_proxy"] == "10.96.0.0/12,.svc,.cluster.local"
    # https_proxy carries user:password: neither spelling reaches the Job.
    assert "HTTPS_PROXY" not in env
    assert "https_proxy" not in env


def test_no_credential_anywhere_in_the_job(mirror_prefetch: PrefetchParams) -> None:
    assert "s3cret" not in repr(render_prefetch_job(mirror_prefetch))


def test_all_credentialed_proxy_leaves_only_no_proxy(default_prefetch: PrefetchParams) -> None:
    p = default_prefetch.model_copy(
        update={
            "proxy": ProxyEnv(
                http_proxy="http://u:p@proxy:3128",
                https_proxy="http://proxy:notaport",
                no_proxy=".svc",
            )
        }
    )
    names = [e["name"] for e in _env_list(render_prefetch_job(p))]
    assert [n for n in names if "proxy" in n.lower()] == ["NO_PROXY", "no_proxy"]


def test_cuda_job_tolerates_gpu_nodes_without_requesting_a_gpu(
    default_prefetch: PrefetchParams,
) -> None:
    p = default_prefetch.model_copy(
        update={"device": "cuda", "scheduling": Scheduling(node_selector={"gpu": "t4"})}
    )
    j = render_prefetch_job(p)
    assert _pod(j)["nodeSelector"] == {"gpu": "t4"}
    assert _pod(j)["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert "nvidia.com/gpu" not in repr(_pod(j)["containers"][0]["resources"])


def test_prefetch_resources_are_burstable(default_prefetch: PrefetchParams) -> None:
    resources = _pod(render_prefetch_job(default_prefetch))["containers"][0]["resources"]
    assert resources == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }
    resources["limits"]["memory"] = "2Gi"  # the constant is not shared with the output
    again = _pod(render_prefetch_job(default_prefetch))["containers"][0]["resources"]
    assert again["limits"]["memory"] == "1Gi"
