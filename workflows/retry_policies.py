"""The retry policies of the workflows, in one vocabulary (issue 37: the same policy was written
in three workflows).

``STEP``: an activity that does a step's work is retried 1 s doubling to 30 s for as long as its
window (the activity's schedule-to-close) allows; the reasons that end a rollout at once
(``decisionmodel.vocabulary.PERMANENT_REASONS``: retrying cannot change the answer) are not
retried. The activities raise ApplicationErrors whose type is one of these with
non_retryable=True; listing them here as well makes the policy hold even if an activity forgot
the flag. Not listed, on purpose: APIKeyInvalid and ResourceConflict can be fixed while the
rollout waits (add the key, remove the foreign object) and retry until the phase deadline;
where one is final (a foreign Service at promotion) the activity marks its error non-retryable.
A cluster that is away is retried, never given up: its stage waits (issue 25, point 5).

``FEW``: best effort (a pipeline's status): a few tries, then the next change writes it again.

``ONCE``: one try, retried by the workflow itself so that each failure shows at once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from temporalio.common import RetryPolicy

from decisionmodel.vocabulary import PERMANENT_REASONS

STEP: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=sorted(str(r) for r in PERMANENT_REASONS),
)
FEW: Final = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=5)
ONCE: Final = RetryPolicy(maximum_attempts=1)
