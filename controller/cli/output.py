"""How read verbs print: a table or lines for a person, ``-o json`` / ``-o yaml`` for scripts."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import yaml

FORMATS = ("table", "json", "yaml")


def add_output_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", choices=FORMATS, default="table", help="output format")


def emit_data(data: Any, fmt: str) -> bool:
    """Print ``data`` as JSON or YAML; False for ``table`` (the caller prints its own view)."""
    if fmt == "json":
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
        return True
    if fmt == "yaml":
        # Through JSON first: the vocabulary's str enums (keys and values) become plain strings.
        sys.stdout.write(yaml.safe_dump(json.loads(json.dumps(data)), sort_keys=False))
        return True
    return False


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns as wide as their widest cell, two spaces apart (kubectl's look)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )
