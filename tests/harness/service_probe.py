"""Traffic through a DecisionModel's Service, as its clients see it, probed at a steady pace.

The local cluster has no kube-proxy, so a probe does what kube-proxy would route: it reads the
Service's EndpointSlices (kept by the real kube-controller-manager from the selector and the
Pods' Ready condition, readiness gate included) and sends one decision to every ready endpoint
(the runtime simulator on the Pod's IP). A probe fails when the Service has no ready endpoint,
or when one of its ready endpoints does not answer a decision (each endpoint gets its share of
the traffic, so one failing endpoint means failed requests). Issue 34 counted the probes of a
post-promotion watch this way: 9 of 21 failed while all new Pods were failing.

The prober runs in a thread of its own: the tests' kubectl calls block their event loop, and
the pace of the probes must not depend on them. Its pause is the probe interval, not a wait
for something to happen.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from kubernetes import client as kube_client

from decisionmodel.engine.runtime_client import runtime_base_url
from kube.client import Kube

QUESTIONS: dict[str, Any] = {
    "team": {"type": "choice", "question": "Which team?", "criteria": ["billing", "tech"]},
}
# A decision that takes longer than this is a failed request to a client.
DECISION_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class Probe:
    at: float  # time.monotonic() when it was sent
    ok: bool
    detail: str  # the endpoints and what each answered, or why there were none


@dataclass
class ServiceProber:
    """Probe Service ``service`` in ``namespace`` every ``interval`` seconds. ``models`` maps a
    revision to the model its Pods serve (a Pod is named ``<dm>-<revision>-…``)."""

    kube: Kube
    namespace: str
    dm: str
    models: dict[str, str]
    interval: float = 1.0
    probes: list[Probe] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> ServiceProber:
        self._thread = threading.Thread(target=self._run, name="service-prober", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def since(self, moment: float) -> list[Probe]:
        return [p for p in list(self.probes) if p.at >= moment]

    def _run(self) -> None:
        discovery = kube_client.DiscoveryV1Api(self.kube.api_client)
        with httpx.Client(trust_env=False, timeout=DECISION_TIMEOUT_SECONDS) as http:
            while not self._stop.is_set():
                started = time.monotonic()
                self.probes.append(self._probe(discovery, http, started))
                # The pace of the probes: one every ``interval`` seconds, whatever one took.
                self._stop.wait(max(0.0, started + self.interval - time.monotonic()))

    def _probe(self, discovery: Any, http: httpx.Client, at: float) -> Probe:
        try:
            endpoints = self._ready_endpoints(discovery)
        except Exception as err:  # an API hiccup is no verdict on the Service: not counted
            return Probe(at, True, f"endpoints not read: {err}")
        if not endpoints:
            return Probe(at, False, "no ready endpoint")
        said = [f"{pod}: {self._decide(http, pod, ip)}" for pod, ip in endpoints]
        return Probe(at, all(s.endswith(": 200") for s in said), "; ".join(said))

    def _ready_endpoints(self, discovery: Any) -> list[tuple[str, str]]:
        slices = discovery.list_namespaced_endpoint_slice(
            self.namespace, label_selector=f"kubernetes.io/service-name={self.dm}"
        )
        found = []
        for endpoint_slice in slices.items:
            for ep in endpoint_slice.endpoints or []:
                if ep.conditions and ep.conditions.ready and ep.addresses:
                    pod = ep.target_ref.name if ep.target_ref else "?"
                    found.append((pod, ep.addresses[0]))
        return sorted(found)

    def _decide(self, http: httpx.Client, pod: str, ip: str) -> str:
        model = next(
            (m for rev, m in self.models.items() if pod.startswith(f"{self.dm}-{rev}-")), None
        )
        if model is None:
            return "a Pod of no known revision"
        request = {"model": model, "state": "my invoice is wrong", "questions": QUESTIONS}
        try:
            answer = http.post(f"{runtime_base_url(ip)}/v1/systemone", json=request)
        except httpx.HTTPError as err:
            return f"{type(err).__name__}"
        return str(answer.status_code)
