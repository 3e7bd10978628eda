"""The report's trend: each run `report --history FILE` recorded (one JSON line a run: the time, the commit, and per
target the counts and the findings' fingerprints), drawn as an inline SVG chart a target, blockers and warnings
over the runs; and what is new and what was fixed since the run before this one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from portcheck.findings import ScanResult, Severity

HISTORY_VERSION = 1
WIDTH, HEIGHT, PAD = 600, 170, 28
_SPAN = WIDTH - 2 * PAD


def run_record(results: list[ScanResult], time: str, commit: str | None) -> dict[str, Any]:
    """This run as one history line: per target its counts and its findings' fingerprints."""
    targets = {}
    for result in results:
        counts = {s: sum(1 for f in result.findings if f.severity == s) for s in Severity}
        targets[result.target.chip] = {
            "errors": counts[Severity.ERROR], "warnings": counts[Severity.WARNING], "infos": counts[Severity.INFO],
            "files": result.files, "fingerprints": sorted({f.fingerprint for f in result.findings}),
        }
    return {"version": HISTORY_VERSION, "time": time, "commit": commit, "targets": targets}


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    value: int
    run: int  # its line in the history, from 1
    label: str  # when and at which commit


@dataclass(frozen=True)
class Series:
    name: str  # "blockers", "warnings"
    severity: str  # its colour's name
    points: list[Point]

    @property
    def polyline(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)


@dataclass(frozen=True)
class Chart:
    chip: str
    series: list[Series]
    top: int  # the value at the top of the chart
    ticks: list[tuple[float, int]]  # (y, value) of the horizontal rules


@dataclass
class Trend:
    runs: int
    charts: list[Chart]
    previous: str = ""  # the run compared with: its label, or "" for the first run
    new: dict[str, list[str]] = field(default_factory=dict)  # per chip, the fingerprints found since then
    fixed: dict[str, int] = field(default_factory=dict)  # per chip, how many of its findings are gone


def _label(record: dict[str, Any]) -> str:
    commit = record.get("commit")
    return f"{record.get('time', '')}" + (f" at {str(commit)[:12]}" if commit else "")


def trend(records: list[dict[str, Any]], chips: list[str]) -> Trend:
    """The trend of every run recorded, this one last (`records` already checked: commands/history.py)."""
    charts = []
    n = len(records)
    for chip in chips:
        values = {name: [int(r["targets"].get(chip, {}).get(key, 0)) for r in records]
                  for name, key in (("blockers", "errors"), ("warnings", "warnings"))}
        top = max(1, *(v for series in values.values() for v in series))

        def x(i: int) -> float:
            return PAD + (_SPAN * i / (n - 1) if n > 1 else _SPAN / 2)

        def y(v: int, top: int = top) -> float:
            return HEIGHT - PAD - (HEIGHT - 2 * PAD) * v / top

        series = [Series(name, severity, [Point(x(i), y(v), v, i + 1, _label(records[i])) for i, v in
                                          enumerate(values[name])])
                  for name, severity in (("blockers", "error"), ("warnings", "warning"))]
        ticks = [(y(v), v) for v in sorted({0, top // 2, top})]
        charts.append(Chart(chip, series, top, ticks))
    shown = Trend(n, charts)
    if n >= 2:
        before, now = records[-2], records[-1]
        shown.previous = _label(before)
        for chip in chips:
            was = set(before["targets"].get(chip, {}).get("fingerprints", []))
            is_now = set(now["targets"].get(chip, {}).get("fingerprints", []))
            shown.new[chip] = sorted(is_now - was)
            shown.fixed[chip] = len(was - is_now)
    return shown


__all__ = ["HISTORY_VERSION", "Chart", "Point", "Series", "Trend", "run_record", "trend"]
