"""A failed prefetch Job's typed error (activities.prefetch.classify_failure): pure.

Moved from tests/integration/test_activities_objects.py, where the cluster marker kept it out
of ``make unit``; what it asserts is unchanged.
"""

from __future__ import annotations

from activities.prefetch import classify_failure


def test_classify_backoff_limit_is_prefetch_failed() -> None:
    """Exit 1 until backoffLimit: PrefetchFailed carrying the last termination message (the
    real Job takes minutes of backoff to get there, so this one is fed the Job's state)."""
    job = {"metadata": {"name": "router-pf-x"}, "status": {"failed": 5}}
    failure = {"reason": "BackoffLimitExceeded", "message": "Job has reached the backoff limit"}
    pods = [
        {
            "status": {
                "containerStatuses": [
                    {
                        "name": "prefetch",
                        "state": {
                            "terminated": {
                                "exitCode": 1,
                                "message": f"REGISTRY_ERROR: attempt {i}\n",
                                "finishedAt": f"2030-01-01T00:00:0{i}Z",
                            }
                        },
                    }
                ]
            }
        }
        for i in (3, 5, 4)
    ]
    error = classify_failure(job, failure, pods)
    assert error.reason == "PrefetchFailed" and error.permanent
    assert "BackoffLimitExceeded" in str(error)
    assert "after 5 attempt(s); last attempt: REGISTRY_ERROR: attempt 5" in str(error)
    # The Pod already gone: the Job controller's FailJob message still names the exit code.
    gone = classify_failure(
        job,
        {
            "reason": "PodFailurePolicy",
            "message": "Container prefetch for pod ns/p failed with exit code 3 matching FailJob "
            "rule at index 0",
        },
        [],
    )
    assert gone.reason == "ModelNotFound"
