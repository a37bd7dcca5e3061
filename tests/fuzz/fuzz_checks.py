"""What the fuzz wall checks for each generated example, and how it counts the outcome.

- DecisionModel: pydantic (`DecisionModel.from_k8s`) and the API server (dry-run create) agree
  on accept/reject; each refusal names a field the example broke; an accepted object reads back
  from what the server would store as the same spec.
- Dataset: `parse_dataset` returns cases, each of which can be sent (the request body encodes
  as httpx encodes it), or raises a DmrolloutError; anything else is unhandled.
- Runtime answer: the RuntimeClient call returns or raises a DmrolloutError, and what it
  returned goes through the evaluation (`EvaluationProgress.add_case`, `finalize`, the
  heartbeat's JSON round trip) or the readiness verdict without raising.
"""

from __future__ import annotations

import asyncio
import json
import math
import traceback
from typing import Any

import httpx
from fuzz_apiserver import Verdict, dumps
from fuzz_strategies import FUZZ_CASE, RuntimeAnswer, SpecExample
from fuzz_tally import Tally

from decisionmodel.api import DecisionModel, DecisionModelInvalid
from decisionmodel.engine.runtime_client import RuntimeClient, verdict
from decisionmodel.errors import DmrolloutError
from decisionmodel.evaluation import EvaluationProgress, finalize, parse_dataset

# --- DecisionModels ---------------------------------------------------------------------------


def pydantic_verdict(manifest: dict[str, Any]) -> Verdict:
    try:
        dm = DecisionModel.from_k8s(json.loads(json.dumps(manifest)))
    except DecisionModelInvalid as err:
        return Verdict(accepted=False, errors=list(err.errors))
    return Verdict(accepted=True, stored={"spec": dm.spec.to_wire()})


def _parent(path: str) -> str:
    cut = max(path.rfind("."), path.rfind("["))
    return path[:cut] if cut > 0 else ""


