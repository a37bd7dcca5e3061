"""What the CLI says when a command cannot do its job: one line, and an exit code per kind.

A person reads the line (what failed, where, the fix); a script reads the code. Tracebacks are
for bugs only, and only on request (``DMROLLOUT_DEBUG=1``).
"""

from __future__ import annotations

import enum
import os
import traceback
from dataclasses import dataclass, field
from typing import Final

import pydantic

from controller.temporal.client import SETUP_COMMAND, NamespaceNotReady
from controller.temporal.errors import Problem, problem_of
from controller.temporal.payload_codec import PayloadKeysInvalid
from kube.errors import Forbidden, KubeconfigInvalid, KubeError, NotFound, Unavailable

DEBUG_ENV: Final = "DMROLLOUT_DEBUG"
MAX_CAUSE_CHARS: Final = 200


class ExitCode(enum.IntEnum):
    """Documented in docs/operations.md ("Exit codes"); scripts may rely on them."""

    OK = 0
    FAILED = 1  # the command ran and the answer is "no": a rollout failed, an approval refused
    USAGE = 2  # a flag or a setting has a wrong value (argparse uses 2 too)
    SETUP = 3  # something must be set up first: kubeconfig, CA file, CRD, Temporal namespace
    NOT_FOUND = 4  # the DecisionModel or rollout does not exist
    UNREACHABLE = 5  # Temporal or the Kubernetes API server did not answer
    TIMED_OUT = 6  # `wait --timeout` ran out before the rollout ended
    DEGRADED = 7  # `wait`: nothing rolls out, and the stable serves Degraded
    HELD = 8  # `wait`: the rollout waits for a person (manual approval)
    BLOCKED = 9  # `wait`: a guard holds the rollout until its cause is fixed (reason on stderr)
    INTERNAL = 70  # a bug in dmrollout (EX_SOFTWARE): please report it
    INTERRUPTED = 130  # Ctrl-C


