"""The ``controller`` command and the settings flags shared with ``worker``; the user-facing
verbs are in ``controller/cli/verbs.py``."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from controller.reconciler.settings import ControllerSettings
from controller.temporal.client import TemporalSettings
from decisionmodel.rollout.settings import RolloutSettings


def rollout_settings(args: argparse.Namespace) -> RolloutSettings:
    """RolloutSettings from the environment, overridden by the reference operator's flags.

    The guards are enforced by the worker's activities (resolve, render); the controller uses the
    same settings to render the stable's objects when it restores them. Give both the same."""
    overrides: dict[str, Any] = {}
    if args.allowed_registries is not None:
        overrides["allowed_registries"] = [r for r in args.allowed_registries.split(",") if r]
    if args.allow_insecure_registries:
        overrides["allow_insecure_registries"] = True
    if args.allow_image_override:
        overrides["allow_image_override"] = True
    if args.ollaya_registry:
        overrides["ollaya_registry"] = args.ollaya_registry
    if args.ollaya_hf_endpoint:
        overrides["ollaya_hf_endpoint"] = args.ollaya_hf_endpoint
    return RolloutSettings(**overrides)


def add_guard_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allowed-registries", default=None, help="comma-separated hosts")
    p.add_argument("--allow-insecure-registries", action="store_true")
    p.add_argument("--allow-image-override", action="store_true")
    p.add_argument("--ollaya-registry", default=None)
    p.add_argument(
        "--ollaya-hf-endpoint", default=None, help="base URL for weight downloads (a HF mirror)"
    )


def controller_settings(args: argparse.Namespace) -> ControllerSettings:
    """ControllerSettings from the environment, overridden by the controller's flags."""
    overrides: dict[str, Any] = {}
    if args.watch_namespaces is not None:
        overrides["watch_namespaces"] = [n for n in args.watch_namespaces.split(",") if n]
    if args.max_concurrent_rollouts is not None:
        overrides["max_concurrent_rollouts"] = args.max_concurrent_rollouts
    if args.max_concurrent_reconciles is not None:
        overrides["workers"] = args.max_concurrent_reconciles
    if args.runtime_version_policy is not None:
        overrides["runtime_version_policy"] = args.runtime_version_policy
    if args.health_port is not None:
        overrides["health_port"] = args.health_port
    if args.leader_elect is not None:
        overrides["leader_election"] = args.leader_elect == "true"
    return ControllerSettings(**overrides)


def controller(args: argparse.Namespace) -> int:
    from controller.serve.process_memory import limit_malloc_arenas

    limit_malloc_arenas()  # before the watch threads and the SDK's threads start
    from controller.reconciler.manager import Manager
    from controller.serve.logs import configure_logging, log_format

    configure_logging(log_format(args))
    settings = controller_settings(args)
    rollout = rollout_settings(args)
    # NamespaceNotReady and the like end as one line with exit code 3 (controller/cli/main.py).
    return asyncio.run(Manager(settings, rollout, TemporalSettings.load()).run())


