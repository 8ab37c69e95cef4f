#!/usr/bin/env python3
"""An agent-style script: read sales data, compute per-region totals, write a result
file, print a summary. Run it sandboxed:

    build/agentbox run --report report.json --input examples/sales.csv examples/agent_script.py

Without sales.csv in the workspace it falls back to a small built-in sample.
"""
import csv
import io
import json
import os
import statistics
import sys

SAMPLE = """date,region,product,units,unit_price
2026-11-02,north,widget,12,9.50
2026-11-03,east,gadget,6,24.00
2026-11-04,south,gizmo,4,31.00
"""


def load(path):
    if os.path.exists(path):
        with open(path, newline="") as f:
            return list(csv.DictReader(f)), path
    return list(csv.DictReader(io.StringIO(SAMPLE))), "built-in sample"


def main():
    rows, source = load(sys.argv[1] if len(sys.argv) > 1 else "sales.csv")
    by_region = {}
    for r in rows:
        revenue = int(r["units"]) * float(r["unit_price"])
        by_region.setdefault(r["region"], []).append(revenue)
    result = {
        "source": source,
        "rows": len(rows),
        "revenue_by_region": {k: round(sum(v), 2) for k, v in sorted(by_region.items())},
        "mean_order_revenue": round(statistics.mean(x for v in by_region.values() for x in v), 2),
    }
    with open("result.json", "w") as f:
        json.dump(result, f, indent=2)
    best = max(result["revenue_by_region"], key=result["revenue_by_region"].get)
    print(f"read {len(rows)} rows from {source}; best region: {best}; wrote result.json")


if __name__ == "__main__":
    main()
