"""The prefetch log line quoted in PrefetchFailed is scrubbed (issue 12, point 5): bounded,
printable ASCII, credentials redacted; dmrollout's own digest lines keep their digests."""

from __future__ import annotations

from typing import Any

import pytest

from activities.prefetch import classify_failure
from decisionmodel.engine.scrub import LINE_LIMIT, scrub_line

JOB = {"metadata": {"name": "router-pf-x"}, "status": {"failed": 5}}
BACKOFF = {"reason": "BackoffLimitExceeded", "message": "Job has reached the backoff limit"}
TOKEN = "hf_QzT8wLm2Vx9KpR4sN7bYc1dF6gH3jA5eU0"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ6cTkiLCJpYXQiOjE1MTYyMzkwMjJ9.c2lnbmF0dXJlLXpxOS16cTk5OTk5"


def pods(message: str, code: int = 1) -> list[dict[str, Any]]:
    terminated = {"exitCode": code, "message": message, "finishedAt": "2030-01-01T00:00:00Z"}
    status = {"containerStatuses": [{"name": "prefetch", "state": {"terminated": terminated}}]}
    return [{"status": status}]


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("PullFailed: GET https://zq9user:zq9pass@registry.example/v2/x: 401", "zq9pass"),
        ("PullFailed: request failed: Authorization: Bearer zq9-opaque-token", "zq9-opaque"),
        ("PullFailed: GET https://hf.co/x?token=zq9tok&x=1 failed", "zq9tok"),
        ("PullFailed: HF_TOKEN=zq9tok not accepted", "zq9tok"),
        ("PullFailed: x-api-key: zq9key rejected", "zq9key"),
        ('PullFailed: config {"password": "zq9pw"} refused', "zq9pw"),
        (f"PullFailed: 401 for token {TOKEN}", TOKEN[4:20]),
        (f"PullFailed: bad credentials {JWT}", "eyJhbGciOiJIUzI1NiJ9"),
        (f"PullFailed: sha {'ab' * 40}", "ab" * 20),
    ],
)
def test_a_credential_in_the_last_log_line_is_redacted(line: str, secret: str) -> None:
    error = classify_failure(JOB, BACKOFF, pods(line))
    assert error.reason == "PrefetchFailed"
    assert secret not in str(error)
    assert "[redacted]" in str(error)


def test_the_line_is_bounded_and_printable_ascii() -> None:
    line = "PullFailed: caf\u00e9 \x1b[31mred\x1b[0m \u202eevil " + "x " * 5000
    error = classify_failure(JOB, BACKOFF, pods(line))
    message = str(error)
    assert all(" " <= c <= "~" for c in message)
    assert "\u00e9" not in message and "\x1b" not in message
    assert len(message) < LINE_LIMIT + 200  # the line, plus the Job's name and counts
    assert scrub_line("y " * 5000).endswith("...")


def test_an_ordinary_failure_stays_readable_and_our_digest_lines_keep_digests() -> None:
    line = "PullFailed: ollaya pull exited 1: pulling manifest: 503 Service Unavailable"
    assert line in str(classify_failure(JOB, BACKOFF, pods(line)))
    digest, other = "a" * 64, "b" * 64
    mismatch = classify_failure(
        JOB,
        {"reason": "PodFailurePolicy", "message": "exit code 4"},
        pods(f"DigestMismatch: expected {digest} got {other}", code=4),
    )
    assert digest in str(mismatch) and other in str(mismatch)


def test_a_long_path_is_not_mistaken_for_a_key() -> None:
    line = "PullFailed: GET /v2/library/some-model-name/manifests/latest-version: 503"
    assert scrub_line(line) == line
