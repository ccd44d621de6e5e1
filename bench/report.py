"""Judging, tabulating and plotting one run's figures, or the medians of several runs."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.scenarios import Figure

SCENARIOS = ["batches", "push", "pop", "wake", "idle", "dead"]
"""The scenarios of a run, in order: 1 and 1b; 2 and 2b; 3, 3b and 3c; 4; 5 and 5b; 6."""

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


# The next throughput targets (PostgreSQL, judged on the median of three full runs), keyed by the
# measure's number and the engine; SQLite's figures are to be kept, so its bounds are the ratios of
# the run the docs showed when the targets were set (bench/results/20261125T093332Z.json).
NEXT_TARGETS = {
    ("1", "postgresql"): "≥ 4x",
    ("3b", "postgresql"): "≥ 0.3x",
    ("3c", "postgresql"): "≥ 0.45x",
    ("1", "sqlite"): "≥ 3.54x",
    ("2b", "sqlite"): "≥ 2.38x",
    ("3b", "sqlite"): "≥ 0.38x",
    ("3c", "sqlite"): "≥ 0.66x",
}


def next_target(measure: str, engine: str) -> str:
    return NEXT_TARGETS.get((measure.split(".", 1)[0], engine), "")


def judge(figure: Figure) -> bool | None:
    """Whether the figure meets its target ('≥ 5x' on the ratio, '≤ 25' on the value)."""
    return meets(figure.target, figure.value, figure.ratio)


def meets(target: str, value: float, ratio: float | None) -> bool | None:
    """Whether a value (or its ratio, for targets ending in x) meets a target such as '≥ 5x'."""
    match = re.fullmatch(r"([≥≤]) ([\d.]+)(x?)", target)
    if match is None:
        return None
    sign, bound, on_ratio = match[1], float(match[2]), bool(match[3])
    measured = ratio if on_ratio else value
    if measured is None:
        return None
    return measured >= bound if sign == "≥" else measured <= bound


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def table(figures: list[Figure], about: dict[str, object], *, quick: bool) -> str:
    lines = [
        f"Run {about['date']} on {about['os']}, {about['cores']} cores, {about['memory']}, "
        f"Python {about['python']}, SQLite {about['sqlite']}, PostgreSQL {about['postgresql']}"
        + (" (quick run)" if quick else ""),
        "",
        "| measure | engine | simplequeue | baseline (same run) | ratio | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in figures:
        baseline = f"{_number(f.baseline)} ({f.baseline_name})" if f.baseline is not None else "-"
        ratio = f"{f.ratio:.2f}x" if f.ratio is not None else "-"
        met = {True: "yes", False: "**no**", None: "-"}[f.met]
        lines.append(
            f"| {f.measure} | {f.engine} | {_number(f.value)} {f.unit} | {baseline} | {ratio} | "
            f"{f.target or '-'} | {met} |"
        )
    return "\n".join(lines)


def plot(figures: Sequence[Figure | Median], raw: dict[str, object], path: Path) -> None:
    ratios = [f for f in figures if f.ratio is not None]
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 6))
    labels = [f"{f.measure.split(' (')[0]}\n[{f.engine}]" for f in ratios]
    colours = ["tab:green" if f.met else "tab:red" if f.met is False else "tab:grey" for f in ratios]
    left.barh(labels, [f.ratio or 0 for f in ratios], color=colours)
    for row, f in enumerate(ratios):  # each target as a black tick on its bar
        if (match := re.fullmatch(r"[≥≤] ([\d.]+)x", f.target)) is not None:
            left.plot([float(match[1])] * 2, [row - 0.4, row + 0.4], color="black", linewidth=2)
    medians = [f for f in ratios if isinstance(f, Median)]
    if medians and len(medians) == len(ratios):  # the spread of each median, lowest to highest
        lows = [(m.ratio or 0) - (m.ratio_low or m.ratio or 0) for m in medians]
        highs = [(m.ratio_high or m.ratio or 0) - (m.ratio or 0) for m in medians]
        values = [m.ratio or 0 for m in medians]
        left.errorbar(values, range(len(medians)), xerr=[lows, highs], fmt="none", ecolor="black", capsize=3)
    left.set_xscale("log")
    left.set_xlabel(
        "ratio to the same-run baseline (log scale; black tick: target; green meets it; whiskers: spread)"
    )
    left.tick_params(axis="y", labelsize=7)
    left.invert_yaxis()
    wakes = {k: v for k, v in raw.items() if k.startswith("wake")}
    names = list(wakes)
    for n, key in enumerate(names):
        stats = wakes[key]
        assert isinstance(stats, dict)
        right.bar(
            [n - 0.2, n + 0.2], [stats["p50"], stats["p99"]], width=0.4, color=["tab:blue", "tab:orange"]
        )
    right.axhline(5, color="tab:blue", linestyle="--", linewidth=1, label="p50 target 5 ms")
    right.axhline(25, color="tab:orange", linestyle="--", linewidth=1, label="p99 target 25 ms")
    right.set_xticks(range(len(names)), [k.removeprefix("wake ") for k in names], fontsize=8)
    right.set_ylabel("wake latency, ms (blue p50, orange p99)")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@dataclass
class Median:
    """One figure over several runs: the median of its value, baseline and ratio (each ratio taken
    within its run), the lowest and highest of each, and the targets judged on the median ratio."""

    measure: str
    engine: str
    unit: str
    runs: int
    value: float
    value_low: float
    value_high: float
    baseline: float | None
    baseline_low: float | None
    baseline_high: float | None
    baseline_name: str
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None
    target: str
    met: bool | None
    issue_target: str
    issue_met: bool | None


def _spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def medians(runs: list[list[Figure]]) -> list[Median]:
    """The median of every figure over the runs that measured it, in the first run's order."""
    keyed: dict[tuple[str, str], list[Figure]] = {}
    for figures in runs:
        for f in figures:
            keyed.setdefault((f.measure, f.engine), []).append(f)
    out = []
    for (measure, engine), same in keyed.items():
        value = _spread([f.value for f in same])
        baselines = [f.baseline for f in same if f.baseline is not None]
        ratios = [f.ratio for f in same if f.ratio is not None]
        baseline = _spread(baselines) if baselines else (None, None, None)
        ratio = _spread(ratios) if ratios else (None, None, None)
        first = same[0]
        issue = next_target(measure, engine)
        out.append(
            Median(
                measure,
                engine,
                first.unit,
                len(same),
                *value,
                *baseline,
                first.baseline_name,
                *ratio,
                first.target,
                meets(first.target, value[0], ratio[0]),
                issue,
                meets(issue, value[0], ratio[0]),
            )
        )
    return out


