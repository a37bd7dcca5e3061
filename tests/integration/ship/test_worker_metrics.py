"""The worker's metrics endpoints, as shipped by deploy/ (kustomize) and the chart.

`dmrollout worker` runs the Temporal SDK's exporter of temporal_* series on
DMROLLOUT_TEMPORAL_METRICS_BIND_ADDRESS, its probes (and, with plain metrics, its own
decisionmodel_registry_resolve_duration_seconds) on DMROLLOUT_WORKER_METRICS_PORT, and, with
secure metrics (the default), both kinds of series over HTTPS on DMROLLOUT_METRICS_PORT. Secure:
the SDK's plain exporter is bound to loopback only, and the Service exposes `https` alone.
Plain (metrics.secure=false, opt-in): both ports bind 0.0.0.0 and must differ; each rendering
sets the variable, exposes the port under that name on the container and the worker metrics
Service, and (chart) scrapes it.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from harness.shipped import ALL_ON_VALUES, CHART, helm_template, kustomize, render_chart
from prometheus_client import start_http_server

from controller.worker.run import WorkerMetrics

RESOLVE_SERIES = "decisionmodel_registry_resolve_duration_seconds"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("helm")
    return {
        "kustomize": kustomize(),
        "chart-default": render_chart(tmp=tmp),
        "chart-all-on": render_chart("-f", str(ALL_ON_VALUES), tmp=tmp),
        "chart-plain": render_chart("--set", "metrics.secure=false", tmp=tmp),
    }


def _one(objs: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    (obj,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    return obj


def _worker_container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = _one(objs, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"]
    return dict(c)


@pytest.mark.parametrize("name", ["kustomize", "chart-default", "chart-all-on"])
def test_secure_worker_metrics_are_https_only_and_the_sdk_stays_on_loopback(
    name: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    objs = rendered[name]
    c = _worker_container(objs)
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert set(ports) == {"health", "https"}
    assert env["DMROLLOUT_METRICS_SECURE"] == "true"
    assert int(env["DMROLLOUT_METRICS_PORT"]) == ports["https"]
    sdk_host, _, sdk_port = env["DMROLLOUT_TEMPORAL_METRICS_BIND_ADDRESS"].rpartition(":")
    assert sdk_host == "127.0.0.1"
    assert int(sdk_port) not in ports.values()
    assert int(env["DMROLLOUT_WORKER_METRICS_PORT"]) == ports["health"]
    service = _one(objs, "Service", "-worker-metrics")
    assert {(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        ("https", ports["https"], "https"),
    }


def test_plain_worker_metrics_keep_both_endpoints_on_distinct_ports(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    objs = rendered["chart-plain"]
    c = _worker_container(objs)
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    sdk_host, _, sdk_port = env["DMROLLOUT_TEMPORAL_METRICS_BIND_ADDRESS"].rpartition(":")
    assert (sdk_host, int(sdk_port)) == ("0.0.0.0", ports["metrics"])
    assert int(env["DMROLLOUT_WORKER_METRICS_PORT"]) == ports["dm-metrics"]
    assert ports["dm-metrics"] != ports["metrics"]
    service = _one(objs, "Service", "-worker-metrics")
    assert {(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        ("metrics", ports["metrics"], "metrics"),
        ("dm-metrics", ports["dm-metrics"], "dm-metrics"),
    }


def test_kustomize_and_chart_defaults_use_the_same_ports(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    def ports(objs: list[dict[str, Any]]) -> dict[str, int]:
        return {p["name"]: p["containerPort"] for p in _worker_container(objs)["ports"]}

    assert ports(rendered["kustomize"]) == ports(rendered["chart-default"])
    assert ports(rendered["chart-default"]) == {"health": 9465, "https": 8443}
    # all-on moves them, so a template that hard-codes a port fails above.
    assert ports(rendered["chart-all-on"]) == {"health": 9466, "https": 9443}
    assert ports(rendered["chart-plain"]) == {"metrics": 9090, "dm-metrics": 9465}


def test_service_monitor_scrapes_the_worker_over_https(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    monitor = _one(rendered["chart-all-on"], "ServiceMonitor", "")
    endpoint = {e["port"]: e for e in monitor["spec"]["endpoints"]}["https"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["scheme"] == "https"
    assert endpoint["honorLabels"] is True


def test_chart_refuses_one_port_for_both(tmp_path: Path) -> None:
    result = helm_template("--set", "worker.resolveMetricsPort=9090", tmp=tmp_path, check=False)
    assert result.returncode != 0
    assert "worker.metricsPort and worker.resolveMetricsPort must differ" in result.stderr


def test_the_port_serves_the_series_the_dashboard_reads() -> None:
    """What sits behind dm-metrics: WorkerMetrics' registry over prometheus_client, as
    run_worker starts it (here on loopback and an ephemeral port)."""
    metrics = WorkerMetrics()
    metrics.observe_resolve(0.3)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=metrics.registry)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        # No proxy from the environment: loopback only.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=5) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
        thread.join(timeout=5)
    # Default buckets …, 0.25, 0.5, …: 0.3 s lands in le="0.5", not in le="0.25".
    assert f'{RESOLVE_SERIES}_bucket{{le="0.25"}} 0.0' in text
    assert f'{RESOLVE_SERIES}_bucket{{le="0.5"}} 1.0' in text
    assert f"{RESOLVE_SERIES}_count 1.0" in text
    assert f"{RESOLVE_SERIES}_sum 0.3" in text
    dashboard = json.loads((CHART / "dashboards" / "dmrollout.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert any(f"{RESOLVE_SERIES}_bucket" in e for e in exprs)
