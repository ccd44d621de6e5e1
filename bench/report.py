"""Judging, tabulating and plotting one run's figures."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.scenarios import Figure

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def judge(figure: Figure) -> bool | None:
    """Whether the figure meets its target ('≥ 5x' on the ratio, '≤ 25' on the value)."""
    match = re.fullmatch(r"([≥≤]) ([\d.]+)(x?)", figure.target)
    if match is None:
        return None
    sign, bound, on_ratio = match[1], float(match[2]), bool(match[3])
    measured = figure.ratio if on_ratio else figure.value
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


def plot(figures: list[Figure], raw: dict[str, object], path: Path) -> None:
    ratios = [f for f in figures if f.ratio is not None]
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 6))
    labels = [f"{f.measure.split(' (')[0]}\n[{f.engine}]" for f in ratios]
    colours = ["tab:green" if f.met else "tab:red" if f.met is False else "tab:grey" for f in ratios]
    left.barh(labels, [f.ratio or 0 for f in ratios], color=colours)
    for row, f in enumerate(ratios):  # each target as a black tick on its bar
        if (match := re.fullmatch(r"[≥≤] ([\d.]+)x", f.target)) is not None:
            left.plot([float(match[1])] * 2, [row - 0.4, row + 0.4], color="black", linewidth=2)
    left.set_xscale("log")
    left.set_xlabel("ratio to the same-run baseline (log scale; black tick: target; green meets it)")
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


def update_page(page: Path, table: str, stem: Path) -> None:
    """Replace the table between the page's bench markers (docs/benchmarks.md)."""
    text = page.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{page.name} has no {START} … {END} block to update")
    relative = stem.relative_to(page.parent.parent)
    block = f"{START}\n{table}\n\nRaw figures: `{relative}.json`; plot: `{relative}.png`.\n{END}"
    page.write_text(re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S))
