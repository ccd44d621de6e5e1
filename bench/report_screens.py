"""Screenshots of the Spark report at 1, 5, 20 and 100 queues, from synthetic aggregates (no
Spark, no service): the report's charts and page drawn as `simplequeue spark report` draws them,
each page shot whole in headless Chromium.

    .venv/bin/python -m bench.report_screens [--out /tmp/report-screens] [--docs]

--docs copies the 20-queue shot to docs/images/report-20-queues.png. Needs playwright and a
Chromium (Debian's /usr/bin/chromium by default; --chromium PATH for another).
"""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from PIL import Image
from simplequeue.reports.charts import draw_charts
from simplequeue.reports.history import QUANTILES, Aggregates, ReportRequest, write_parquet
from simplequeue.reports.page import write_html
from simplequeue.reports.shaping import group_queues

SIZES = (1, 5, 20, 100)
DOCS = Path(__file__).resolve().parent.parent / "docs" / "images"
START = datetime(2026, 11, 24, 15, 0, tzinfo=UTC)
NAMES = [
    "emails",
    "thumbnails",
    "webhooks",
    "invoices",
    "search-index",
    "exports",
    "sms",
    "payments-reconciliation-nightly",
    "push-notifications",
    "audit-log",
]
ERRORS = [
    ("smtp 451 try later for {email}", "smtp <n> try later for <email>"),
    ("mailbox full: {email}", "mailbox full: <email>"),
    ("HTTP 503 from https://hooks.example.com/{n}", "HTTP <n> from https://hooks.example.com/<n>"),
    ("order {uuid} not found", "order <uuid> not found"),
    ("timeout after {n} ms", "timeout after <n> ms"),
    ("object 0x{hex} gone", "object <hex> gone"),
]


def synthetic(queues: int, seed: int = 25) -> Aggregates:
    """Aggregates as Spark would make them for `queues` queues whose volumes run from 20,000
    items down to a handful, over one hour: one queue with 1 dead item in 20,000, one where all
    died, idle minutes, attempts past 10 on one queue, times from milliseconds to minutes."""
    rng = random.Random(seed)
    names = [
        NAMES[i] if i < len(NAMES) else f"tenant-{i:03d}-{rng.choice(['sync', 'import', 'mail'])}"
        for i in range(queues)
    ]
    summary: list[dict[str, Any]] = []
    throughput: list[dict[str, Any]] = []
    attempts: list[dict[str, Any]] = []
    top_errors: list[dict[str, Any]] = []
    for index, name in enumerate(names):
        finished = max(3, round(20_000 / (1 + index) ** 1.6 * rng.uniform(0.7, 1.3)))
        if index == 0:
            finished, dead = 20_000, 1
        elif index == queues - 1 and queues > 2:
            dead = finished  # everything died
        else:
            dead = round(finished * rng.choice([0.0, 0.002, 0.03, 0.08, 0.4]))
        wait = 10 ** rng.uniform(-2.5, 2.2)
        processing = 10 ** rng.uniform(-2.5, 0.8)
        row: dict[str, Any] = {
            "queue": name,
            "finished": finished,
            "completed": finished - dead,
            "dead": dead,
            "dead_ratio": dead / finished,
            "first_finished_at": START,
            "last_finished_at": START + timedelta(minutes=59),
        }
        for kind, p50 in (("wait", wait), ("processing", processing)):
            for q, factor in zip(QUANTILES, (1.0, 4.0, 9.0), strict=True):
                row[f"{kind}_p{round(q * 100)}_s"] = p50 * factor
        summary.append(row)
        # Per minute: noisy counts around a busier middle of the hour; small queues have idle minutes.
        rate = finished / 80  # 40 quiet minutes and 20 at twice the rate
        counts = [
            max(0, round(rng.gauss(mean, mean**0.5)))
            for mean in (rate * (1 + 1.0 * (20 <= m < 40)) for m in range(60))
        ]
        counts[-1] = max(0, counts[-1] + finished - sum(counts))
        if sum(counts) != finished:  # the noise overshot: take the rest from the busiest minute
            counts[counts.index(max(counts))] -= sum(counts) - finished
        for minute, count in enumerate(counts):
            if count:
                throughput.append(
                    {
                        "queue": name,
                        "minute": START + timedelta(minutes=minute),
                        "outcome": "completed",
                        "count": count,
                    }
                )
        most = 12 if index == 2 else rng.choice([1, 2, 3, 3, 5])
        first, decay = rng.uniform(0.85, 0.999), rng.uniform(0.2, 0.6)
        left = finished
        for attempt in range(1, most + 1):
            share = first if attempt == 1 else 1 - decay
            count = left if attempt == most else round(left * share)
            left -= count
            if count:
                attempts.append({"queue": name, "attempts": attempt, "count": count})
        remaining = dead
        for rank, (example, error) in enumerate(
            rng.sample(ERRORS, k=min(len(ERRORS), 1 + index % 4)), start=1
        ):
            count = remaining if rank == 1 + index % 4 or remaining < 2 else max(1, remaining // 2)
            remaining -= count
            if count:
                filled = example.format(
                    email=f"user{rng.randrange(999)}@example.com",
                    n=rng.randrange(9999),
                    uuid="3f2a9c1e-1b2c-4d5e-8f90-1234567890ab",
                    hex="7ffde3a1b2c0",
                )
                top_errors.append(
                    {"queue": name, "rank": rank, "error": error, "count": count, "example": filled}
                )
            if not remaining:
                break
    overall: dict[str, dict[str, Any]] = {}
    for e in top_errors:
        merged = overall.setdefault(
            e["error"], {"error": e["error"], "count": 0, "queues": 0, "example": e["example"]}
        )
        merged["count"] += e["count"]
        merged["queues"] += 1
    grouping = group_queues(summary)
    other = None
    if grouping.others:
        folded = [r for r in summary if r["queue"] in grouping.others]
        other = {
            "queue": grouping.other_label,
            **{k: sum(r[k] for r in folded) for k in ("finished", "completed", "dead")},
            **{k: v for k, v in folded[0].items() if k.endswith("_s")},
        }
    return Aggregates(
        summary=sorted(summary, key=lambda r: r["queue"]),
        throughput=throughput,
        attempts=attempts,
        top_errors=top_errors,
        other=other,
        errors_overall=sorted(overall.values(), key=lambda e: (-e["count"], e["error"]))[:10],
    )


def render(out: Path, queues: int) -> Path:
    """The report's charts and page for `queues` synthetic queues, in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    aggregates = synthetic(queues)
    request = ReportRequest("http://127.0.0.1:8000", out, None, None, START + timedelta(hours=1), None)
    files = write_parquet(out, aggregates)
    return write_html(out, request, aggregates, draw_charts(out, aggregates), files)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("/tmp/report-screens"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--docs", action="store_true", help="copy the 20-queue shot into docs/images/")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium)
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        for size in SIZES:
            html = render(args.out / f"{size}-queues", size)
            shot = args.out / f"report-{size}-queues.png"
            page.goto(html.as_uri())
            page.screenshot(path=str(shot), full_page=True)
            print(shot)
        browser.close()
    if args.docs:
        DOCS.mkdir(parents=True, exist_ok=True)
        # 256 colours, no dithering: a third of the bytes, and the text stays sharp.
        shot = Image.open(args.out / "report-20-queues.png").convert("RGB")
        shot.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
            DOCS / "report-20-queues.png", optimize=True
        )
        print(DOCS / "report-20-queues.png")


if __name__ == "__main__":
    main()
