"""The reliability diagram as inline SVG: per confidence bin, a bar up to the bin's accuracy,
a dot at its mean confidence, the diagonal of perfect calibration, and the pair count.

The gap between a bar's top and the diagonal under its dot is what ECE averages (weighted by
the counts), so the picture and the number can be checked against each other.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Final

from decisionmodel.api.status import ReliabilityBinStatus
from decisionmodel.evaluation.intervals import wilson, z_of

SIZE: Final = 360  # plot square, in SVG units
LEFT: Final = 48
TOP: Final = 28
BOTTOM: Final = 44


def _x(value: float) -> float:
    return LEFT + value * SIZE


def _y(value: float) -> float:
    return TOP + (1.0 - value) * SIZE


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def reliability_svg(
    bins: list[ReliabilityBinStatus],
    ece: str | None,
    baseline: list[ReliabilityBinStatus] | None = None,
    confidence: float = 0.95,
) -> str:
    """The diagram of ``bins`` (equal width over [0, 1]); ``baseline`` adds the stable's dots."""
    width, height = LEFT + SIZE + 24, TOP + SIZE + BOTTOM
    parts = [
        f'<svg id="reliability" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Reliability diagram, ECE {ece or "-"}">',
        f"<title>Reliability diagram (ECE {ece or '-'})</title>",
        f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{SIZE}" height="{SIZE}" '
        'fill="#fafafa" stroke="#999"/>',
        *_grid(),
        *_bars(bins),
        *_whiskers(bins, confidence),
        f'<line class="diagonal" x1="{_x(0)}" y1="{_y(0)}" x2="{_x(1)}" y2="{_y(1)}" '
        'stroke="#c0392b" stroke-dasharray="6 4"/>',
        *_dots(bins, "confidence", "#1f4e79"),
        *(_dots(baseline, "baseline", "#e67e22") if baseline else []),
        f'<text class="ece" x="{LEFT + 8}" y="{TOP + 18}" font-size="14" '
        f'font-family="sans-serif">ECE {ece or "-"}</text>',
        f'<text x="{LEFT + SIZE / 2}" y="{height - 8}" text-anchor="middle" font-size="12" '
        'font-family="sans-serif">confidence</text>',
        f'<text x="14" y="{TOP + SIZE / 2}" text-anchor="middle" font-size="12" '
        f'font-family="sans-serif" transform="rotate(-90 14 {TOP + SIZE / 2})">accuracy</text>',
        "</svg>",
    ]
    return "\n".join(parts)


def _grid() -> list[str]:
    out = []
    for tick in range(0, 11, 2):
        v = tick / 10
        out.append(
            f'<line class="tick" x1="{_x(v)}" y1="{_y(0)}" x2="{_x(v)}" y2="{_y(0) + 4}" '
            'stroke="#999"/>'
        )
        out.append(
            f'<text x="{_x(v)}" y="{_y(0) + 16}" text-anchor="middle" font-size="10" '
            f'font-family="sans-serif">{_num(v)}</text>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{_y(v) + 3}" text-anchor="end" font-size="10" '
            f'font-family="sans-serif">{_num(v)}</text>'
        )
    return out


def _bars(bins: list[ReliabilityBinStatus]) -> list[str]:
    out = []
    width = 1.0 / len(bins) if bins else 0.0
    for i, b in enumerate(bins):
        if not b.count:
            continue
        accuracy = b.correct / b.count
        x, top = _x(i * width), _y(accuracy)
        bar_w = width * SIZE - 2
        out.append(
            f'<rect class="bar" data-bin="{i}" data-count="{b.count}" x="{x + 1:.1f}" '
            f'y="{top:.1f}" width="{bar_w:.1f}" height="{_y(0) - top:.1f}" fill="#7fb3d5" '
            f'stroke="#2e86c1"><title>bin {i}: {b.correct}/{b.count} right '
            f"(accuracy {accuracy:.4f})</title></rect>"
        )
        # Inside the bar's foot: above its top it would sit on the bin's dot.
        out.append(
            f'<text class="count" x="{x + width * SIZE / 2:.1f}" y="{_y(0) - 6:.1f}" '
            f'text-anchor="middle" font-size="10" font-family="sans-serif">n={b.count}</text>'
        )
    return out


def _whiskers(bins: list[ReliabilityBinStatus], confidence: float) -> list[str]:
    """Each bin's accuracy interval as a vertical line across the bar's top."""
    out = []
    z = z_of(confidence)
    width = 1.0 / len(bins) if bins else 0.0
    for i, b in enumerate(bins):
        if not b.count:
            continue
        lower, upper = wilson(b.correct, b.count, z)
        x = _x((i + 0.5) * width)
        out.append(
            f'<line class="interval" data-bin="{i}" x1="{x:.1f}" y1="{_y(lower):.1f}" '
            f'x2="{x:.1f}" y2="{_y(upper):.1f}" stroke="#154360" stroke-width="1.5">'
            f"<title>bin {i}: accuracy in [{lower:.4f}, {upper:.4f}]</title></line>"
        )
    return out


def _dots(bins: list[ReliabilityBinStatus], css: str, colour: str) -> list[str]:
    out = []
    for i, b in enumerate(bins):
        if not b.count or b.confidence_sum is None:
            continue
        confidence = float(Decimal(b.confidence_sum) / b.count)
        accuracy = b.correct / b.count
        out.append(
            f'<circle class="{css}" data-bin="{i}" cx="{_x(confidence):.1f}" '
            f'cy="{_y(accuracy):.1f}" r="4" fill="{colour}"><title>mean confidence '
            f"{confidence:.4f}, accuracy {accuracy:.4f}</title></circle>"
        )
    return out
