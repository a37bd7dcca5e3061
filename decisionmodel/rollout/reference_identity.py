"""The reference operator's revision hash: a revision it recorded is recognised (docs/migration.md).

dmrollout names a revision by ``identity.revision_hash``: canonical JSON with every key sorted and
quantities as written. The Go reference (seed 000; ``internal/controller/revision.go``) marshals
Go structs with ``encoding/json``: struct fields in declaration order (``spec.scheduling`` and its
tolerations and affinity too), map keys sorted, quantities in Kubernetes' canonical form (``1`` and
``"1000m"`` both become ``"1"``), ``<``, ``>`` and ``&`` escaped. Both agree on a spec without
scheduling whose quantities are written canonically, and differ otherwise; changing dmrollout's own
hash to the reference's would roll every dmrollout DecisionModel with scheduling on upgrade, so
instead a recorded revision is recognised under either (``is_reference_revision``), as the
reference recognises its own older hashes: the 10-hex width of older releases (a prefix of the
same sha256) and, for a revision recorded before placement was, the hash without placement.

Known answers computed by the reference's own code: tests/unit/api/testdata/
reference_revision_hashes.json.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

from decisionmodel.rollout.contracts import RevisionIdentity

WIDTH: Final = 16
LEGACY_WIDTH: Final = 10  # reference releases before 64-bit hashes; a prefix of the same sha256
PLACEMENT_WIDTH: Final = 10

# A Go struct: (json name, kind, omitempty). Kinds: "str", "int", a struct name, "[]" + kind,
# "map" (string to string, keys sorted), "*" + struct (a pointer: omitted only when absent).
_Field = tuple[str, str, bool]
_STRUCTS: Final[dict[str, tuple[_Field, ...]]] = {
    # decisionmodel.io/v1alpha1 SchedulingSpec (api/v1alpha1/decisionmodel_types.go)
    "SchedulingSpec": (
        ("nodeSelector", "map", True),
        ("tolerations", "[]Toleration", True),
        ("affinity", "*Affinity", True),
        ("runtimeClassName", "*str", True),
    ),
    # k8s.io/api core/v1 and apimachinery meta/v1, in their declaration order
    "Toleration": (
        ("key", "str", True),
        ("operator", "str", True),
        ("value", "str", True),
        ("effect", "str", True),
        ("tolerationSeconds", "*int", True),
    ),
    "Affinity": (
        ("nodeAffinity", "*NodeAffinity", True),
        ("podAffinity", "*PodAffinity", True),
        ("podAntiAffinity", "*PodAffinity", True),
    ),
    "NodeAffinity": (
        ("requiredDuringSchedulingIgnoredDuringExecution", "*NodeSelector", True),
        ("preferredDuringSchedulingIgnoredDuringExecution", "[]PreferredSchedulingTerm", True),
    ),
    "NodeSelector": (("nodeSelectorTerms", "[]NodeSelectorTerm", False),),
    "NodeSelectorTerm": (
        ("matchExpressions", "[]Requirement", True),
        ("matchFields", "[]Requirement", True),
    ),
    "Requirement": (("key", "str", False), ("operator", "str", False), ("values", "[]str", True)),
    "PreferredSchedulingTerm": (
        ("weight", "int", False),
        ("preference", "NodeSelectorTerm", False),
    ),
    "PodAffinity": (
        ("requiredDuringSchedulingIgnoredDuringExecution", "[]PodAffinityTerm", True),
        ("preferredDuringSchedulingIgnoredDuringExecution", "[]WeightedPodAffinityTerm", True),
    ),
    "PodAffinityTerm": (
        ("labelSelector", "*LabelSelector", True),
        ("namespaces", "[]str", True),
        ("topologyKey", "str", False),
        ("namespaceSelector", "*LabelSelector", True),
        ("matchLabelKeys", "[]str", True),
        ("mismatchLabelKeys", "[]str", True),
    ),
    "WeightedPodAffinityTerm": (
        ("weight", "int", False),
        ("podAffinityTerm", "PodAffinityTerm", False),
    ),
    "LabelSelector": (("matchLabels", "map", True), ("matchExpressions", "[]Requirement", True)),
    "ResourceRequirements": (
        ("limits", "quantities", True),
        ("requests", "quantities", True),
        ("claims", "[]ResourceClaim", True),
    ),
    "ResourceClaim": (("name", "str", False), ("request", "str", True)),
}
_ZERO: Final[dict[str, Any]] = {"str": "", "int": 0}


def _go(kind: str, value: Any) -> Any:
    """``value`` (as the API server returns it) as Go's ``json.Marshal`` of the typed field."""
    if kind.startswith("*"):
        return _go(kind[1:], value)
    if kind.startswith("[]"):
        return None if value is None else [_go(kind[2:], v) for v in value]
    if kind == "map":
        return {k: value[k] for k in sorted(value or {})}
    if kind == "quantities":
        return {k: canonical_quantity(value[k]) for k in sorted(value or {})}
    if kind in _STRUCTS:
        return _struct(kind, value or {})
    return value if value is not None else _ZERO[kind]


