"""Every product function fits on a screen (issue 37, item 6): at most 60 lines, decorators
excluded. The product is what ships in the image: the core, the Kubernetes door, activities,
workflows (held to 40 by tests/unit/workflows/test_rollout_shape.py) and the controller. The
local environment and the simulators are the test bench, not the product."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("decisionmodel", "kube", "activities", "workflows", "controller")
LONGEST = 60  # lines


def long_functions() -> list[str]:
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > LONGEST:
                        where = path.relative_to(ROOT)
                        found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_product_function_is_longer_than_a_screen() -> None:
    assert long_functions() == []