def _seconds(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


async def status_or_watch(ctx: Any) -> int:
    from controller.cli.verbs import status
    from controller.cli.verbs_act import watch_status

    return await (watch_status(ctx) if ctx.args.watch else status(ctx))


async def _report(ctx: Any) -> int:
    from controller.cli.verbs_report import report

    return await report(ctx)


async def _verify(ctx: Any) -> int:
    from controller.cli.verbs_verify import verify

    return await verify(ctx)


def add_commands(sub: Any) -> None:
    from controller.cli.pipeline import add_pipeline_commands
    from controller.cli.verbs import cli_entry

    _add_reading_verbs(sub)
    _add_acting_verbs(sub)
    _add_record_verbs(sub)
    _add_history(sub)
    add_pipeline_commands(sub, cli_entry)
    _add_controller_command(sub)


def _dm_verb(sub: Any, name: str, help: str, temporal: bool = True) -> argparse.ArgumentParser:
    """A verb on one DecisionModel: its name, the Kubernetes flags, Temporal's when it asks."""
    from controller.cli.context import add_kube_flags, add_temporal_flags

    p: argparse.ArgumentParser = sub.add_parser(name, help=help)
    p.add_argument("name", help="the DecisionModel")
    add_kube_flags(p)
    if temporal:
        add_temporal_flags(p)
    return p


def _add_reading_verbs(sub: Any) -> None:
    """get, status."""
    from controller.cli.context import add_kube_flags
    from controller.cli.output import add_output_flag
    from controller.cli.verbs import cli_entry, get

    ge = sub.add_parser("get", help="DecisionModels with phase, model, revision and age")
    ge.add_argument("name", nargs="?", default=None, help="one DecisionModel (default: all)")
    add_kube_flags(ge, all_namespaces=True)
    add_output_flag(ge)
    ge.set_defaults(func=cli_entry(get))

    st = _dm_verb(sub, "status", "phase, revisions, the running rollout and its UI link")
    add_output_flag(st)
    st.add_argument("-w", "--watch", action="store_true", help="live view until it settles")
    st.add_argument("--forever", action="store_true", help="with --watch: never stop")
    st.set_defaults(func=cli_entry(status_or_watch))


def _add_history(sub: Any) -> None:
    from controller.cli.context import add_kube_flags, add_temporal_flags
    from controller.cli.output import add_output_flag
    from controller.cli.verbs import cli_entry, history

    hi = sub.add_parser("history", help="past rollouts from Temporal visibility")
    hi.add_argument("name", nargs="?", default=None, help="one DecisionModel (default: all)")
    add_kube_flags(hi, all_namespaces=True)
    add_temporal_flags(hi)
    add_output_flag(hi)
    hi.set_defaults(func=cli_entry(history))


def _add_acting_verbs(sub: Any) -> None:
    """promote, reject, wait, abort, retry, undo."""
    from controller.cli.verbs import cli_entry, promote, reject
    from controller.cli.verbs_act import abort, retry, undo, wait

    pr = _dm_verb(sub, "promote", "approve the candidate awaiting promotion (bound approval)")
    pr.add_argument("--approval", default=None, help="default: the one the rollout expects")
    pr.set_defaults(func=cli_entry(promote))

    rj = _dm_verb(sub, "reject", "reject a candidate held on an inconclusive evaluation (bound)")
    rj.add_argument("--approval", default=None, help="default: the one the rollout expects")
    rj.set_defaults(func=cli_entry(reject))

    wa = _dm_verb(sub, "wait", "block until the rollout ends: 0 promoted, 1 rolled back, 8/9 held")
    wa.add_argument("--timeout", type=_seconds, default=600.0, help="seconds (default 600)")
    wa.set_defaults(func=cli_entry(wait))

    ab = _dm_verb(sub, "abort", "stop the running rollout and roll it back (the stable serves)")
    ab.add_argument("--reason", default="aborted from the CLI", help="recorded in history")
    ab.set_defaults(func=cli_entry(abort))

    _dm_verb(sub, "retry", "roll the failed revision out again", temporal=False).set_defaults(
        func=cli_entry(retry)
    )
    _dm_verb(
        sub, "undo", "roll back to the previous revision (a new rollout of it)", False
    ).set_defaults(func=cli_entry(undo))


def _add_record_verbs(sub: Any) -> None:
    """report, verify."""
    from controller.cli.output import add_output_flag
    from controller.cli.verbs import cli_entry

    what = "write the evaluation report: one HTML file (reliability diagram…)"
    re = _dm_verb(sub, "report", what)
    re.add_argument(
        "--revision", default=None, help="a past revision's evaluation, from its rollout's history"
    )
    re.add_argument(
        "-o",
        "--output",
        dest="output_file",
        default=None,
        metavar="FILE",
        help="where to write it (default: <name>-<revision>-report.html)",
    )
    re.set_defaults(func=cli_entry(_report))

    ve = _dm_verb(
        sub, "verify", "check the signed decision records: signatures, subjects, chain", False
    )
    ve.add_argument("--key", required=True, help="the records' public key (PEM)")
    ve.add_argument("--revision", default=None, help="show only this revision's records")
    ve.add_argument(
        "--records-namespace",
        default=None,
        help="where the records are (default: DMROLLOUT_DECISION_RECORDS_NAMESPACE, else "
        "dmrollout)",
    )
    add_output_flag(ve)
    ve.set_defaults(func=cli_entry(_verify))


def _add_controller_command(sub: Any) -> None:
    from controller.serve.logs import add_log_flag

    co = sub.add_parser("controller", help="run the controller (watches, dispatch, steady state)")
    co.add_argument("--watch-namespaces", default=None, help="comma-separated; empty = all")
    co.add_argument("--max-concurrent-rollouts", type=int, default=None)
    co.add_argument(
        "--max-concurrent-reconciles", type=int, default=None, help="DecisionModels at once"
    )
    co.add_argument("--runtime-version-policy", choices=["Pinned", "FollowOperator"], default=None)
    add_guard_flags(co)
    co.add_argument("--health-port", type=int, default=None)
    co.add_argument("--leader-elect", choices=["true", "false"], default=None)
    add_log_flag(co)
    co.set_defaults(func=controller)
