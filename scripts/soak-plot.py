#!/usr/bin/env python3
"""Draw scripts/soak.sh's samples as a self-contained SVG.

Usage: soak-plot.py SAMPLES.csv OUT.svg

Three panels, one line per mode (bridge, host) against seconds since the mode
started: the daemon's RSS in MiB, and the release lateness in microseconds
(p50 and p99 of the recent hand-overs, solid and dashed, on a log scale),
and the dynamic scheduler instances and queues that the masks made.
Python's standard library only, so that a plot needs nothing installed.
"""

import csv
import math
import sys
from xml.sax.saxutils import escape

W, H = 760, 250
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 30, 40
COLOURS = {"bridge": "#1f77b4", "host": "#d62728"}


def read(path):
    series = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                point = {
                    "t": float(row["t_s"]),
                    "rss": float(row["rss_kb"]) / 1024.0,
                    "p50": float(row["late_p50_us"]),
                    "p99": float(row["late_p99_us"]),
                    "instances": float(row.get("instances") or 0),
                    "queues": float(row.get("queues") or 0),
                }
            except (KeyError, ValueError) as e:
                print(f"soak-plot: skipping a bad row of {path}: {e}", file=sys.stderr)
                continue
            series.setdefault(row["mode"], []).append(point)
    return series


def panel(y0, title, series, keys, label, log):
    """One chart at vertical offset y0: an <g> of axes, ticks and lines."""
    pts = [p for s in series.values() for p in s]
    tmax = max((p["t"] for p in pts), default=1.0) or 1.0
    vals = [p[k] for p in pts for k in keys]
    if log:
        vals = [max(v, 0.1) for v in vals]
        lo = math.floor(math.log10(min(vals, default=1.0)))
        hi = math.ceil(math.log10(max(vals, default=10.0)))
        hi = max(hi, lo + 1)
        tr = lambda v: (math.log10(max(v, 0.1)) - lo) / (hi - lo)
        ticks = [(10.0**e, f"{10.0**e:g}") for e in range(lo, hi + 1)]
    else:
        top = max(vals, default=1.0) * 1.1 or 1.0
        tr = lambda v: v / top
        step = 10 ** math.floor(math.log10(top / 2)) if top > 0 else 1
        ticks = [(i * step, f"{i * step:g}") for i in range(int(top / step) + 1)]
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    x = lambda t: LEFT + pw * t / tmax
    y = lambda v: y0 + TOP + ph * (1 - tr(v))
    out = [f'<text x="{LEFT}" y="{y0 + 18}" font-weight="bold">{escape(title)}</text>']
    out.append(
        f'<rect x="{LEFT}" y="{y0 + TOP}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>'
    )
    for v, text in ticks:
        yy = y(v)
        out.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">{text}</text>')
    tstep = 10 ** math.floor(math.log10(tmax)) if tmax >= 1 else 1
    if tmax / tstep < 4:
        tstep /= 2
    t = 0.0
    while t <= tmax:
        out.append(f'<text x="{x(t):.1f}" y="{y0 + H - BOTTOM + 16}" text-anchor="middle">{t:g}</text>')
        t += tstep
    out.append(
        f'<text x="{LEFT + pw / 2}" y="{y0 + H - 6}" text-anchor="middle">seconds since the mode started</text>'
    )
    out.append(
        f'<text transform="translate(16,{y0 + TOP + ph / 2}) rotate(-90)" text-anchor="middle">{escape(label)}</text>'
    )
    for mode, s in series.items():
        colour = COLOURS.get(mode, "#2ca02c")
        for k, dash in zip(keys, ["", ' stroke-dasharray="5,3"']):
            path = " ".join(f"{x(p['t']):.1f},{y(p[k]):.1f}" for p in s)
            out.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>'
            )
    for i, mode in enumerate(series):
        lx, ly = LEFT + pw - 170 + 90 * i, y0 + 18
        out.append(f'<line x1="{lx}" x2="{lx + 20}" y1="{ly - 4}" y2="{ly - 4}" stroke="{COLOURS.get(mode, "#2ca02c")}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 26}" y="{ly}">{escape(mode)}</text>')
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        print("usage: soak-plot.py SAMPLES.csv OUT.svg", file=sys.stderr)
        return 2
    series = read(sys.argv[1])
    if not series:
        print(f"soak-plot: no samples in {sys.argv[1]}", file=sys.stderr)
        return 1
    body = [
        panel(0, "daemon RSS", series, ["rss"], "MiB", log=False),
        panel(H, "release lateness (p50 solid, p99 dashed)", series, ["p50", "p99"], "µs", log=True),
        panel(
            2 * H,
            "dynamic instances (solid), queues (dashed)",
            series,
            ["instances", "queues"],
            "count",
            log=False,
        ),
    ]
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{len(body) * H}" '
        f'font-family="sans-serif" font-size="12">\n'
        f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n"
    )
    with open(sys.argv[2], "w") as f:
        f.write(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
