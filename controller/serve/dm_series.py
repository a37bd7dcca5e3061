"""The per-DecisionModel series of seed 004, kept as plain numbers and exported on each scrape.

Why not prometheus_client's labelled children: each child carries locks and value objects, and
``decisionmodel_phase_duration_seconds`` alone is 11 phases x 12 samples per DecisionModel. At
1,000 DecisionModels the children were ~35 MiB of the controller (issue 14: controller + worker
< 400 MB). Here one DecisionModel is a few small dicts of floats,
and a collector builds the families when the registry is collected. The text is the same: the
same names, labels, bucket bounds and no ``_created`` samples.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

DMKey = tuple[str, str]
# A promotion is identified by (stable hash, lastPromotionTime), a failure by (failed hash,
# failedAt): see controller/serve/metrics.py.
EventKey = tuple[str | None, str | None]

_DM_LABELS: Final = ["namespace", "name"]


def _le(bound: float) -> str:
    """A bucket bound as prometheus_client writes it: 5 -> "5.0", inf -> "+Inf"."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


@dataclass
class Durations:
    """One histogram: a count per bucket (not cumulative; the last is +Inf), sum and count."""

    per_bucket: list[int]
    total: float = 0.0

    def observe(self, bounds: tuple[float, ...], seconds: float) -> None:
        index = next((i for i, b in enumerate(bounds) if seconds <= b), len(bounds))
        self.per_bucket[index] += 1
        self.total += seconds

    def cumulative(self, bounds: tuple[float, ...]) -> list[tuple[str, float]]:
        out, running = [], 0
        for bound, n in zip((*bounds, float("inf")), self.per_bucket, strict=True):
            running += n
            out.append((_le(bound), float(running)))
        return out


@dataclass
class DMSeries:
    """Every series value of one DecisionModel, and what is remembered to count once."""

    phase: str | None = None
    gauges: dict[str, float] = field(default_factory=dict)  # family name -> value
    counters: dict[tuple[str, str], float] = field(default_factory=dict)  # (family, label)
    durations: dict[str, Durations] = field(default_factory=dict)  # phase left -> histogram
    last_promotion: EventKey | None = None
    last_failure: EventKey | None = None


@dataclass(frozen=True)
class CounterSpec:
    name: str  # without _total
    help: str
    label: str  # the label beside namespace and name


class DMSeriesCollector:
    """The per-DecisionModel families, built from ``DMSeries`` on collect.

    Recorded from the event loop, collected from the metrics server's thread: both under one
    lock (a scrape copies what it renders)."""

    def __init__(
        self,
        phases: tuple[str, ...],
        phase_help: str,
        gauges: dict[str, str],
        counters: tuple[CounterSpec, ...],
        durations: tuple[str, str, tuple[float, ...]],
    ) -> None:
        self.lock = threading.Lock()
        self.series: dict[DMKey, DMSeries] = {}
        self._phases, self._phase_help = phases, phase_help
        self._gauges, self._counters = gauges, counters
        self._durations = durations

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            items = sorted(self.series.items())
            phase = GaugeMetricFamily(
                "decisionmodel_phase", self._phase_help, labels=[*_DM_LABELS, "phase"]
            )
            gauges = {
                n: GaugeMetricFamily(n, h, labels=_DM_LABELS) for n, h in self._gauges.items()
            }
            counters = {
                c.name: CounterMetricFamily(c.name, c.help, labels=[*_DM_LABELS, c.label])
                for c in self._counters
            }
            name, doc, bounds = self._durations
            durations = HistogramMetricFamily(name, doc, labels=[*_DM_LABELS, "phase"])
            for (ns, dm), s in items:
                if s.phase is not None:
                    for p in self._phases:
                        phase.add_metric([ns, dm, p], 1.0 if p == s.phase else 0.0)
                for family, value in s.gauges.items():
                    gauges[family].add_metric([ns, dm], value)
                for (family, label), value in s.counters.items():
                    counters[family].add_metric([ns, dm, label], value)
                for left, d in s.durations.items():
                    durations.add_metric([ns, dm, left], d.cumulative(bounds), d.total)
        yield phase
        yield from gauges.values()
        yield durations
        yield from counters.values()


__all__ = ["CounterSpec", "DMKey", "DMSeries", "DMSeriesCollector", "Durations", "EventKey"]