def cpu_medians(samples: list[dict[str, object]]) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per 'cpu …' sample, loop and process: [median, lowest, highest] µs per operation."""
    gathered: dict[str, dict[str, dict[str, list[float]]]] = {}
    for raw in samples:
        for key, loops in raw.items():
            if key.startswith("cpu ") and isinstance(loops, dict):
                for loop, sides in loops.items():
                    for side, micros in sides.items():
                        gathered.setdefault(key, {}).setdefault(loop, {}).setdefault(side, []).append(micros)
    return {
        key: {loop: {side: list(_spread(v)) for side, v in sides.items()} for loop, sides in loops.items()}
        for key, loops in gathered.items()
    }


def wake_medians(samples: list[dict[str, object]]) -> dict[str, object]:
    """The median of each wake latency statistic over the runs (for the plot)."""
    gathered: dict[str, dict[str, list[float]]] = {}
    for raw in samples:
        for key, stats in raw.items():
            if key.startswith("wake ") and isinstance(stats, dict):
                for name, v in stats.items():
                    gathered.setdefault(key, {}).setdefault(name, []).append(v)
    return {key: {name: statistics.median(v) for name, v in stats.items()} for key, stats in gathered.items()}


def _ranged(median: float | None, low: float | None, high: float | None, suffix: str = "") -> str:
    if median is None or low is None or high is None:
        return "-"
    if suffix == "x":
        return f"{median:.2f}x ({low:.2f} to {high:.2f})"
    return f"{_number(median)}{suffix} ({_number(low)} to {_number(high)})"


def render(records: list[dict[str, Any]]) -> str:
    """The table of medians and the CPU tables of one or more multi-run results (their JSON
    records, e.g. one invocation per engine), with when and how long each run took and the
    machine's load around it."""
    figures = [Median(**m) for r in records for m in r["medians"]]
    about = records[0]["machine"]
    ended = records[-1]["runs"][-1]["ended"]
    runs = max((m.runs for m in figures), default=0)
    timing = []
    for r in records:
        engines = ", ".join(dict.fromkeys(m["engine"] for m in r["medians"]))
        minutes = ", ".join(f"{run['seconds'] / 60:.1f}" for run in r["runs"])
        loads = ", ".join(
            " to ".join(f"{x:.1f}" for x in run.get("load average (1 min) before, after", [])) or "?"
            for run in r["runs"]
        )
        scenarios = "" if r.get("scenarios", []) == SCENARIOS else f", scenarios {', '.join(r['scenarios'])}"
        timing.append(f"{engines}{scenarios}: minutes per run {minutes}; load average {loads}")
    lines = [
        f"Medians of {runs} {'quick' if records[0].get('quick') else 'full-size'} runs (one invocation per "
        f"line below), {about['date']} to {ended}, on "
        f"{about['os']}, {about['cores']} cores, {about['memory']}, Python {about['python']}, "
        f"SQLite {about['sqlite']}, PostgreSQL {about['postgresql']}. The machine was shared with "
        "other test runs throughout (1-minute load average at the start and end of each run "
        "below).",
        "",
        *(f"- {line}" for line in timing),
        "",
        "Every ratio is taken within its run; the table gives its median and, in brackets, the lowest"
        " and highest of the runs. Targets are judged on the median.",
        "",
        "| measure | engine | simplequeue, median (spread) | baseline (same run), median (spread) | "
        "ratio, median (spread) | target | met | next target | met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    verdict = {True: "yes", False: "**no**", None: "-"}
    for m in figures:
        baseline = _ranged(m.baseline, m.baseline_low, m.baseline_high)
        if m.baseline is not None:
            baseline += f" ({m.baseline_name})"
        lines.append(
            f"| {m.measure} | {m.engine} | {_ranged(m.value, m.value_low, m.value_high)} {m.unit} | "
            f"{baseline} | {_ranged(m.ratio, m.ratio_low, m.ratio_high, 'x')} | {m.target or '-'} | "
            f"{verdict[m.met]} | {m.issue_target or '-'} | {verdict[m.issue_met]} |"
        )
    cpu = {k: v for r in records for k, v in r["cpu_medians"].items()}
    return "\n".join(lines) + ("\n\n" + cpu_median_tables(cpu, runs) if cpu else "")


def cpu_median_tables(cpu: dict[str, dict[str, dict[str, list[float]]]], runs: int) -> str:
    """CPU per operation by process, median (lowest to highest) of the runs."""
    sides = ["load generator", "server", "postgres", "total"]
    blocks = []
    for key, loops in cpu.items():
        _, engine, what = key.split(" ", 2)
        operation = "single push" if what == "push" else "item"
        lines = [
            f"CPU per {operation} by process, {engine}, µs: median (lowest to highest) of {runs} runs",
            "",
            "| loop | " + " | ".join(sides) + " |",
            "|---" * (len(sides) + 1) + "|",
        ]
        for loop, per in loops.items():
            cells = [
                f"{per[s][0]:,.0f} ({per[s][1]:,.0f} to {per[s][2]:,.0f})" if s in per else "-" for s in sides
            ]
            lines.append(f"| {loop} | " + " | ".join(cells) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def update_page(page: Path, table: str, *stems: Path) -> None:
    """Replace the table between the page's bench markers (docs/benchmarks.md)."""
    text = page.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{page.name} has no {START} … {END} block to update")
    relative = [stem.resolve().relative_to(page.parent.parent.resolve()) for stem in stems]
    raw = ", ".join(f"`{r}.json`" for r in relative)
    plots = ", ".join(f"`{r}.png`" for r in relative)
    block = f"{START}\n{table}\n\nRaw figures: {raw}; plot: {plots}.\n{END}"
    page.write_text(re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S))
