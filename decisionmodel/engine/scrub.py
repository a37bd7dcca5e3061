"""Scrubbing a line of a workload's log before it is quoted in a failure, status or Event.

The prefetch Job's termination message ends with the last line ``ollaya pull`` printed, which
dmrollout copies into PrefetchFailed. That line is not ours: a registry error can echo a URL
with credentials, a header, a token. Before it is quoted it is cut to a bounded length, reduced
to printable ASCII, and anything that looks like a credential is replaced by ``[redacted]``.
"""

from __future__ import annotations

import re
from typing import Final

REDACTED: Final = "[redacted]"
# Enough for "PullFailed: ollaya pull exited 1: pulling manifest: 503 Service Unavailable".
LINE_LIMIT: Final = 200
# The kubelet caps a termination message at 4096 bytes; nothing longer is looked at.
_INPUT_LIMIT: Final = 4096
_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_HEX: Final = re.compile(r"[0-9a-fA-F]+")
_LONG_RUN: Final = re.compile(r"[A-Za-z0-9+/_-]{32,}={0,2}")

_PATTERNS: Final = (
    # URL userinfo: scheme://user:pass@host → scheme://[redacted]@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@"), rf"\1{REDACTED}@"),
    # Authorization schemes: Bearer/Basic <value>
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s,;]+"), rf"\1\2{REDACTED}"),
    # key=value / key: value for credential-like names, alone or as a part of a name joined
    # by - or _ (token=, hf_token:, x-api-key=, aws_secret_access_key=, password: …)
    (
        re.compile(
            r"(?i)\b((?:[a-z0-9]+[_-])*(?:token|key|secret|password|passwd|pwd|credentials?|"
            r"authorization|signature|sig)(?:[_-][a-z0-9]+)*)([\"']?\s*[=:]\s*)"
            r"(\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)"
        ),
        rf"\1\2{REDACTED}",
    ),
    # A JWT: three base64url parts, the first one a JSON header ("eyJ")
    (re.compile(r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*)?"), REDACTED),
)


def scrub_line(text: str, limit: int = LINE_LIMIT, *, keep_sha256: bool = False) -> str:
    """``text`` with credentials redacted, non-printable-ASCII characters replaced by ``?``,
    whitespace runs folded, and cut to ``limit`` characters (``...`` marks a cut).

    Long base64/hex runs (keys, tokens, JWT parts) are redacted; ``keep_sha256`` spares runs
    that are exactly a sha256 digest (64 lowercase hex), for lines dmrollout's own prefetch
    script writes ("DigestMismatch: expected <digest> got <digest>"), never for a log line."""
    line = "".join(c if " " <= c <= "~" else "?" for c in text[:_INPUT_LIMIT])
    for pattern, replacement in _PATTERNS:
        line = pattern.sub(replacement, line)

    def long_run(found: re.Match[str]) -> str:
        run = found.group(0)
        if keep_sha256 and _SHA256.fullmatch(run):
            return run
        # A key looks random: all hex, or upper- and lowercase letters and digits mixed. A
        # long path or model name ("library/some-model-name/manifests") is spared.
        mixed = all(any(test(c) for c in run) for test in (str.isupper, str.islower, str.isdigit))
        return REDACTED if _HEX.fullmatch(run) or mixed else run

    line = " ".join(_LONG_RUN.sub(long_run, line).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
