"""Fuzz wall, cluster half: generated DecisionModels through the pydantic types and through the
real API server's CRD validation (dry-run create) must agree on accept/reject, and each refusal
names a field the example broke."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from fuzz_apiserver import DryRunClient, dumps
from fuzz_checks import check_spec
from fuzz_run import draw_examples
from fuzz_strategies import decision_models
from fuzz_tally import EXAMPLES, Tally
from harness.rollout_harness import install_crd

from localenv.cluster import LocalCluster

pytestmark = pytest.mark.timeout(3600)

# Dry-runs in flight at once: the API server validates on its own cores while this process
# draws and checks; more would only queue on a 2-core machine.
PARALLEL = 4


@pytest.fixture(scope="module")
def dry_run(local_cluster: LocalCluster) -> Iterator[DryRunClient]:
    install_crd(local_cluster)
    client = DryRunClient(local_cluster.kubeconfig)
    yield client
    client.close()


def test_fuzz_decision_models(tally: Tally, dry_run: DryRunClient) -> None:
    examples = draw_examples(decision_models(), EXAMPLES)
    bodies = [dumps(example.manifest) for example in examples]
    with ThreadPoolExecutor(PARALLEL) as pool:
        verdicts = list(pool.map(dry_run.create, bodies))
    for example, server in zip(examples, verdicts, strict=True):
        check_spec(tally, example, server)
    tally.count("broken fields per example (sum)", sum(len(e.broken) for e in examples))
    assert tally.counts["generated"] == EXAMPLES
    assert not tally.failed(), tally.summary()


def test_fuzz_examples_are_json(tally: Tally) -> None:
    # Every drawn manifest is sendable: the strategies never produce NaN or surrogates.
    for example in draw_examples(decision_models(), 20):
        json.loads(dumps(example.manifest))
    tally.count("generated", 20)