def _struct(name: str, value: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, kind, omitempty in _STRUCTS[name]:
        present = value.get(key)
        if omitempty and (present is None or (not kind.startswith("*") and not present)):
            continue  # Go omits a nil pointer and an empty string, number, slice or map
        out[key] = _go(kind, present)
    return out


def _go_json(value: Any) -> str:
    # encoding/json escapes <, > and & (HTML safety) and U+2028/U+2029; otherwise UTF-8 as is.
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def reference_placement(scheduling: Mapping[str, Any] | None) -> str | None:
    """The reference's placement hash of ``spec.scheduling`` (wire form); None when it sets
    nothing the reference hashes (its test: no nodeSelector, no tolerations, affinity and
    runtimeClassName absent; an empty ``affinity: {}`` is set)."""
    s = scheduling or {}
    unset = s.get("affinity") is None and s.get("runtimeClassName") is None
    if unset and not s.get("nodeSelector") and not s.get("tolerations"):
        return None
    return _sha256_hex(_go_json(_struct("SchedulingSpec", s)))[:PLACEMENT_WIDTH]


def reference_canonical(revision: RevisionIdentity, *, placement: bool = True) -> str:
    """The bytes the reference hashes (``revisionInputs``): engine, model, digest, device, image,
    resources, then placement when set; ``revision`` resolved (digest and image)."""
    doc: dict[str, Any] = {
        "engine": revision.engine.value,
        "model": revision.model,
        "digest": revision.digest or "",
        "device": revision.device.value,
        "image": revision.image or "",
        "resources": _struct("ResourceRequirements", revision.resources),
    }
    where = reference_placement(revision.scheduling) if placement else None
    if where:
        doc["placement"] = where
    return _go_json(doc)


def reference_revision_hash(revision: RevisionIdentity, *, placement: bool = True) -> str:
    """The reference's RevisionHash (16 hex); ``placement=False``: its legacyRevisionHash input,
    from before scheduling was part of a revision."""
    return _sha256_hex(reference_canonical(revision, placement=placement))[:WIDTH]


def expressible(revision: RevisionIdentity) -> bool:
    """False when the identity has what the reference cannot record (dmrollout's
    spec.scheduling.priorityClassName): no reference revision can be it."""
    return not revision.scheduling.get("priorityClassName")


def is_reference_revision(
    recorded_hash: str, revision: RevisionIdentity, recorded_placement: str | None
) -> bool:
    """True when the reference would have recorded ``revision`` (resolved) under
    ``recorded_hash``: at 16 hex, at the 10 hex of its older releases, or, for a revision
    recorded before placement was (no placement in status), by the hash without placement."""
    if not expressible(revision) or len(recorded_hash) not in (WIDTH, LEGACY_WIDTH):
        return False
    full = reference_revision_hash(revision)
    if full.startswith(recorded_hash):
        return True
    if recorded_placement or len(recorded_hash) != LEGACY_WIDTH:
        return False
    return reference_revision_hash(revision, placement=False).startswith(recorded_hash)


# Kubernetes quantities (k8s.io/apimachinery resource.Quantity): parse, then print canonically.
_QUANTITY_RE: Final = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|)$"
)
_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIX: Final = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX: Final = {0: "", **{v // 10: k for k, v in _BINARY.items()}}


def canonical_quantity(value: Any) -> Any:
    """``value`` as Go's Quantity marshals it (``"1000m"`` → ``"1"``, ``1024Mi`` → ``"1Gi"``,
    ``0.5`` → ``"500m"``). A value that is not a quantity is returned as given (Go would refuse
    the object; nothing then hashes it)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return value
    text = value.strip() if isinstance(value, str) else _number_text(value)
    match = _QUANTITY_RE.match(text)
    if match is None:
        return value
    amount, fmt = _parse_quantity(match["num"], match["suffix"])
    return _format_quantity(amount, fmt)


def _number_text(value: int | float) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(value) if math.isfinite(value) else ""


def _parse_quantity(number: str, suffix: str) -> tuple[Fraction, str]:
    amount = Fraction(number if not number.endswith(".") else number[:-1] or "0")
    if suffix in _BINARY:
        amount, fmt = amount * 2 ** _BINARY[suffix], "BinarySI"
    elif suffix in _DECIMAL:
        amount, fmt = amount * Fraction(10) ** _DECIMAL[suffix], "DecimalSI"
    else:
        amount, fmt = amount * Fraction(10) ** int(suffix[1:]), "DecimalExponent"
    # Go keeps nano precision at most, rounding away from zero.
    nanos = amount * 10**9
    if nanos.denominator != 1:
        rounded = math.ceil(abs(nanos))
        amount = Fraction(rounded if nanos > 0 else -rounded, 10**9)
    return amount, fmt


def _format_quantity(amount: Fraction, fmt: str) -> str:
    if amount == 0:
        return "0"
    if fmt == "BinarySI" and (abs(amount) < 1024 or amount.denominator != 1):
        fmt = "DecimalSI"  # Go: small or fractional binary values print as decimal
    if fmt == "BinarySI":
        mantissa, power = int(amount), 0
        while mantissa % 1024 == 0 and power < 6:
            mantissa, power = mantissa // 1024, power + 1
        return f"{mantissa}{_BINARY_SUFFIX[power]}"
    mantissa, exponent = _decimal_parts(amount)
    if fmt == "DecimalExponent":
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    suffix = _DECIMAL_SUFFIX.get(exponent)
    return f"{mantissa}{suffix}" if suffix is not None else f"{mantissa}e{exponent}"


def _decimal_parts(amount: Fraction) -> tuple[int, int]:
    """(mantissa, exponent) with the exponent a multiple of 3, as large as keeps the mantissa
    whole (Go's AsCanonicalBytes)."""
    exponent = -9
    mantissa = int(amount * 10**9)
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    while exponent % 3:
        mantissa, exponent = mantissa * 10, exponent - 1
    return mantissa, exponent


def same_serving_image(recorded: str, computed: str) -> bool:
    """The reference's sameServingImage: equal, or the same ``repo:tag`` with at most one side
    pinned by ``@sha256:`` (an older release recorded the tag, a newer one tag and digest; two
    different pins, or different tags, are different revisions)."""
    if recorded == computed:
        return True
    r_tag, _, r_pin = recorded.partition("@")
    c_tag, _, c_pin = computed.partition("@")
    return bool(r_tag) and r_tag == c_tag and (not r_pin or not c_pin)
