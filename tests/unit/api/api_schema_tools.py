"""Helpers for the API tests: the shared case table and a model of the API server's rules for
structural schemas, pruning and defaulting (k8s.io/apiextensions-apiserver, "Specifying a
structural schema"), so the generated CRD can be checked without a cluster.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CASES_FILE = Path(__file__).parent / "testdata" / "decisionmodels.yaml"


@dataclass(frozen=True)
class Case:
    case: str
    name: str
    spec: dict[str, Any]
    field: str = ""
    message: str = ""

    def manifest(self, namespace: str | None = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name}
        if namespace is not None:
            metadata["namespace"] = namespace
        return {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": metadata,
            "spec": copy.deepcopy(self.spec),
        }


def load_cases(kind: str) -> list[Case]:
    doc = yaml.safe_load(CASES_FILE.read_text())
    return [
        Case(
            case=c["case"],
            name=c.get("name", "triage"),
            spec=c["spec"],
            field=c.get("field", ""),
            message=c.get("message", ""),
        )
        for c in doc[kind]
    ]


# Keys of apiextensions/v1 JSONSchemaProps this project may use. `title`, `$ref`, `const`,
# `definitions`, numeric `exclusiveMinimum` (draft 2020-12) and friends are not among them.
ALLOWED_KEYS = {
    "description",
    "type",
    "format",
    "enum",
    "default",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "anyOf",
    "items",
    "properties",
    "additionalProperties",
    "required",
    "nullable",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-validations",
}
MAX_SAFE_JSON_INTEGER = (1 << 53) - 1
TYPES = {"object", "array", "string", "integer", "number", "boolean"}


def structural_problems(node: dict[str, Any], path: str = "") -> list[str]:
    """Violations of the structural-schema rules, as `path: problem` strings."""
    problems: list[str] = []
    where = path or "<root>"
    unknown = set(node) - ALLOWED_KEYS
    if unknown:
        problems.append(f"{where}: keys not allowed in a CRD schema: {sorted(unknown)}")
    if node.get("x-kubernetes-int-or-string"):
        if "type" in node:
            problems.append(f"{where}: int-or-string must not set type")
        branches = node.get("anyOf", [])
        if branches and branches != [{"type": "integer"}, {"type": "string"}]:
            problems.append(f"{where}: int-or-string anyOf must be [integer, string]")
    else:
        if node.get("type") not in TYPES:
            problems.append(f"{where}: missing or bad type {node.get('type')!r}")
        if "anyOf" in node:
            problems.append(f"{where}: anyOf outside int-or-string")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{where}: properties and additionalProperties are exclusive")
    if isinstance(node.get("additionalProperties"), bool):
        problems.append(f"{where}: additionalProperties must be a schema")
    for key in node.get("required", []):
        if key not in node.get("properties", {}):
            problems.append(f"{where}: required {key!r} is not a property")
    if node.get("type") == "array" and not isinstance(node.get("items"), dict):
        problems.append(f"{where}: array without a single items schema")
    if node.get("x-kubernetes-list-type") == "map":
        items = node.get("items", {})
        for key in node.get("x-kubernetes-list-map-keys", []):
            if key not in items.get("required", []):
                problems.append(f"{where}: list-map key {key!r} must be required in items")
    for rule in node.get("x-kubernetes-validations", []):
        if not rule.get("rule") or not rule.get("message"):
            problems.append(f"{where}: CEL rule without rule or message: {rule}")
        if "fieldPath" in rule:
            child = rule["fieldPath"].lstrip(".")
            if child not in node.get("properties", {}):
                problems.append(f"{where}: fieldPath {rule['fieldPath']} is not a property")
    if "default" in node:
        problems += [f"{where}: default {p}" for p in type_problems(node["default"], node, "")]
    for name, child in node.get("properties", {}).items():
        problems += structural_problems(child, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        problems += structural_problems(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        problems += structural_problems(node["additionalProperties"], f"{path}{{}}")
    return problems


def type_problems(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """What the API server's OpenAPI validation would say about `value` (no CEL)."""
    where = path or "<root>"
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{where}: not int-or-string"]
        if (
            isinstance(value, str)
            and "pattern" in schema
            and not re.search(schema["pattern"], value)
        ):
            return [f"{where}: {value!r} does not match pattern"]
        return []
    kind = schema.get("type")
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        # go-openapi's IsFloat64AJSONInteger: 5.0 is an integer, up to 2^53 - 1.
        "integer": lambda v: (
            (isinstance(v, int) and not isinstance(v, bool))
            or (isinstance(v, float) and v.is_integer() and abs(v) <= MAX_SAFE_JSON_INTEGER)
        ),
        "boolean": lambda v: isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    }
    if kind not in checks or not checks[kind](value):
        return [f"{where}: {value!r} is not of type {kind}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not in enum")
    if kind == "string":
        if "pattern" in schema and not re.search(schema["pattern"], value):
            problems.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if len(value) > schema.get("maxLength", len(value)):
            problems.append(f"{where}: longer than maxLength")
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{where}: shorter than minLength")
    if kind == "integer" and not schema.get("minimum", value) <= value <= schema.get(
        "maximum", value
    ):
        problems.append(f"{where}: {value} out of range")
    if kind == "array":
        if len(value) > schema.get("maxItems", len(value)):
            problems.append(f"{where}: more than maxItems")
        for i, item in enumerate(value):
            problems += type_problems(item, schema["items"], f"{path}[{i}]")
    if kind == "object" and not schema.get("x-kubernetes-preserve-unknown-fields"):
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{where}: missing required {key}")
        for key, item in value.items():
            child_path = f"{path}.{key}" if path else key
            if key in schema.get("properties", {}):
                problems += type_problems(item, schema["properties"][key], child_path)
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += type_problems(item, schema["additionalProperties"], child_path)
    return problems


def prune(value: Any, schema: dict[str, Any]) -> Any:
    """What the API server stores: unknown fields dropped unless preserved, and null values of
    known fields dropped (no field of this CRD is `nullable`)."""
    if isinstance(value, dict) and schema.get("type") == "object":
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return copy.deepcopy(value)
        if isinstance(schema.get("additionalProperties"), dict):
            items = schema["additionalProperties"]
            return {k: prune(v, items) for k, v in value.items() if v is not None}
        props = schema.get("properties", {})
        return {k: prune(v, props[k]) for k, v in value.items() if k in props and v is not None}
    if isinstance(value, list) and schema.get("type") == "array":
        return [prune(v, schema["items"]) for v in value]
    return value


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """The API server's defaulting: fill missing properties of objects that are present."""
    if isinstance(value, dict) and schema.get("type") == "object":
        out = dict(value)
        for key, child in schema.get("properties", {}).items():
            if key not in out and "default" in child:
                out[key] = copy.deepcopy(child["default"])
            if key in out:
                out[key] = apply_defaults(out[key], child)
        return out
    if isinstance(value, list) and schema.get("type") == "array":
        return [apply_defaults(v, schema["items"]) for v in value]
    return value


def walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every (path, schema) pair below and including `node`."""
    out = [(path, node)]
    for name, child in node.get("properties", {}).items():
        out += walk(child, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        out += walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += walk(node["additionalProperties"], f"{path}{{}}")
    return out


def without_nulls(value: Any) -> Any:
    """`value` with every null map value removed, at any depth."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value
