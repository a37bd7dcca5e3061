"""The ``dmrollout`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any


def _cmd_crd(args: argparse.Namespace) -> int:
    from decisionmodel.api.crd import render_crd_yaml

    sys.stdout.write(render_crd_yaml())
    return 0


def _local_env_dev_up() -> Callable[..., int]:
    """The local environment's entry point. It is not in the image (the Dockerfile copies only
    the runtime packages), so there `dev up` and `demo` name the fix instead of a bug."""
    try:
        from localenv.devup import run_dev_up
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in ("localenv", "simulators"):
            raise
        from controller.cli.errors import CliError, ExitCode

        raise CliError(
            ExitCode.SETUP,
            "the local environment (localenv/, simulators/) is not installed here (the image "
            "leaves it out): run `make dev-up` or `make demo` from a source checkout",
        ) from None
    return run_dev_up


def _cmd_dev_up(args: argparse.Namespace) -> int:
    return _local_env_dev_up()(args.state_dir)


def _cmd_demo(args: argparse.Namespace) -> int:
    return _local_env_dev_up()(args.state_dir, demo=True, once=args.once)


def _cmd_worker(args: argparse.Namespace) -> int:
    import asyncio

    from controller.serve.process_memory import limit_malloc_arenas

    limit_malloc_arenas()  # before the SDK's threads start
    from controller.cli.commands import rollout_settings
    from controller.serve.logs import configure_logging, log_format
    from controller.temporal.client import TemporalSettings
    from controller.worker.run import run_worker

    configure_logging(log_format(args))
    # NamespaceNotReady, PayloadKeysInvalid: one line, exit code 3 (controller/cli/errors.py).
    return asyncio.run(run_worker(TemporalSettings.load(), rollout_settings(args)))


def _cmd_temporal_setup(args: argparse.Namespace) -> int:
    import asyncio

    from controller.temporal.client import TemporalSettings, connect, setup_namespace

    async def run() -> list[str]:
        settings = TemporalSettings.load(
            address=args.address, namespace=args.temporal_namespace, profile=args.profile
        )
        args.where.temporal_address = settings.address
        args.where.temporal_namespace = settings.namespace
        return await setup_namespace(await connect(settings), settings)

    for line in asyncio.run(run()):
        print(line)
    return 0


def _cmd_codec_server(args: argparse.Namespace) -> int:
    import signal
    import threading
    from pathlib import Path

    from controller.temporal.client import TemporalSettings
    from controller.temporal.codec_server import CodecServer, CodecServerConfig, origin_of
    from controller.temporal.payload_codec import PayloadKeysInvalid

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    temporal = TemporalSettings()
    try:
        codec = temporal.payload_codec()
    except PayloadKeysInvalid as e:
        print(f"dmrollout codec-server: {e}", file=sys.stderr)
        return 3
    if codec is None:
        print(
            "dmrollout codec-server: no payload keys: set DMROLLOUT_TEMPORAL_PAYLOAD_KEYS_DIR "
            "and DMROLLOUT_TEMPORAL_PAYLOAD_KEY_ID as for the worker",
            file=sys.stderr,
        )
        return 3
    token = Path(args.auth_token_file).read_text().strip() if args.auth_token_file else None
    config = CodecServerConfig(
        bind=args.bind,
        port=args.port,
        origins=frozenset([origin_of(temporal.ui_url), *args.ui_origin]),
        namespace=temporal.namespace,
        token=token or None,
        tls_cert_file=Path(args.tls_cert_file) if args.tls_cert_file else None,
        tls_key_file=Path(args.tls_key_file) if args.tls_key_file else None,
    )
    server = CodecServer(codec, config).start()
    print(
        f"codec server on {args.bind}:{server.port} (keys {', '.join(codec.key_ids)}; "
        f"encrypting with {codec.current_key_id}) for {', '.join(sorted(config.origins))}",
        flush=True,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


def _add_codec_server(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    codec = sub.add_parser(
        "codec-server",
        help="serve the Temporal codec server protocol (POST /decode, /encode) so the Temporal "
        "UI and CLI show encrypted payloads decoded (keys from DMROLLOUT_TEMPORAL_PAYLOAD_*)",
    )
    codec.add_argument("--bind", default="127.0.0.1", help="whoever reaches it reads payloads")
    codec.add_argument("--port", type=int, default=8081)
    codec.add_argument(
        "--ui-origin",
        action="append",
        default=[],
        help="a browser origin allowed by CORS besides DMROLLOUT_TEMPORAL_UI_URL's (repeatable)",
    )
    codec.add_argument(
        "--auth-token-file", default=None, help="require `Authorization: Bearer <its content>`"
    )
    codec.add_argument("--tls-cert-file", default=None)
    codec.add_argument("--tls-key-file", default=None)
    codec.set_defaults(func=_cmd_codec_server)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dmrollout",
        description="Safe, auditable rollout of decision models on Kubernetes, "
        "orchestrated by Temporal.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    crd = sub.add_parser("crd", help="print the DecisionModel CRD generated from the API types")
    crd.set_defaults(func=_cmd_crd)
    _add_worker_and_temporal(sub)
    from controller.cli.commands import add_commands

    add_commands(sub)
    _add_codec_server(sub)
    _add_local(sub)
    completion = sub.add_parser("completion", help="print a shell completion script (bash, zsh)")
    completion.add_argument("shell", choices=["bash", "zsh"])
    completion.set_defaults(func=_cmd_completion)
    return parser


def _add_worker_and_temporal(sub: Any) -> None:
    """``worker`` and ``temporal setup``."""
    from controller.cli.commands import add_guard_flags
    from controller.cli.context import add_temporal_flags
    from controller.serve.logs import add_log_flag

    worker = sub.add_parser(
        "worker",
        help="run RolloutWorkflow and its activities (settings from DMROLLOUT_* and "
        "DMROLLOUT_TEMPORAL_* environment variables)",
    )
    add_guard_flags(worker)
    add_log_flag(worker)
    worker.set_defaults(func=_cmd_worker)

    temporal = sub.add_parser("temporal", help="Temporal namespace administration")
    temporal_sub = temporal.add_subparsers(dest="temporal_command", required=True)
    setup = temporal_sub.add_parser(
        "setup", help="register the rollout search attributes and check retention"
    )
    add_temporal_flags(setup)
    setup.set_defaults(func=_cmd_temporal_setup)


def _add_local(sub: Any) -> None:
    """``dev up`` and ``demo``: the local environment."""
    dev = sub.add_parser("dev", help="the local environment")
    dev_sub = dev.add_subparsers(dest="dev_command", required=True)
    up = dev_sub.add_parser(
        "up", help="start the local cluster, Temporal (with UI) and the simulators; Ctrl-C stops"
    )
    up.add_argument(
        "--state-dir", default=None, help="where state and logs go (default: a temp dir)"
    )
    up.set_defaults(func=_cmd_dev_up)

    demo = sub.add_parser(
        "demo",
        help="the local environment, worker and controller, and two sample rollouts "
        "(the second with evaluation); Ctrl-C stops everything",
    )
    demo.add_argument("--state-dir", default=None)
    demo.add_argument("--once", action="store_true", help="exit after the second promotion")
    demo.set_defaults(func=_cmd_demo)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dmrollout")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _cmd_completion(args: argparse.Namespace) -> int:
    from controller.cli.completion import completion_script

    sys.stdout.write(completion_script(build_parser(), args.shell))
    return 0


def main(argv: Sequence[str] | None = None, prog: str = "dmrollout") -> int:
    """Run one command. As a program (``argv`` None) it always leaves through ``os._exit``,
    whatever happened: seen here, the Temporal SDK's native runtime crashed while the
    interpreter tore it down (SIGABRT in ``PyGILState_Release``, SIGSEGV) after a command had
    finished, returned or raised. Every command has done its own cleanup when it gets here."""
    from controller.serve.process_memory import skip_httpx_cli

    skip_httpx_cli()  # before the parser's imports reach httpx
    code = _run(argv, prog)
    if argv is None:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _run(argv: Sequence[str] | None, prog: str) -> int:
    from controller.cli.errors import ExitCode, Where, debug_traceback, explain

    where = Where()
    parser = build_parser()
    parser.prog = prog
    try:
        args = parser.parse_args(argv)
        args.where = where
        return int(args.func(args))
    except SystemExit as e:  # argparse: usage errors (2), --help and --version (0)
        return e.code if isinstance(e.code, int) else ExitCode.USAGE
    except BaseException as e:
        failure = explain(e, where)
        trace = debug_traceback(e)
        if trace:
            sys.stderr.write(trace)
        print(f"{prog}: {failure.message}", file=sys.stderr)
        return int(failure.code)


def kubectl_main() -> int:
    """``kubectl dm …``: kubectl runs ``kubectl-dm`` from PATH with the rest of the line."""
    return main(None, prog="kubectl dm")


if __name__ == "__main__":
    raise SystemExit(main())
