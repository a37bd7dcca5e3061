"""docs/migration.md against the chart it installs (issue 34): the values block of the guide
watches every namespace as the reference did, the guide never applies an object the chart then
refuses to install over, a reference chart's proxy Secret still gives a proxy, and the
reference's OLLAYA_REGISTRY is not shadowed by a variable the chart sets on its own.
tests/e2e/controller/test_migration.py runs a controller with this environment."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.shipped import ROOT, kustomize, render_chart
from test_chart_values import RELEASE, container, env_of, settings_from

from decisionmodel.rollout.settings import RolloutSettings

GUIDE = ROOT / "docs" / "migration.md"


def guide_steps() -> str:
    text = GUIDE.read_text()
    return text[text.index("## Steps") : text.index("## What happens to what already runs")]


def guide_values() -> dict[str, Any]:
    """The values block the guide installs the chart with (after its migration-values mark)."""
    steps = guide_steps()
    block = re.search(r"migration-values.*?```yaml\n(.*?)```", steps, re.S)
    assert block is not None, "docs/migration.md lost its values block"
    values: dict[str, Any] = yaml.safe_load(block[1])
    return values


def render_guide(tmp: Path, *extra: str) -> list[dict[str, Any]]:
    path = tmp / "values.yaml"
    path.write_text(yaml.safe_dump(guide_values()))
    return render_chart("-f", str(path), *extra, tmp=tmp, release=RELEASE)


def test_the_guides_values_watch_every_namespace_as_the_reference_did(tmp_path: Path) -> None:
    objs = render_guide(tmp_path)
    env = env_of(container(objs, "Deployment", "-controller"))
    assert env["DMROLLOUT_CONTROLLER_WATCH_NAMESPACES"] == "[]"
    bound = {
        (o["roleRef"]["name"], s["name"])
        for o in objs
        if o["kind"] == "ClusterRoleBinding"
        for s in o["subjects"]
    }
    for component in ("controller", "worker"):
        account = f"{RELEASE}-{component}"
        assert any(sa == account for _, sa in bound), f"{account} has no cluster-wide grant"


def guide_applies() -> list[str]:
    """The deploy/ paths the guide's commands apply (kubectl apply -f / -k)."""
    commands = re.findall(r"`(kubectl apply[^`]*)`", guide_steps())
    return [p for c in commands for p in re.findall(r"(deploy/[\w/.-]+)", c)]


def applied_objects(path: str) -> list[dict[str, Any]]:
    """What `kubectl apply -f <path>` (a file or a directory of them) or `-k` creates."""
    target = ROOT / path
    if (target / "kustomization.yaml").exists():
        return kustomize(path)
    files = [target] if target.is_file() else sorted(target.glob("*.yaml"))
    return [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]


def test_nothing_the_guide_applies_is_something_the_chart_creates(tmp_path: Path) -> None:
    """Helm refuses to install over an object it did not create: the guide must not apply one
    (the admission policies are the chart's, under the same names as deploy/admission's)."""
    applied = guide_applies()
    # The chart applies the CRD (templates/crd.yaml); the guide hands the existing one over.
    assert "deploy/crd" not in applied
    steps = guide_steps()
    assert "meta.helm.sh/release-name=dmrollout" in steps
    assert "app.kubernetes.io/managed-by=Helm" in steps
    chart = {(o["kind"], o["metadata"]["name"]) for o in render_guide(tmp_path)}
    for path in applied:
        clash = {(o["kind"], o["metadata"]["name"]) for o in applied_objects(path)} & chart
        assert not clash, f"the guide applies {path}, and the chart creates {sorted(clash)} too"
    # The policies come with the chart (the guide says so and leaves the default on).
    assert any(kind == "ValidatingAdmissionPolicy" for kind, _ in chart)
    assert guide_values().get("admissionPolicy", {}).get("enabled", True)


def resolved_env(env: dict[str, str], secret: dict[str, str]) -> dict[str, str]:
    """The environment the kubelet gives the container: a Secret key it lacks leaves an optional
    variable unset."""
    out: dict[str, str] = {}
    for name, value in env.items():
        ref = re.fullmatch(r"<secret [^/]+/(.+)>", value)
        if ref is None:
            out[name] = value
        elif ref[1] in secret:
            out[name] = secret[ref[1]]
    return out


@pytest.mark.parametrize(
    "secret",
    [
        {"httpProxy": "http://proxy.corp:3128", "httpsProxy": "http://proxy.corp:3128",
         "noProxy": ".svc,.cluster.local"},
        {"HTTP_PROXY": "http://proxy.corp:3128", "HTTPS_PROXY": "http://proxy.corp:3128",
         "NO_PROXY": ".svc,.cluster.local"},
    ],
    ids=["reference-keys", "dmrollout-keys"],
)  # fmt: skip
def test_a_proxy_secret_of_either_layout_gives_the_proxy(
    secret: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs = render_guide(tmp_path, "--set", "proxy.existingSecret=corporate-proxy")
    for component in ("-controller", "-worker"):
        env = resolved_env(env_of(container(objs, "Deployment", component)), secret)
        rollout = settings_from(env, monkeypatch)["rollout"]
        assert isinstance(rollout, RolloutSettings)
        # What prefetch Jobs get (the settings) and what the registry client uses (httpx reads
        # the proxy variables through urllib's rules).
        assert rollout.https_proxy == "http://proxy.corp:3128"
        assert rollout.no_proxy == ".svc,.cluster.local"
        proxies = urllib.request.getproxies_environment()
        assert proxies["https"] == proxies["http"] == "http://proxy.corp:3128"
        assert proxies["no"] == ".svc,.cluster.local"


def test_the_references_ollaya_registry_is_not_shadowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs = render_guide(tmp_path)
    for component in ("-controller", "-worker"):
        env = env_of(container(objs, "Deployment", component))
        assert "DMROLLOUT_OLLAYA_REGISTRY" not in env
        with_reference = {**env, "OLLAYA_REGISTRY": "https://mirror.corp"}
        rollout = settings_from(with_reference, monkeypatch)["rollout"]
        assert isinstance(rollout, RolloutSettings)
        assert rollout.ollaya_registry == "https://mirror.corp"
        monkeypatch.delenv("OLLAYA_REGISTRY")
        default = settings_from(env, monkeypatch)["rollout"]
        assert isinstance(default, RolloutSettings)
        assert default.ollaya_registry == "https://ollaya.dev"
    # Set in the values, it is the chart's (DMROLLOUT_* first, as documented).
    objs = render_guide(tmp_path, "--set", "ollayaRegistry=https://ours.corp")
    env = env_of(container(objs, "Deployment", "-worker"))
    assert env["DMROLLOUT_OLLAYA_REGISTRY"] == "https://ours.corp"
