"""The ``dmrollout`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _cmd_crd(args: argparse.Namespace) -> int:
    from decisionmodel.crd import render_crd_yaml

    sys.stdout.write(render_crd_yaml())
    return 0


def _cmd_dev_up(args: argparse.Namespace) -> int:
    from localenv.devup import run_dev_up

    return run_dev_up(args.state_dir)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dmrollout",
        description="Safe, auditable rollout of decision models on Kubernetes, "
        "orchestrated by Temporal.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    crd = sub.add_parser("crd", help="print the DecisionModel CRD generated from the API types")
    crd.set_defaults(func=_cmd_crd)

    dev = sub.add_parser("dev", help="the local environment")
    dev_sub = dev.add_subparsers(dest="dev_command", required=True)
    up = dev_sub.add_parser(
        "up", help="start the local cluster, Temporal (with UI) and the simulators; Ctrl-C stops"
    )
    up.add_argument(
        "--state-dir", default=None, help="where state and logs go (default: a temp dir)"
    )
    up.set_defaults(func=_cmd_dev_up)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
