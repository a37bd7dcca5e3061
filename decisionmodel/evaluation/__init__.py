"""The evaluation maths: golden dataset, scoring, accuracy/ECE/Brier, gates, 4-place figures.

Pure Python (no HTTP, Kubernetes or Temporal). The evaluate activity reads the dataset, parses
it here, sends each case's ``request_body`` to ``POST /v1/systemone``, feeds the answers into
an :class:`EvaluationProgress` it heartbeats, and finally calls :func:`finalize` and
:func:`evaluate_gates`. Only numbers (progress, figures, verdict) leave the activity.

Decisions beyond REFERENCE.md "Evaluation" (each module says why in detail):

- Missing or malformed answer: wrong, calibration point ``(0.0, False)``; one point per pair, so
  N = pairs. Such points dilute ECE and Brier; the accuracy gate is what penalises them
  (scoring).
- A case whose request failed permanently: all its pairs as missing (progress).
- ``failed_cases``: cases with at least one wrong or missing answer, a refused request
  included: the meaning the API documents for ``status.evaluation.failedCases`` (progress).
- Score: the expected value is an integral level (``2``/``2.0``; ``2.5`` is DatasetInvalid),
  compared with the argmax level exactly, ties to the lowest level; level probabilities that do
  not sum to 1 are used as given, never renormalised; the tolerance band is inclusive and
  compared in decimal (scoring, dataset).
- Figures in status: 4 places, ROUND_HALF_EVEN of the exact value; accuracy from the exact
  ratio of counts (decimal_format).
- Gates compare those 4-place figures with the threshold ``Decimal``s, so verdict and status
  agree (gates).
"""

from __future__ import annotations

from decisionmodel.evaluation.dataset import (
    DEFAULT_MAX_CASES,
    DEFAULT_SCORE_TOLERANCE,
    MAX_DATASET_BYTES,
    Expectation,
    GoldenCase,
    GoldenDatasetInvalid,
    dataset_digest,
    parse_dataset,
)
from decisionmodel.evaluation.decimal_format import quantize4, render4
from decisionmodel.evaluation.decision import EvaluationDecision, decide, decision_verdict
from decisionmodel.evaluation.gates import (
    EVALUATION_FAILED,
    EVALUATION_PASSED,
    EvaluationGates,
    GateVerdict,
    evaluate_gates,
)
from decisionmodel.evaluation.metrics import ECE_BINS, EvaluationFigures, ece_bin_index
from decisionmodel.evaluation.progress import EvaluationProgress, finalize
from decisionmodel.evaluation.scoring import MISSING, PairOutcome, score_answer, score_case

__all__ = [
    "DEFAULT_MAX_CASES",
    "DEFAULT_SCORE_TOLERANCE",
    "ECE_BINS",
    "EVALUATION_FAILED",
    "EVALUATION_PASSED",
    "MAX_DATASET_BYTES",
    "MISSING",
    "EvaluationDecision",
    "EvaluationFigures",
    "EvaluationGates",
    "EvaluationProgress",
    "Expectation",
    "GateVerdict",
    "GoldenCase",
    "GoldenDatasetInvalid",
    "PairOutcome",
    "dataset_digest",
    "decide",
    "decision_verdict",
    "ece_bin_index",
    "evaluate_gates",
    "finalize",
    "parse_dataset",
    "quantize4",
    "render4",
    "score_answer",
    "score_case",
]
