"""`keep_alive` and duration values as Ollaya reads them.

A number is seconds; a string is a number of seconds (`"-1"`) or a Go duration (`"5m"`,
`"1h30m"`, `"500ms"`, `"-1m"`). Negative pins the model (never evicted, `expires_at: null`),
zero unloads it, positive keeps it that long after the last use.
"""

from __future__ import annotations

import math
import re
from typing import Any

DEFAULT_KEEP_ALIVE = "5m"
DEFAULT_LOAD_TIMEOUT = "5m"

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_DURATION = re.compile(r"^([+-]?)((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+$")
_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(value: Any) -> float:
    """Seconds for a number or a duration string; ValueError when it is neither."""
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"invalid duration {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"invalid duration {value!r}")
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(number):
            return number
    match = _GO_DURATION.match(text)
    if not match:
        raise ValueError(f"invalid duration {value!r}")
    seconds = sum(float(amount) * _UNITS[unit] for amount, unit in _TERM.findall(text))
    return -seconds if match.group(1) == "-" else seconds


def keep_alive_seconds(value: Any, default: str | None) -> float:
    """The effective keep-alive: `value` when given, else the Pod's OLLAYA_KEEP_ALIVE, else 5m.

    A default that does not parse falls back to 5m, as a misconfigured server would start with
    its built-in default.
    """
    if value is not None:
        return parse_duration(value)
    try:
        return parse_duration(default if default is not None else DEFAULT_KEEP_ALIVE)
    except ValueError:
        return parse_duration(DEFAULT_KEEP_ALIVE)
