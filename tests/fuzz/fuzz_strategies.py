"""Hypothesis strategies of the fuzz wall: DecisionModels, golden datasets, runtime answers.

Each strategy starts from a valid object and applies zero or more mutations, so most examples
are *near* valid (one wrong type, one number out of range, one bad pattern, one unknown or
missing field, one huge value) and exercise the validators rather than the first type check.

- `decision_models()` mutates along the CRD's own schema (`decisionmodel.api.crd.root_schema`): a
  new field of the API is fuzzed without touching this module. Each example carries the wire
  paths it broke, so a refusal can be checked to name one of them.
- `datasets()` writes JSONL bytes: valid cases, structural mutations of a case, and byte-level
  damage (BOMs, non-UTF-8, control characters, huge integers, NaN, deep nesting, long lines).
- `runtime_answers()` is one HTTP answer of the runtime (status, headers, body) to one of the
  calls the worker makes: decide, ps, warmup, version.

Strings leave out lone surrogates (category Cs) in DecisionModels only: JSON cannot carry one
meaningfully and the API server turns it into U+FFFD, so the two sides would be comparing
different inputs. Datasets and runtime answers get them (as `\\ud800` escapes), since the
parser there must cope with whatever bytes arrive.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from decisionmodel.api import number_beyond_double
from decisionmodel.api.crd import root_schema

# --- shared pieces ----------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
HUGE_INTS = st.sampled_from([2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30, 10**400])
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    HUGE_INTS,
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)


@functools.cache
def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    # Cached: Hypothesis validates a new recursive strategy on first draw, which costs more
    # than drawing from it; composites call this for every example.
    return st.recursive(
        JSON_SCALARS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def nested(depth: int, leaf: Any = 1) -> Any:
    value: Any = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


# --- DecisionModels ---------------------------------------------------------------------------

LABEL = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,12}", fullmatch=True)
K8S_NAME = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
SECRET_KEY = st.from_regex(r"[-._a-zA-Z0-9]{1,20}", fullmatch=True)
DECIMAL = st.one_of(
    st.sampled_from(["0", "1", "0.9", "0.90", "1.0", "0.05", "1.000"]),
    st.from_regex(r"0\.[0-9]{1,14}", fullmatch=True),
)
DURATION = st.one_of(
    st.sampled_from(["1m", "24h", "60s", "30m", "1h30m", "0.5h", "86400s", "1440m", "90s"]),
    st.integers(min_value=1, max_value=1440).map(lambda n: f"{n}m"),
    st.integers(min_value=60, max_value=86400).map(lambda n: f"{n}s"),
)
QUANTITY = st.one_of(
    st.sampled_from(["10Gi", "1Ti", "500Mi", "1e3", "0.5Gi", "+1G", "1.5E2"]),
    st.integers(min_value=0, max_value=2**40),
)


def model_names() -> st.SearchStrategy[str]:
    host = st.sampled_from(["", "registry.example.com/", "localhost:5000/", "ollaya.dev/"])
    namespace = st.one_of(st.just(""), LABEL.map(lambda s: s + "/"))
    return st.tuples(host, namespace, LABEL, LABEL).map(lambda t: f"{t[0]}{t[1]}{t[2]}:{t[3]}")


def secret_ref() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"name": K8S_NAME, "key": SECRET_KEY}, optional={"optional": st.just(False)}
    )


def evaluation() -> st.SearchStrategy[dict[str, Any]]:
    source = st.one_of(
        st.fixed_dictionaries(
            {"configMapRef": st.fixed_dictionaries({"name": K8S_NAME, "key": SECRET_KEY})}
        ),
        st.fixed_dictionaries({"secretRef": secret_ref()}),
    )
    return st.fixed_dictionaries(
        {"datasetRef": source, "minAccuracy": DECIMAL},
        optional={
            "maxAccuracyDrop": DECIMAL,
            "maxECE": DECIMAL,
            "maxECEIncrease": DECIMAL,
            "maxCases": st.integers(min_value=1, max_value=5000),
        },
    )


@st.composite
def rollout(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["evaluation"] = draw(evaluation())
    promotions = ["Automatic", "Manual"] + (["EvaluationGated"] if "evaluation" in out else [])
    if draw(st.booleans()):
        out["promotion"] = draw(st.sampled_from(promotions))
    if draw(st.booleans()):
        out["timeouts"] = draw(
            st.fixed_dictionaries(
                {}, optional={"caching": DURATION, "starting": DURATION, "evaluating": DURATION}
            )
        )
    return out


def scheduling() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "nodeSelector": st.dictionaries(LABEL, LABEL, max_size=3),
            "tolerations": st.lists(
                st.fixed_dictionaries({"key": LABEL, "operator": st.just("Exists")}), max_size=2
            ),
            "affinity": st.dictionaries(LABEL, json_values(4), max_size=2),
            "runtimeClassName": K8S_NAME,
        },
    )


def cache() -> st.SearchStrategy[dict[str, Any]]:
    modes = st.lists(
        st.sampled_from(["ReadWriteOnce", "ReadWriteMany"]), min_size=1, max_size=2, unique=True
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "size": QUANTITY,
            "storageClassName": K8S_NAME,
            "accessModes": modes,
            "downloadTokenSecretRef": secret_ref(),
        },
    )


@st.composite
def valid_specs(draw: st.DrawFn) -> dict[str, Any]:
    spec = draw(
        st.fixed_dictionaries(
            {"model": model_names()},
            optional={
                "engine": st.just("ollaya"),
                "digest": st.from_regex(r"[a-f0-9]{64}", fullmatch=True),
                "replicas": st.one_of(st.integers(1, 10), st.just(2**31 - 1)),
                "device": st.sampled_from(["cpu", "cuda"]),
                "resources": st.dictionaries(LABEL, json_values(6), max_size=3),
                "scheduling": scheduling(),
                "cache": cache(),
                "auth": st.fixed_dictionaries({}, optional={"apiKeySecretRef": secret_ref()}),
                "rollout": rollout(),
            },
        )
    )
    override = draw(st.sampled_from(["none", "image", "runtimeVersion"]))
    if override == "image":
        spec["image"] = draw(st.sampled_from(["ghcr.io/ollaya-dev/ollaya:0.10.0", "x"]))
    elif override == "runtimeVersion":
        spec["runtimeVersion"] = draw(
            st.from_regex(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}", fullmatch=True)
        )
    return spec


# The schema node of every wire path, for schema-driven mutations.
Path = tuple[str | int, ...]
SCHEMA = root_schema()


def schema_at(path: Path) -> dict[str, Any] | None:
    node: dict[str, Any] | None = SCHEMA
    for part in path:
        if node is None:
            return None
        if isinstance(part, int):
            node = node.get("items")
        elif part in node.get("properties", {}):
            node = node["properties"][part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
        if node is not None and node.get("x-kubernetes-preserve-unknown-fields"):
            return node
    return node


def wire_path(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def leaves(value: Any, path: Path = ()) -> list[Path]:
    """Every path into `value` that has a schema of its own (not inside passthrough maps)."""
    out: list[Path] = [path] if path else []
    node = schema_at(path) if path else SCHEMA
    if node is None or node.get("x-kubernetes-preserve-unknown-fields"):
        return out
    if isinstance(value, dict):
        for key, child in value.items():
            out += leaves(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += leaves(child, (*path, i))
    return out


_BAD_STRINGS = st.one_of(
    TEXT,
    st.sampled_from(
        [
            "",
            " ",
            "a b",
            "laya",
            "laya:",
            "LAYA:EN",
            "la\u00a0ya:en",
            "1.2",
            "1.2.\u0663",
            "v1.2.3",
            "1.5",
            "-0.1",
            ".9",
            "0.90 ",
            "1.0000000000000001",
            "0.",
            "sha256:abc",
            "A" * 64,
            "a" * 63,
            "30",
            "30 m",
            "-5m",
            "+1h",
            ".5h",
            "1.h",
            "24h1ns",
            "59.9999999s",
            "0.016666666666666666h",
            "99999999999999999999h",
            "2562047h2562047h",
            "1d",
            "1e400",
            "10Gi ",
            "abc",
            "\u0000",
            "\n",
            "ReadOnlyMany",
            "EvaluationGated",
            "CPU",
            "cuda:0",
            "a/b",
            "key with space",
            "é",
        ]
    ),
    st.integers(1, 20000).map(lambda n: "x" * n),
)
_BAD_NUMBERS = st.one_of(
    st.sampled_from([-1, 0, 1, 5000, 5001, -0.0, 1.0, 2.5, 200.0, 1e300, 9007199254740992.0]),
    HUGE_INTS,
    HUGE_INTS.map(lambda n: -n),
    st.integers(),
)


_BAD_VALUES: dict[int, st.SearchStrategy[Any]] = {}


def bad_values(node: dict[str, Any] | None) -> st.SearchStrategy[Any]:
    """Values likely to break a field of schema `node`: its own type near its limits, another
    JSON type, null, a huge or deeply nested value (one strategy per schema node, cached)."""
    key = id(node)
    if key not in _BAD_VALUES:
        _BAD_VALUES[key] = _bad_values(node)
    return _BAD_VALUES[key]


def _bad_values(node: dict[str, Any] | None) -> st.SearchStrategy[Any]:
    kind = (node or {}).get("type")
    own: list[st.SearchStrategy[Any]] = []
    if kind == "string" or (node or {}).get("x-kubernetes-int-or-string"):
        own.append(_BAD_STRINGS)
        if "enum" in (node or {}):
            own.append(
                st.sampled_from([v.lower() for v in node["enum"]] + [v + " " for v in node["enum"]])
            )
    if kind in ("integer", "number") or (node or {}).get("x-kubernetes-int-or-string"):
        own.append(_BAD_NUMBERS)
    if kind == "array":
        own.append(st.lists(json_values(3), max_size=4))
        if "enum" in (node or {}).get("items", {}):
            own.append(st.lists(st.sampled_from(node["items"]["enum"]), max_size=4))
    if kind == "object":
        own.append(st.builds(dict))
        own.append(st.dictionaries(TEXT, json_values(3), max_size=3))
    foreign = st.one_of(
        JSON_SCALARS, st.builds(list), st.builds(dict), st.integers(1, 300).map(nested)
    )
    return st.one_of(*own, foreign) if own else foreign


@dataclass(frozen=True)
class SpecExample:
    """A DecisionModel manifest and the wire paths its mutations touched."""

    manifest: dict[str, Any]
    broken: tuple[str, ...]


def _set(obj: Any, path: Path, value: Any) -> None:
    for part in path[:-1]:
        obj = obj[part]
    obj[path[-1]] = value


def _delete(obj: Any, path: Path) -> None:
    for part in path[:-1]:
        obj = obj[part]
    del obj[path[-1]]


# Mutations the generic ones rarely hit: the cross-field rules. (path, value) pairs set on a
# valid spec; the path is where the CRD's rule points.
_RULE_BREAKERS: list[tuple[Path, Any, str]] = [
    (("spec", "image"), "x", "spec.runtimeVersion"),
    (("spec", "rollout", "promotion"), "EvaluationGated", "spec.rollout.promotion"),
    (
        ("spec", "cache", "accessModes"),
        ["ReadWriteOnce", "ReadWriteOnce"],
        "spec.cache.accessModes",
    ),
    (("spec", "cache", "accessModes"), ["ReadOnlyMany"], "spec.cache.accessModes"),
    (
        ("spec", "auth", "apiKeySecretRef"),
        {"name": "k", "key": "t", "optional": True},
        "spec.auth.apiKeySecretRef.optional",
    ),
]


@st.composite
def decision_models(draw: st.DrawFn) -> SpecExample:
    name = draw(
        st.one_of(
            st.just("triage"), K8S_NAME, st.sampled_from(["a" * 44, "9lives", "a.b", "A", "a-"])
        )
    )
    manifest: dict[str, Any] = {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": name},
        "spec": draw(valid_specs()),
    }
    broken: list[str] = []
    if name != "triage" and not re.fullmatch(r"[a-z]([-a-z0-9]{0,41}[a-z0-9])?", name):
        broken.append("metadata.name")
    for _ in range(draw(st.integers(0, 3))):
        what = draw(st.sampled_from(["value", "value", "value", "delete", "unknown", "rule"]))
        if what == "rule":
            path, value, named = draw(st.sampled_from(_RULE_BREAKERS))
            if path == ("spec", "image"):
                manifest["spec"].setdefault("runtimeVersion", "0.10.0")
            section = manifest["spec"].get(path[1])
            if path[1] in ("cache", "auth", "rollout") and not isinstance(section, dict):
                manifest["spec"][path[1]] = {}  # an earlier mutation may have made it a list
            if path[1] == "rollout":
                manifest["spec"]["rollout"].pop("evaluation", None)
            _set(manifest, path, copy.deepcopy(value))  # later mutations edit it in place
            broken.append(named)
            continue
        paths = [p for p in leaves(manifest["spec"], ("spec",)) if p != ("spec",)]
        if not paths:
            continue
        path = draw(st.sampled_from(paths))
        if what == "delete":
            _delete(manifest, path)
        elif what == "unknown":
            parent = path if isinstance(_get(manifest, path), dict) else path[:-1]
            target = _get(manifest, parent)
            key = draw(TEXT)
            if isinstance(target, dict) and key not in target:
                target[key] = draw(json_values(3))
                # An unknown field is pruned or ignored: nothing broken. A new entry of a typed
                # map (nodeSelector) is no unknown field: it must have the map's value type.
                if isinstance((schema_at(parent) or {}).get("additionalProperties"), dict):
                    broken.append(wire_path((*parent, key)))
            continue
        else:
            _set(manifest, path, draw(bad_values(schema_at(path))))
        broken.append(wire_path(path))
    huge = number_beyond_double(manifest)
    if huge is not None:
        # Passthrough and unknown fields may hold one too: the object is broken there.
        broken.append(huge)
    return SpecExample(manifest=manifest, broken=tuple(broken))


def _get(obj: Any, path: Path) -> Any:
    for part in path:
        obj = obj[part]
    return obj


# --- golden datasets --------------------------------------------------------------------------

QID = st.one_of(st.from_regex(r"q_[a-z]{1,8}", fullmatch=True), st.text(max_size=12))


@st.composite
def golden_case(draw: st.DrawFn) -> dict[str, Any]:
    questions: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    tolerance: dict[str, Any] = {}
    for qid in draw(st.lists(QID, min_size=1, max_size=3, unique=True)):
        kind = draw(st.sampled_from(["choice", "noul", "score"]))
        if kind == "choice":
            labels = draw(
                st.lists(st.text(min_size=1, max_size=6), min_size=2, max_size=4, unique=True)
            )
            criteria: Any = labels if draw(st.booleans()) else {label: "d" for label in labels}
            questions[qid] = {"type": "choice", "criteria": criteria}
            expected[qid] = draw(st.sampled_from(labels))
        elif kind == "noul":
            questions[qid] = {"type": "noul"}
            expected[qid] = draw(st.booleans())
        else:
            levels = draw(st.integers(2, 10))
            questions[qid] = {"type": "score", "criteria": [f"l{i}" for i in range(levels)]}
            expected[qid] = draw(st.integers(0, levels - 1))
            if draw(st.booleans()):
                tolerance[qid] = draw(st.floats(0, 3))
    state = draw(
        st.one_of(
            st.text(max_size=60),
            st.dictionaries(st.text(max_size=5), json_values(4), max_size=3),
            st.lists(json_values(3), max_size=3),
        )
    )
    case: dict[str, Any] = {"state": state, "questions": questions, "expected": expected}
    if tolerance:
        case["tolerance"] = tolerance
    return case


_CASE_KEYS = ["state", "questions", "expected", "tolerance"]


@st.composite
def mutated_case(draw: st.DrawFn) -> dict[str, Any]:
    """A valid case with one structural mutation: a key gone or of another type, an expected
    value or tolerance out of range, huge, non-finite or of the wrong type."""
    case = draw(golden_case())
    how = draw(st.sampled_from(["drop", "retype", "expected", "tolerance", "question", "none"]))
    qid = next(iter(case["expected"]))
    if how == "drop":
        case.pop(draw(st.sampled_from(_CASE_KEYS)), None)
    elif how == "retype":
        case[draw(st.sampled_from(_CASE_KEYS))] = draw(json_values(4))
    elif how == "expected":
        case["expected"][draw(st.sampled_from([qid, "unknown-q"]))] = draw(
            st.one_of(json_values(3), HUGE_INTS, st.sampled_from([1e308, -1e308, 2.5, -1, 10]))
        )
    elif how == "tolerance":
        case["tolerance"] = {qid: draw(st.one_of(json_values(3), HUGE_INTS, st.just(1e308)))}
    elif how == "question":
        case["questions"][qid] = draw(json_values(4))
    return case


# Raw JSONL fragments no json.dumps would write: what a hand-edited or hostile dataset holds.
_RAW_LINES = st.sampled_from(
    [
        b'{"state": "s", "questions": {"q": {"type": "noul"}}, "expected": {"q": NaN}}',
        b'{"state": Infinity, "questions": {"q": {"type": "noul"}}, "expected": {"q": true}}',
        b'{"state": 1e400, "questions": {"q": {"type": "noul"}}, "expected": {"q": true}}',
        b'{"state": [1e400], "questions": {"q": {"type": "noul"}}, "expected": {"q": true}}',
        b'{"state": "s", "questions": {"q": {"type": "score", "criteria": ["a", "b"]}}, '
        b'"expected": {"q": 1e400}}',
        b'{"state": "s", "questions": {"q": {"type": "score", "criteria": ["a", "b"]}}, '
        b'"expected": {"q": ' + b"9" * 5000 + b"}}",
        b'{"state": "s", "questions": {"q": {"type": "score", "criteria": ["a", "b"]}}, '
        b'"expected": {"q": ' + b"9" * 400 + b"}}",
        b'{"state": "s", "questions": {"q": {"type": "score", "criteria": ["a", "b"]}}, '
        b'"expected": {"q": 1}, "tolerance": {"q": ' + b"9" * 400 + b"}}",
        b'{"state": "\\ud800", "questions": {"q": {"type": "noul"}}, "expected": {"q": true}}',
        b'{"state": "s", "questions": {"\\udfff": {"type": "noul"}}, '
        b'"expected": {"\\udfff": true}}',
        b'{"state": "s", "questions": {"q": {"type": "noul"}}, "expected": {"q": true}, "x": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
        b'{"state": ' + b"[" * 900 + b"]" * 900 + b', "questions": {"q": {"type": "noul"}}, '
        b'"expected": {"q": true}}',
        b'{"state": "s", "questions": {"q": {"type": "noul"}}, "expected": {"q": true}, '
        b'"expected": {"q": false}}',
        b"\xef\xbb\xbf{}",
        b"\xff\xfe{\x00}\x00",
        b"\x00\x01\x02",
        b'"just a string"',
        b"[]",
        b"null",
        b'{"state": "s"' + b" " * 300_000 + b"}",
    ]
)
_DAMAGE = st.sampled_from(
    ["bom", "bom-later", "invalid-utf8", "control", "crlf", "truncate", "long"]
)


@st.composite
def datasets(draw: st.DrawFn) -> bytes:
    """JSONL bytes: valid and mutated cases, raw hostile lines, byte-level damage."""
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["valid", "valid", "mutated", "raw", "blank"]))
        if kind == "valid":
            lines.append(json.dumps(draw(golden_case())).encode())
        elif kind == "mutated":
            lines.append(json.dumps(draw(mutated_case())).encode())
        elif kind == "raw":
            lines.append(draw(_RAW_LINES))
        else:
            lines.append(draw(st.sampled_from([b"", b"  ", b"\t", b"\r"])))
    raw = b"\n".join(lines)
    for damage in draw(st.lists(_DAMAGE, max_size=2)):
        raw = _damaged(draw, raw, damage)
    return raw


def _damaged(draw: st.DrawFn, raw: bytes, damage: str) -> bytes:
    at = draw(st.integers(0, len(raw)))
    if damage == "bom":
        return b"\xef\xbb\xbf" + raw
    if damage == "bom-later":
        return raw[:at] + b"\n\xef\xbb\xbf" + raw[at:]
    if damage == "invalid-utf8":
        return (
            raw[:at]
            + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]))
            + raw[at:]
        )
    if damage == "control":
        return raw[:at] + bytes([draw(st.sampled_from([0, 1, 8, 11, 12, 27, 127]))]) + raw[at:]
    if damage == "crlf":
        return raw.replace(b"\n", b"\r\n")
    if damage == "truncate":
        return raw[:at]
    return raw + b"\n" + b'{"state": "' + b"x" * draw(st.integers(1, 1_100_000)) + b'"}'


# --- runtime answers --------------------------------------------------------------------------

ENDPOINTS = ("decide", "ps", "warmup", "version")


@dataclass(frozen=True)
class RuntimeAnswer:
    endpoint: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def _answer_for(kind: str) -> st.SearchStrategy[Any]:
    if kind == "choice":
        return st.fixed_dictionaries(
            {
                "type": st.just("choice"),
                "choice": st.sampled_from(["a", "b", "zz"]),
                "confidence": st.floats(0, 1),
                "probabilities": st.dictionaries(st.sampled_from(["a", "b"]), st.floats(0, 1)),
            }
        )
    if kind == "noul":
        return st.fixed_dictionaries({"type": st.just("noul"), "noul": st.floats(0, 1)})
    return st.fixed_dictionaries(
        {
            "type": st.just("score"),
            "score": st.floats(0, 3),
            "confidence": st.floats(0, 1),
            "probabilities": st.dictionaries(
                st.sampled_from(["0", "1", "2", "01", "-1", " 1"]), st.floats(0, 1)
            ),
        }
    )


@st.composite
def decide_bodies(draw: st.DrawFn) -> Any:
    answers = {qid: draw(_answer_for(kind)) for qid, kind in FUZZ_QUESTIONS.items()}
    body: dict[str, Any] = {"model": "laya:en", "answers": answers, "usage": {"input_tokens": 3}}
    for _ in range(draw(st.integers(0, 3))):
        qid = draw(st.sampled_from(list(FUZZ_QUESTIONS)))
        key = draw(
            st.sampled_from(["type", "choice", "noul", "score", "probabilities", "confidence"])
        )
        target = body["answers"].setdefault(qid, {})
        if isinstance(target, dict):
            target[key] = draw(st.one_of(json_values(3), HUGE_INTS, HUGE_INTS.map(lambda n: -n)))
        else:
            body["answers"][qid] = draw(json_values(3))
    if draw(st.integers(0, 9)) == 0:
        body["answers"] = draw(json_values(3))
    return body


@st.composite
def ps_bodies(draw: st.DrawFn) -> Any:
    entry = {
        "name": "laya:en",
        "model": "laya:en",
        "size": 845897529,
        "digest": "c" * 64,
        "details": {"format": "onnx", "quantization_level": "F32"},
        "expires_at": None,
        "size_vram": 0,
        "context_length": 512,
        "device": "cpu",
    }
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(sorted(entry)))
        entry[key] = draw(
            st.one_of(
                json_values(3),
                HUGE_INTS,
                st.sampled_from(
                    [
                        "2026-13-45T99:00:00Z",
                        "9999-12-31T23:59:59Z",
                        "not a date",
                        "sha256:" + "C" * 64,
                        "cuda:0",
                    ]
                ),
            )
        )
    return {"models": draw(st.sampled_from([[entry], [entry, entry], [], [1], None]))}


@st.composite
def warmup_bodies(draw: st.DrawFn) -> Any:
    body = {"model": "laya:en", "answers": {}, "done_reason": "load", "load_duration": 123}
    key = draw(st.sampled_from(["done_reason", "load_duration", "model", "none"]))
    if key != "none":
        body[key] = draw(st.one_of(json_values(3), HUGE_INTS))
    return body


_RAW_BODIES = st.sampled_from(
    [
        b"",
        b"null",
        b"[]",
        b"\xef\xbb\xbf{}",
        b"\xff\xfe\x00",
        b'{"answers": NaN}',
        b'{"answers": {"q_noul": {"type": "noul", "noul": 1e400}}}',
        b'{"answers": {"q_noul": {"type": "noul", "noul": ' + b"9" * 5000 + b"}}}",
        b'{"answers": {"q_noul": {"type": "noul", "noul": ' + b"9" * 400 + b"}}}",
        b'{"answers": {"q_score": {"type": "score", "score": '
        + b"9" * 400
        + b', "probabilities": {"0": '
        + b"9" * 400
        + b"}}}}",
        b'{"answers": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"error": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b', "code": "QUEUE_FULL"}',
        b'{"error": "\\ud800", "code": "\\udfff"}',
        b'{"models": [{"name": "' + b"x" * 2_000_000 + b'"}]}',
        b'{"version": ' + b"9" * 5000 + b"}",
        b'{"done_reason": "load", "load_duration": ' + b"9" * 5000 + b"}",
        b"\x1f\x8b\x08\x00garbage",
    ]
)
_HEADERS = st.lists(
    st.tuples(
        st.sampled_from(["Retry-After", "Content-Type", "Content-Encoding"]),
        st.sampled_from(
            [
                "1",
                "0",
                "-5",
                "nan",
                "inf",
                "1e400",
                "abc",
                "gzip",
                "deflate",
                "br",
                "application/json",
                "99999999999999999999",
            ]
        ),
    ),
    max_size=2,
    unique_by=lambda h: h[0],
)


@st.composite
def runtime_answers(draw: st.DrawFn) -> RuntimeAnswer:
    endpoint = draw(st.sampled_from(ENDPOINTS))
    # Mostly 200, so the answer is parsed and scored rather than mapped from its status.
    status = draw(
        st.one_of(
            *[st.just(200)] * 6,
            st.sampled_from([401, 404, 422, 429, 500, 503]),
            st.integers(100, 599),
        )
    )
    body_value: Any
    kind = draw(st.sampled_from(["own", "own", "own", "error", "raw", "json"]))
    if kind == "raw":
        body = draw(_RAW_BODIES)
    else:
        if kind == "own":
            body_value = draw(
                {
                    "decide": decide_bodies(),
                    "ps": ps_bodies(),
                    "warmup": warmup_bodies(),
                    "version": st.fixed_dictionaries({"version": json_values(2)}),
                }[endpoint]
            )
        elif kind == "error":
            body_value = {
                "error": draw(TEXT),
                "code": draw(
                    st.sampled_from(["QUEUE_FULL", "MODEL_LOAD_FAILED", "UNAUTHORIZED", "X"])
                ),
            }
        else:
            body_value = draw(json_values(6))
        body = json.dumps(body_value).encode()
    return RuntimeAnswer(endpoint, status, tuple(draw(_HEADERS)), body)


# The questions of the case the decide answers are scored against (one of each kind).
FUZZ_QUESTIONS = {"q_choice": "choice", "q_noul": "noul", "q_score": "score"}
FUZZ_CASE = json.dumps(
    {
        "state": "s",
        "questions": {
            "q_choice": {"type": "choice", "criteria": ["a", "b"]},
            "q_noul": {"type": "noul"},
            "q_score": {"type": "score", "criteria": ["l0", "l1", "l2"]},
        },
        "expected": {"q_choice": "a", "q_noul": True, "q_score": 1},
    }
).encode()