class CliError(Exception):
    """An expected failure, already phrased for a person."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Where:
    """The endpoints a command talks to, filled in as it connects: the failure line names them."""

    temporal_address: str | None = None
    temporal_namespace: str | None = None
    kube_server: str | None = None
    kubeconfig: str | None = None
    kube_context: str | None = None
    notes: list[str] = field(default_factory=list)

    def temporal(self) -> str:
        return f"Temporal at {self.temporal_address or '?'} (namespace {self.temporal_namespace})"

    def kube(self) -> str:
        config = f"kubeconfig {self.kubeconfig}" if self.kubeconfig else "default kubeconfig"
        context = f", context {self.kube_context}" if self.kube_context else ""
        return f"the Kubernetes API server {self.kube_server or '?'} ({config}{context})"


def short(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= MAX_CAUSE_CHARS else text[: MAX_CAUSE_CHARS - 1] + "…"


def explain(error: BaseException, where: Where) -> CliError:
    """The one line and the exit code for ``error``; an unknown error is a bug (INTERNAL)."""
    if isinstance(error, CliError):
        return error
    for check in (_temporal, _kube, _local):
        found = check(error, where)
        if found is not None:
            return found
    return CliError(
        ExitCode.INTERNAL,
        f"internal error ({type(error).__name__}: {short(error)}); this is a bug in dmrollout: "
        f"rerun with {DEBUG_ENV}=1 for the traceback and report it",
    )


def _temporal(error: BaseException, where: Where) -> CliError | None:
    if isinstance(error, NamespaceNotReady | PayloadKeysInvalid):
        return CliError(ExitCode.SETUP, short(error))
    found = problem_of(error)
    if found is None:
        return None
    fix = "set TEMPORAL_ADDRESS (or --address) and check that the server runs"
    said = {
        Problem.CONNECT: (
            ExitCode.UNREACHABLE,
            f"cannot reach {where.temporal()}: {_grpc_cause(error)}; {fix}",
        ),
        Problem.CONFIG: (
            ExitCode.SETUP,
            f"Temporal client configuration: {short(error)}; fix --profile / TEMPORAL_PROFILE "
            "or the config file (TEMPORAL_CONFIG_FILE)",
        ),
        Problem.UPDATE_NO_ANSWER: (
            ExitCode.UNREACHABLE,
            f"the rollout did not answer in time ({where.temporal()}): its worker may be busy "
            "or restarting; the approval may still be applied, `dmrollout status` shows it, "
            "and sending the same one again is harmless",
        ),
        Problem.NO_ANSWER: (ExitCode.UNREACHABLE, f"{where.temporal()} did not answer; {fix}"),
        Problem.REFUSED: (
            ExitCode.SETUP,
            f"{where.temporal()} refused the request ({found.status}): check the API key "
            "(TEMPORAL_API_KEY) or the mTLS client certificate and the namespace's permissions",
        ),
        Problem.NAMESPACE_MISSING: (
            ExitCode.SETUP,
            f"{where.temporal()}: the namespace does not exist; create it or set "
            "TEMPORAL_NAMESPACE",
        ),
        Problem.SEARCH_ATTRIBUTES: (
            ExitCode.SETUP,
            f"{where.temporal()}: {short(error)}; run `{SETUP_COMMAND}` once",
        ),
    }
    code, message = said[found.kind]
    return CliError(code, message)


def _grpc_cause(error: BaseException) -> str:
    text = str(error)
    for known in ("Connection refused", "timed out", "dns error", "certificate", "tls"):
        if known.lower() in text.lower():
            return known
    return short(error)


def _kube(error: BaseException, where: Where) -> CliError | None:
    fix = "check --kubeconfig / --context and that the cluster is up"
    if isinstance(error, Unavailable):
        return CliError(ExitCode.UNREACHABLE, f"cannot reach {where.kube()}; {fix}")
    if isinstance(error, KubeconfigInvalid):
        return CliError(
            ExitCode.SETUP,
            f"no usable Kubernetes configuration ({where.kubeconfig or 'in-cluster'}): "
            f"{short(error)}; set --kubeconfig (or "
            "KUBECONFIG) and --context",
        )
    if not isinstance(error, KubeError):
        return None
    if isinstance(error, Forbidden):
        return CliError(
            ExitCode.SETUP,
            f"{where.kube()} refused the request ({error.status} {error.reason}): your "
            "credentials lack the rights (RBAC) for DecisionModels in this namespace",
        )
    if isinstance(error, NotFound):
        return CliError(
            ExitCode.SETUP,
            f"{where.kube()} does not know DecisionModels: install the CRD "
            "(kubectl apply -k deploy/crd, or the Helm chart)",
        )
    return CliError(ExitCode.UNREACHABLE, f"{where.kube()} answered {error.status} {error.reason}")


def _local(error: BaseException, where: Where) -> CliError | None:
    if isinstance(error, OSError) and error.filename is not None:
        return CliError(
            ExitCode.SETUP,
            f"cannot read {error.filename}: {error.strerror or short(error)}; fix the path "
            "in the flag or environment variable that names it",
        )
    if isinstance(error, pydantic.ValidationError):
        first = error.errors()[0]
        name = ".".join(str(p) for p in first["loc"]) or "?"
        return CliError(
            ExitCode.USAGE,
            f"invalid setting {name}: {first['msg']} (given {first.get('input')!r}); fix the "
            "flag or its DMROLLOUT_* environment variable",
        )
    if isinstance(error, KeyboardInterrupt):
        return CliError(ExitCode.INTERRUPTED, "interrupted")
    return None


def debug_traceback(error: BaseException) -> str | None:
    """The traceback, when the user asked for it."""
    if os.environ.get(DEBUG_ENV, "") in ("", "0"):
        return None
    return "".join(traceback.format_exception(error))
