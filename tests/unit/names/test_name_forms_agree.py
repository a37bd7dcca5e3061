"""Every form of a model name means one registry and scheme, for dmrollout and the runtime.

RUNTIME_API.md "Registry": ``[host/][namespace/]model:tag``; the host is the first segment when
it contains ``.`` or ``:`` or is ``localhost``, or when it carries ``http://``/``https://``; a
host without a scheme is https; ``OLLAYA_REGISTRY`` (dmrollout: ``--ollaya-registry``) is the
registry of host-less names only. The table holds dmrollout's reading (resolve, the prefetch
Job's env and store path) and the runtime simulator's (pull and load, given the
``OLLAYA_REGISTRY`` dmrollout puts on the Pods) to the same answer (issue 11, point 12).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from decisionmodel.engine.names import parse_model_name
from decisionmodel.errors import InvalidModelName
from decisionmodel.rollout.render_params import model_has_host, registry_url
from decisionmodel.rollout.settings import RolloutSettings
from simulators import model_names as runtime_names
from simulators.volumes import store_manifest_path

OLLAYA = "https://ollaya.dev"
LOCAL = "http://127.0.0.1:5000"

LOCAL_HOST = "127.0.0.1:5000"


def want(
    scheme: str, host: str, ns: str = "library", model: str = "laya", tag: str = "en"
) -> tuple[str, ...]:
    return (scheme, host, ns, model, tag)


# (spec.model, --ollaya-registry, (scheme, host, namespace, model, tag)).
FORMS = [
    # Host-less: the configured registry, its scheme included.
    ("laya:en", OLLAYA, want("https", "ollaya.dev")),
    ("laya:en", LOCAL, want("http", LOCAL_HOST)),
    ("acme/triage:v3", LOCAL, want("http", LOCAL_HOST, "acme", "triage", "v3")),
    # A host in the name: that host, whatever the configured registry.
    ("mirror.corp/acme/laya:en", LOCAL, want("https", "mirror.corp", "acme")),
    ("localhost:5000/laya:en", LOCAL, want("https", "localhost:5000")),
    # ...https without a scheme, even when it is the configured (http) registry's host.
    ("127.0.0.1:5000/library/laya:en", LOCAL, want("https", LOCAL_HOST)),
    ("127.0.0.1:5000/library/laya:en", OLLAYA, want("https", LOCAL_HOST)),
    # A scheme on the host is honoured, and makes the first segment a host.
    ("http://127.0.0.1:5000/library/laya:en", OLLAYA, want("http", LOCAL_HOST)),
    ("http://127.0.0.1:5000/laya:en", LOCAL, want("http", LOCAL_HOST)),
    ("HTTP://127.0.0.1:5000/Library/Laya:EN", LOCAL, want("http", LOCAL_HOST)),
    ("https://mirror.corp:8443/acme/laya:en", LOCAL, want("https", "mirror.corp:8443", "acme")),
    ("https://registry/acme/laya:en", OLLAYA, want("https", "registry", "acme")),
]

REFUSED = [
    "http://laya:en",  # a scheme needs a host and a model
    "acme/team/laya:en",  # three segments, the first no host
    "a.b/c/d/e:f",  # more than three segments
    "http://a.b/c/d/e:f",
    "ftp://mirror.corp/laya:en",
    "acme//laya:en",
    "http:///laya:en",
]


# The forms that name their registry: OLLAYA_REGISTRY must not matter to them.
NAMED = [form for form in FORMS if model_has_host(form[0])]


def _ids(forms: list[tuple[str, str, tuple[str, ...]]]) -> list[str]:
    return [f"{name} [{registry}]" for name, registry, _ in forms]


def _settings(registry: str) -> RolloutSettings:
    return RolloutSettings(ollaya_registry=registry)


@pytest.mark.parametrize(("name", "registry", "expected"), FORMS, ids=_ids(FORMS))
def test_dmrollout_reads_each_form_as_the_contract_says(
    name: str, registry: str, expected: tuple[str, ...]
) -> None:
    ref = parse_model_name(name, default_registry=registry)
    assert (ref.scheme, ref.host, ref.namespace, ref.model, ref.tag) == expected


@pytest.mark.parametrize(("name", "registry", "expected"), FORMS, ids=_ids(FORMS))
def test_the_runtime_reads_each_form_as_dmrollout_does(
    name: str, registry: str, expected: tuple[str, ...]
) -> None:
    ours = parse_model_name(name, default_registry=registry)
    # What the prefetch Job and the serving Pods are given: OLLAYA_REGISTRY for host-less
    # names only. The runtime must read the name the same way with it.
    pod_env = registry_url(name, _settings(registry))
    theirs = runtime_names.parse_model_name(name, pod_env)
    assert (theirs.scheme, theirs.host, theirs.namespace, theirs.model, theirs.tag) == expected
    # Resolve and pull fetch the same manifest URL: the digest is of the same bytes.
    assert theirs.manifest_url == ours.manifest_url
    # The prefetch Job checks the manifest where the runtime writes and loads it.
    runtime_path = store_manifest_path(
        Path("/"), theirs.host, theirs.namespace, theirs.model, theirs.tag
    )
    assert Path("/") / ours.store_manifest_path == runtime_path


@pytest.mark.parametrize(("name", "registry", "expected"), NAMED, ids=_ids(NAMED))
def test_a_named_host_does_not_depend_on_ollaya_registry(
    name: str, registry: str, expected: tuple[str, ...]
) -> None:
    # A runtime whose OLLAYA_REGISTRY is set anyway (a Pod of a mirror-configured cluster)
    # reads a name with a host exactly as without it.
    assert registry_url(name, _settings(registry)) is None
    for env in (None, OLLAYA, LOCAL):
        theirs = runtime_names.parse_model_name(name, env)
        assert (theirs.scheme, theirs.host) == expected[:2], env


@pytest.mark.parametrize("name", REFUSED)
def test_both_refuse_the_same_names(name: str) -> None:
    with pytest.raises(InvalidModelName):
        parse_model_name(name, default_registry=LOCAL)
    with pytest.raises(runtime_names.InvalidModelName):
        runtime_names.parse_model_name(name, LOCAL)
