#!/usr/bin/env python3
"""A scientific-Python job with Debian's own numpy, pandas and matplotlib: read a CSV,
aggregate it, write a chart (PNG) and a summary (JSON). It runs under agentbox's defaults:

    build/agentbox run --report report.json --input examples/sales.csv \
        examples/science/analyze.py sales.csv

and leaves exactly revenue_by_region.png and summary.json in the workspace (matplotlib's
and fontconfig's caches go to the sandbox's /tmp). Needs python3-numpy, python3-pandas and
python3-matplotlib (./setup installs them).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display in the sandbox
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "sales.csv"
    df = pd.read_csv(src, parse_dates=["date"])
    df["revenue"] = df["units"] * df["unit_price"]
    by_region = df.groupby("region")["revenue"].sum().sort_index()
    daily = df.groupby("date")["revenue"].sum()
    # a least-squares trend of daily revenue (numpy), in currency units per day
    days = (daily.index - daily.index[0]).days.to_numpy(dtype=float)
    slope = float(np.polyfit(days, daily.to_numpy(), 1)[0]) if len(days) > 1 else 0.0

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    by_region.plot.bar(ax=ax, color="#4477aa")
    ax.set_title("Revenue by région")  # a non-ASCII title: fonts from the host's fontconfig
    ax.set_ylabel("revenue")
    fig.tight_layout()
    fig.savefig("revenue_by_region.png")

    summary = {
        "source": src,
        "rows": int(len(df)),
        "first_day": daily.index.min().strftime("%Y-%m-%d"),
        "last_day": daily.index.max().strftime("%Y-%m-%d"),
        "revenue_by_region": {k: round(float(v), 2) for k, v in by_region.items()},
        "total_revenue": round(float(df["revenue"].sum()), 2),
        "daily_trend_per_day": round(slope, 4),
        "versions": {"numpy": np.__version__, "pandas": pd.__version__,
                     "matplotlib": matplotlib.__version__},
    }
    with open("summary.json", "w") as f:
        json.dump(summary, f, indent=2)
    print(f"{summary['rows']} rows; best region {by_region.idxmax()}; "
          "wrote revenue_by_region.png and summary.json")


if __name__ == "__main__":
    main()
