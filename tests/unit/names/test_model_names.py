"""Model-name parsing and the registry guard: table tests and properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from decisionmodel.engine.names import (
    EXPLICIT_TAG_MESSAGE,
    PART_PATTERN,
    ModelRef,
    check_registry_allowed,
    parse_model_name,
    parse_registry_base,
)
from decisionmodel.errors import InvalidModelName, RegistryNotAllowed

HEX = "0123456789abcdef" * 4


def ref(scheme: str, host: str, namespace: str, model: str, tag: str) -> ModelRef:
    return ModelRef.model_validate(
        {"scheme": scheme, "host": host, "namespace": namespace, "model": model, "tag": tag}
    )


@pytest.mark.parametrize(
    ("name", "default_registry", "expected"),
    [
        ("laya:en", "https://ollaya.dev", ref("https", "ollaya.dev", "library", "laya", "en")),
        ("Laya:EN", "https://ollaya.dev", ref("https", "ollaya.dev", "library", "laya", "en")),
        ("  laya:en\n", "https://ollaya.dev", ref("https", "ollaya.dev", "library", "laya", "en")),
        (
            "acme/triage:v3",
            "https://ollaya.dev",
            ref("https", "ollaya.dev", "acme", "triage", "v3"),
        ),
        (
            "registry.example.com/acme/triage:v3",
            "https://ollaya.dev",
            ref("https", "registry.example.com", "acme", "triage", "v3"),
        ),
        (
            "localhost:8080/laya:en",
            "https://ollaya.dev",
            ref("https", "localhost:8080", "library", "laya", "en"),
        ),
        (
            "localhost/laya:en",
            "https://ollaya.dev",
            ref("https", "localhost", "library", "laya", "en"),
        ),
        # Two segments whose first has a dot: a host, not a namespace (RUNTIME_API.md).
        ("my.ns/laya:en", "https://ollaya.dev", ref("https", "my.ns", "library", "laya", "en")),
        # One segment is always the model, dots or not.
        (
            "laya.v2:en-1.0",
            "https://ollaya.dev",
            ref("https", "ollaya.dev", "library", "laya.v2", "en-1.0"),
        ),
        (
            "http://127.0.0.1:5000/library/laya:en",
            "https://ollaya.dev",
            ref("http", "127.0.0.1:5000", "library", "laya", "en"),
        ),
        (
            "HTTPS://Mirror.Corp/laya:en",
            "https://ollaya.dev",
            ref("https", "mirror.corp", "library", "laya", "en"),
        ),
        # An explicit scheme makes the first segment a host even without a dot.
        (
            "https://registry/acme/laya:en",
            "https://ollaya.dev",
            ref("https", "registry", "acme", "laya", "en"),
        ),
        (
            "laya:en",
            "http://127.0.0.1:5000",
            ref("http", "127.0.0.1:5000", "library", "laya", "en"),
        ),
        ("laya:en", "https://mirror.corp/", ref("https", "mirror.corp", "library", "laya", "en")),
        ("laya:en", "mirror.corp", ref("https", "mirror.corp", "library", "laya", "en")),
        # An explicit host overrides the configured default registry (seed 001).
        (
            "mirror.corp/library/laya:en",
            "http://127.0.0.1:5000",
            ref("https", "mirror.corp", "library", "laya", "en"),
        ),
        ("_x/_y:_z", "https://ollaya.dev", ref("https", "ollaya.dev", "_x", "_y", "_z")),
    ],
)
def test_parse_valid(name: str, default_registry: str, expected: ModelRef) -> None:
    assert parse_model_name(name, default_registry=default_registry) == expected


def test_derived_urls_and_paths() -> None:
    laya = parse_model_name("laya:en")
    assert laya.canonical == "ollaya.dev/library/laya:en"
    assert laya.registry_base == "https://ollaya.dev"
    assert laya.manifest_url == "https://ollaya.dev/v2/library/laya/manifests/en"
    assert laya.store_manifest_path == "manifests/ollaya.dev/library/laya/en"
    assert (
        laya.blob_url(f"sha256:{HEX}") == f"https://ollaya.dev/v2/library/laya/blobs/sha256:{HEX}"
    )
    assert laya.blob_url(HEX) == f"https://ollaya.dev/v2/library/laya/blobs/sha256:{HEX}"
    assert str(laya) == "ollaya.dev/library/laya:en"

    # Seed 001: mirror.corp:8080 stores under manifests/mirror.corp_8080/library/laya/en.
    mirror = parse_model_name("mirror.corp:8080/library/laya:en")
    assert mirror.store_manifest_path == "manifests/mirror.corp_8080/library/laya/en"
    assert mirror.canonical == "mirror.corp:8080/library/laya:en"

    local = parse_model_name("acme/triage:v3", default_registry="http://127.0.0.1:5000")
    assert local.canonical == "http://127.0.0.1:5000/acme/triage:v3"
    assert local.manifest_url == "http://127.0.0.1:5000/v2/acme/triage/manifests/v3"
    assert local.store_manifest_path == "manifests/127.0.0.1_5000/acme/triage/v3"

    bare_host = ref("https", "registry", "library", "laya", "en")
    assert bare_host.canonical == "https://registry/library/laya:en"


@pytest.mark.parametrize(
    "digest", ["", "sha256:" + HEX[:63], HEX.upper(), "sha512:" + HEX, HEX + "\n"]
)
def test_blob_url_refuses_bad_digests(digest: str) -> None:
    with pytest.raises(ValueError, match="sha256"):
        parse_model_name("laya:en").blob_url(digest)


def test_bare_name_needs_a_tag() -> None:
    with pytest.raises(InvalidModelName) as caught:
        parse_model_name("laya")
    assert EXPLICIT_TAG_MESSAGE in str(caught.value)
    assert caught.value.reason == "InvalidModelName"
    assert caught.value.permanent is True
    # The runtime's own rule, for completeness: a bare name is :latest.
    assert parse_model_name("acme/laya", require_tag=False) == ref(
        "https", "ollaya.dev", "acme", "laya", "latest"
    )


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("a.b/c/d/e:f", "more than three"),
        ("acme/team/laya:en", "must be a registry host"),
        ("laya:", "tag ''"),
        (":en", "model ''"),
        ("-laya:en", "model '-laya'"),
        (".laya:en", "model '.laya'"),
        ("laya:.en", "tag '.en'"),
        ("laya:en:x", "tag 'en:x'"),
        ("la ya:en", "model 'la ya'"),
        ("laya:é", "tag 'é'"),
        ("laya:en/", "empty segment"),
        ("/laya:en", "empty segment"),
        ("acme//laya:en", "empty segment"),
        ("http://laya:en", "scheme needs a registry host"),
        ("ftp://host/laya:en", "more than three"),
        ("exa_mple.com/laya:en", "registry host"),
        ("a..b/laya:en", "registry host"),
        (".example.com/laya:en", "registry host"),
        ("localhost:99999/laya:en", "invalid port"),
        ("localhost:0/laya:en", "invalid port"),
        ("localhost:/laya:en", "invalid port"),
        ("acme:x/laya:en", "invalid port"),
        (":5000/laya:en", "registry host"),
        ("acme/" + "m" * 81 + ":en", "model"),
        ("laya:" + "t" * 81, "tag"),
        ("n" * 81 + "/laya:en", "namespace"),
    ],
)
def test_parse_invalid(name: str, fragment: str) -> None:
    with pytest.raises(InvalidModelName) as caught:
        parse_model_name(name)
    message = str(caught.value)
    assert fragment in message
    assert "spec.model" in message


def test_longest_parts_are_valid() -> None:
    name = "n" * 80 + "/" + "m" * 80 + ":" + "t" * 80
    parsed = parse_model_name(name)
    assert (len(parsed.namespace), len(parsed.model), len(parsed.tag)) == (80, 80, 80)


@pytest.mark.parametrize(
    "bad", ["ftp://mirror", "https://mirror.corp/path", "http://", "user@host", "h:x"]
)
def test_registry_base_refuses_bad_urls(bad: str) -> None:
    with pytest.raises(ValueError, match="registry URL"):
        parse_registry_base(bad)


def test_model_ref_validates_when_built_directly() -> None:
    with pytest.raises(ValidationError):
        ref("https", "bad_host", "library", "laya", "en")
    with pytest.raises(ValidationError):
        ref("https", "ollaya.dev", "library", "Laya", "en")
    with pytest.raises(ValidationError):
        ref("ftp", "ollaya.dev", "library", "laya", "en")


# --- the allowed-registries guard -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "allowed", "insecure"),
    [
        ("laya:en", ["ollaya.dev"], False),
        ("ollaya.dev:443/library/laya:en", ["ollaya.dev"], False),
        ("https://ollaya.dev/library/laya:en", ["ollaya.dev:443"], False),
        ("mirror.corp/laya:en", [" Mirror.Corp ", ""], False),
        ("mirror.corp/laya:en", ["https://mirror.corp/"], False),
        ("http://127.0.0.1:5000/laya:en", ["127.0.0.1:5000"], True),
        ("http://127.0.0.1/laya:en", ["127.0.0.1:80"], True),
        ("mirror.corp:8080/laya:en", ["ollaya.dev", "mirror.corp:8080"], False),
    ],
)
def test_registry_allowed(name: str, allowed: list[str], insecure: bool) -> None:
    check_registry_allowed(parse_model_name(name), allowed, insecure)


@pytest.mark.parametrize(
    ("name", "allowed", "insecure", "fragment"),
    [
        (
            "evil.example/laya:en",
            ["ollaya.dev"],
            False,
            "'evil.example' is not in --allowed-registries",
        ),
        ("ollaya.dev:8443/library/laya:en", ["ollaya.dev"], False, "not in --allowed-registries"),
        ("mirror.corp/laya:en", ["mirror.corp:8080"], False, "not in --allowed-registries"),
        ("laya:en", [], False, "(empty)"),
        ("ollaya.dev.evil.example/laya:en", ["ollaya.dev"], False, "not in --allowed-registries"),
        ("http://127.0.0.1:5000/laya:en", ["127.0.0.1:5000"], False, "--allow-insecure-registries"),
        ("http://ollaya.dev/library/laya:en", ["ollaya.dev"], False, "plain http://"),
        # Both wrong: the allow-list is reported first.
        ("http://evil.example/laya:en", ["ollaya.dev"], True, "not in --allowed-registries"),
    ],
)
def test_registry_not_allowed(name: str, allowed: list[str], insecure: bool, fragment: str) -> None:
    with pytest.raises(RegistryNotAllowed) as caught:
        check_registry_allowed(parse_model_name(name), allowed, insecure)
    assert fragment in str(caught.value)
    assert caught.value.reason == "RegistryNotAllowed"
    assert caught.value.permanent is True


# --- properties -----------------------------------------------------------------------------

parts = st.from_regex(PART_PATTERN, fullmatch=True)
labels = st.from_regex(r"[a-z0-9-]{1,12}", fullmatch=True)
hostnames = st.lists(labels, min_size=1, max_size=4).map(".".join)
ports = st.none() | st.integers(min_value=1, max_value=65535)
hosts = st.builds(lambda h, p: h if p is None else f"{h}:{p}", hostnames, ports)
refs = st.builds(
    ModelRef,
    scheme=st.sampled_from(["http", "https"]),
    host=hosts,
    namespace=parts,
    model=parts,
    tag=parts,
)
registries = st.builds(lambda s, h: f"{s}{h}", st.sampled_from(["", "http://", "https://"]), hosts)


def _looks_like_host(segment: str) -> bool:
    return "." in segment or ":" in segment or segment == "localhost"


@given(refs, registries)
def test_canonical_round_trips(original: ModelRef, default_registry: str) -> None:
    assert parse_model_name(original.canonical, default_registry=default_registry) == original


@given(
    scheme=st.sampled_from([None, "http", "https"]),
    host=st.none() | hosts,
    namespace=st.none() | parts,
    model=parts,
    tag=parts,
    upper=st.booleans(),
)
def test_generated_names_parse(
    scheme: str | None, host: str | None, namespace: str | None, model: str, tag: str, upper: bool
) -> None:
    segments: list[str] = []
    if host is not None:
        # Without a scheme only a host-looking first segment is read as a host.
        if scheme is None and not _looks_like_host(host):
            scheme = "https"
        segments.append(f"{scheme}://{host}" if scheme else host)
    elif namespace is not None and _looks_like_host(namespace):
        # Such a namespace would read as a host; qualify it with the default registry.
        host, scheme = "ollaya.dev", "https"
        segments.append(host)
    if namespace is not None:
        segments.append(namespace)
    segments.append(f"{model}:{tag}")
    name = "/".join(segments)
    parsed = parse_model_name(
        name.upper() if upper else name, default_registry="http://reg.local:5000"
    )
    # A scheme only counts with a host; a host-less name takes the default registry's.
    expected_scheme = (scheme or "https") if host is not None else "http"
    assert parsed == ModelRef(
        scheme=expected_scheme,
        host=host if host is not None else "reg.local:5000",
        namespace=namespace if namespace is not None else "library",
        model=model,
        tag=tag,
    )


bad_parts = st.text(max_size=90).filter(
    lambda p: "/" not in p and ":" not in p and not _matches_part(p.strip().lower())
)


def _matches_part(text: str) -> bool:
    return re.fullmatch(PART_PATTERN, text) is not None


@given(refs, bad_parts, st.sampled_from(["namespace", "model", "tag"]))
def test_invalid_parts_are_rejected(original: ModelRef, bad: str, which: str) -> None:
    spoiled = original.model_copy(update={which: bad})
    name = f"{original.scheme}://{original.host}/{spoiled.namespace}/{spoiled.model}:{spoiled.tag}"
    with pytest.raises(InvalidModelName):
        parse_model_name(name)


@given(st.text(max_size=200), st.booleans())
def test_parser_only_raises_invalid_model_name(name: str, require_tag: bool) -> None:
    try:
        parsed = parse_model_name(name, require_tag=require_tag)
    except InvalidModelName:
        return
    # Whatever parses yields paths without traversal segments.
    for segment in parsed.store_manifest_path.split("/"):
        assert segment not in ("", ".", "..")
    assert parse_model_name(parsed.canonical) == parsed
