"""``dmrollout verify``: check a DecisionModel's signed decision records offline.

Reads the records (ConfigMaps in the records namespace) and checks, with the public key the
platform team gives: each signature (a record altered by one byte, or signed by another key,
fails and says which), each subject (the model digest the record names), and the chain (each
record names the previous one; the newest is the one the DecisionModel's status names, when it
still exists). No Temporal: records outlive the workflow history and the DecisionModel.
Exit 0 when everything verifies, 1 naming each problem otherwise, 4 when there is no record.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

from controller.cli.context import CliContext
from controller.cli.errors import CliError, ExitCode
from controller.cli.output import emit_data
from decisionmodel.records.chain import ChainReport, StoredRecord, verify_chain
from decisionmodel.records.dsse import RecordProblem, key_id, load_public_key
from decisionmodel.rollout.settings import RolloutSettings
from kube import decision_records as store
from kube.client import Kube
from kube.errors import Forbidden, KubeError, NotFound

DEFAULT_RECORDS_NAMESPACE = "dmrollout"


async def verify(ctx: CliContext) -> int:
    args = ctx.args
    namespace = ctx.namespace()
    records_ns = (
        args.records_namespace
        or RolloutSettings().decision_records_namespace
        or DEFAULT_RECORDS_NAMESPACE
    )
    key = _public_key(args.key)
    kube = ctx.kube()
    chains = await Kube.run(_chains, kube, records_ns, namespace, args.name)
    if not chains:
        raise CliError(
            ExitCode.NOT_FOUND,
            f"no decision record of {namespace}/{args.name} in {records_ns} (records are "
            "written with decisionRecords.enabled; --records-namespace names another)",
        )
    heads = await Kube.run(_head, kube, namespace, args.name)
    reports = {uid: verify_chain(s, key, heads.get(uid)) for uid, s in chains.items()}
    shown = _view(reports, args.revision, key_id(key))
    if args.revision and not any(c["records"] for c in shown):
        raise CliError(
            ExitCode.NOT_FOUND, f"no decision record of revision {args.revision} of {args.name}"
        )
    if not emit_data(shown, args.output):
        _print(shown, namespace, args.name, records_ns)
    return ExitCode.OK if all(r.ok for r in reports.values()) else ExitCode.FAILED


def _public_key(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except OSError as e:
        raise CliError(ExitCode.USAGE, f"--key {path}: {e.strerror}") from None
    try:
        return load_public_key(pem)
    except RecordProblem as e:
        raise CliError(ExitCode.USAGE, f"--key {path}: {e}") from None


def _chains(
    kube: Kube, records_ns: str, namespace: str, name: str
) -> dict[str, list[StoredRecord]]:
    """The records of ``namespace/name`` by DecisionModel uid (a re-created one has its own)."""
    selector = {store.LABEL_NAMESPACE: namespace, store.LABEL_NAME: name}
    try:
        found = store.list_records(kube, records_ns, selector)
    except Forbidden:
        raise CliError(
            ExitCode.SETUP, f"you may not list ConfigMaps in the records namespace {records_ns}"
        ) from None
    except NotFound:
        raise CliError(
            ExitCode.NOT_FOUND, f"the records namespace {records_ns} does not exist"
        ) from None
    chains: dict[str, list[StoredRecord]] = defaultdict(list)
    for labels, record in found:
        chains[labels.get(store.LABEL_UID, "")].append(record)
    return dict(chains)


def _head(kube: Kube, namespace: str, name: str) -> dict[str, tuple[int, str]]:
    """The newest record the live DecisionModel's status names, by its uid (none once it is
    deleted: the chain alone is checked then)."""
    try:
        obj = kube.read_dm(namespace, name)
    except KubeError:
        return {}
    head = ((obj or {}).get("status") or {}).get("decisionRecord")
    if not obj or not head:
        return {}
    return {obj["metadata"]["uid"]: (int(head["sequence"]), str(head["digest"]))}


def _view(
    reports: dict[str, ChainReport], revision: str | None, keyid: str
) -> list[dict[str, Any]]:
    return [
        {
            "uid": uid,
            "verified": report.ok,
            "keyid": keyid,
            "problems": report.problems,
            "records": [
                {
                    "sequence": r.predicate.sequence,
                    "name": r.name,
                    "digest": r.digest,
                    "line": r.line(),
                    "predicate": r.predicate.model_dump(mode="json", by_alias=True),
                }
                for r in report.records
                if revision is None or r.predicate.revision.hash == revision
            ],
        }
        for uid, report in reports.items()
    ]


def _print(shown: list[dict[str, Any]], namespace: str, name: str, records_ns: str) -> None:
    for chain in shown:
        verdict = "verified" if chain["verified"] else "NOT verified"
        print(
            f"decision records of {namespace}/{name} (uid {chain['uid']}) in {records_ns}: "
            f"{verdict} with key {chain['keyid'][:16]}…"
        )
        for r in chain["records"]:
            print(f"  {r['line']}")
        for p in chain["problems"]:
            print(f"  problem: {p}", file=sys.stderr)