def _under(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith((ancestor + ".", ancestor + "["))


def names_a_broken_field(errors: list[tuple[str, str]], broken: tuple[str, ...]) -> bool:
    """A refusal names one of the fields the example broke: an error at that field or below
    it, at its parent object or list (a rule over several fields, a duplicate list item), or a
    message that spells the field's path (the root rules on metadata.name)."""
    for path, message in errors:
        path = path.strip().lstrip(".")
        for field in broken:
            if field in message or _under(path, field):
                return True
            parent = _parent(field)
            if path and parent and _under(field, path) and len(path) >= len(parent):
                return True
    return False


def _too_deep(verdict: Verdict) -> bool:
    return any("nested deeper than" in message for _, message in verdict.errors)


def _undecodable(verdict: Verdict) -> bool:
    return any("cannot unmarshal number" in message for _, message in verdict.errors)


def check_spec(tally: Tally, example: SpecExample, server: Verdict) -> None:
    tally.count("generated")
    try:
        mine = pydantic_verdict(example.manifest)
    except Exception as err:
        tally.problem("UNHANDLED", _unhandled(err, dumps(example.manifest)))
        return
    tally.count("accepted by pydantic" if mine.accepted else "rejected by pydantic")
    tally.count("accepted by the API server" if server.accepted else "rejected by the API server")
    shown = json.dumps(example.manifest)[:600]
    if server.accepted and not mine.accepted and _too_deep(mine):
        # dmrollout's own limit (decisionmodel.api.MAX_NESTING): the API server has none this
        # low, the serialiser does. Refused naming the path; counted, not a disagreement.
        tally.count("refused by dmrollout as nested too deeply (the API server takes it)")
        return
    if mine.accepted != server.accepted:
        tally.problem(
            "DISAGREEMENTS",
            f"pydantic {'accepts' if mine.accepted else 'refuses: ' + mine.text()}; API server "
            f"{'accepts' if server.accepted else 'refuses: ' + server.text()}; object {shown}",
        )
        return
    tally.count("agreements")
    if not mine.accepted:
        for side, seen in (("pydantic", mine), ("API server", server)):
            if side == "API server" and _undecodable(seen):
                # Refused while decoding the request body, before any field is looked at: a
                # number beyond a float64 anywhere. Kubernetes names no field; pydantic does.
                tally.count("refused by the API server as undecodable (no field)")
                continue
            if not names_a_broken_field(seen.errors, example.broken):
                tally.problem(
                    "REFUSALS NOT NAMING A BROKEN FIELD",
                    f"{side}: {seen.text()[:400]}; broken {example.broken}; object {shown}",
                )
        return
    assert server.stored is not None
    try:
        stored = DecisionModel.from_k8s(server.stored).spec
    except DecisionModelInvalid as err:
        tally.problem("STORED OBJECT UNREADABLE", f"{err}; object {shown}")
        return
    if stored.to_wire() != (mine.stored or {}).get("spec"):
        # Passthrough numbers beyond int64 come back as floats: the same acceptance, another
        # value. Counted and shown, not a disagreement.
        tally.count("accepted, stored value differs")


# --- datasets ---------------------------------------------------------------------------------

_ENCODER = httpx.Client(base_url="http://runtime.invalid", trust_env=False)


def check_dataset(tally: Tally, raw: bytes, max_cases: int) -> None:
    tally.count("generated")
    try:
        cases = parse_dataset(raw, max_cases=max_cases)
        for case in cases:
            # As RuntimeClient.decide sends it: httpx's JSON encoder (no NaN, UTF-8).
            _ENCODER.build_request("POST", "/v1/systemone", json=case.request_body("laya:en"))
    except DmrolloutError as err:
        tally.count("typed errors")
        tally.reasons[err.reason] += 1
        return
    except Exception as err:
        tally.problem("UNHANDLED", _unhandled(err, raw))
        return
    tally.count("valid")
    tally.count("cases parsed", len(cases))


# --- runtime answers --------------------------------------------------------------------------


class _Scripted:
    """The MockTransport handler: answers every request with the current example."""

    answer: RuntimeAnswer | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert self.answer is not None
        return httpx.Response(
            self.answer.status, headers=list(self.answer.headers), content=self.answer.body
        )


class AnswerRig:
    """One RuntimeClient on a scripted transport and one event loop for every example."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.handler = _Scripted()
        self.sleeps: list[float] = []
        self.client = RuntimeClient(
            "http://10.1.2.3:11435",
            api_key="fuzz-key",
            transport=httpx.MockTransport(self.handler),
            sleep=self._sleep,
            queue_full_attempts=2,
        )
        (self.case,) = parse_dataset(FUZZ_CASE)

    async def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())

    async def _use(self, answer: RuntimeAnswer) -> str:
        """Call the endpoint and feed its result to what consumes it in the worker."""
        if answer.endpoint == "decide":
            data = await self.client.decide("laya:en", self.case.state, self.case.questions)
            progress = EvaluationProgress(dataset_digest="d" * 64)
            progress.add_case(self.case, data.get("answers"))
            figures = finalize(progress)
            heartbeat = json.dumps(progress.model_dump(mode="json"), allow_nan=False)
            EvaluationProgress.model_validate(json.loads(heartbeat))
            return f"scored ({figures.correct}/{figures.pairs} correct)"
        if answer.endpoint == "ps":
            entry = await self.client.inspect("laya:en")
            verdict("c" * 64, "cpu", entry, None)
            return "inspected"
        if answer.endpoint == "warmup":
            result = await self.client.warmup("laya:en")
            json.dumps(result.model_dump(mode="json"), allow_nan=False)
            return "warmed up"
        await self.client.version()
        return "version read"

    def check(self, tally: Tally, answer: RuntimeAnswer) -> None:
        tally.count("generated")
        tally.count(f"generated: {answer.endpoint}")
        self.handler.answer = answer
        self.sleeps.clear()
        try:
            outcome = self.loop.run_until_complete(self._use(answer))
        except DmrolloutError as err:
            tally.count("typed errors")
            tally.reasons[err.reason] += 1
            return
        except Exception as err:
            tally.problem("UNHANDLED", _unhandled(err, answer.body, answer.endpoint))
            return
        finally:
            for seconds in self.sleeps:
                if not (math.isfinite(seconds) and 0 <= seconds <= 10):
                    tally.problem("BAD RETRY WAIT", f"slept {seconds!r} for {answer.headers}")
        tally.count("valid")
        tally.count(f"valid: {outcome.split(' (')[0]}")


def _unhandled(err: BaseException, raw: bytes, where: str = "") -> str:
    frame = traceback.extract_tb(err.__traceback__)[-1]
    head = raw[:160]
    return (
        f"{where} {type(err).__name__}: {str(err)[:200]} at {frame.filename.rsplit('/', 1)[-1]}:"
        f"{frame.lineno} ({frame.name}); input {len(raw)} bytes starting {head!r}"
    )


__all__ = ["AnswerRig", "check_dataset", "check_spec", "pydantic_verdict"]
