#!/bin/sh
# test-examples.sh -- the jobs in examples/ run under the default protections and produce their
# files (issue 15): the scientific-Python job (Debian's numpy, pandas, matplotlib: CSV in, PNG
# and JSON out) and the Node job (an HTTP server on the sandbox's loopback and its own client,
# JSON out). Checked on the host: the report's files, the PNG's signature and size, and the
# JSON's numbers against totals computed here from the same CSV.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

EX=$AB_SRCDIR/examples
CSV=$EX/sales.csv
# the expected totals, by the host's own python3 (stdlib only)
/usr/bin/python3 - "$CSV" >"$WORK/expect.json" <<'EOF'
import csv, json, sys
reg, prod = {}, {}
for r in csv.DictReader(open(sys.argv[1])):
    v = int(r["units"]) * float(r["unit_price"])
    reg[r["region"]] = reg.get(r["region"], 0) + v
    prod[r["product"]] = prod.get(r["product"], 0) + v
print(json.dumps({"rows": sum(1 for _ in open(sys.argv[1])) - 1,
                  "region": {k: round(v, 2) for k, v in reg.items()},
                  "product": {k: round(v, 2) for k, v in prod.items()},
                  "total": round(sum(reg.values()), 2)}))
EOF
# same_totals A B: two JSON objects of numbers are equal to the cent
same_totals() {
    jq -n --argjson a "$1" --argjson b "$2" \
        '($a | keys) == ($b | keys) and all($a | keys[]; (($a[.] - $b[.]) | fabs) < 0.005)' |
        grep -qx true
}

# ---- scientific Python -------------------------------------------------------------------
if /usr/bin/python3 -c 'import numpy, pandas, matplotlib' 2>/dev/null; then
    abb 180 --input "$CSV" "$EX/science/analyze.py" sales.csv
    is "$rc" 0 "science: the job exits 0 under the defaults"
    is "$(jr .status)" exited "science: status exited"
    is "$(jr '[.files[].path] | sort | join(",")')" "analyze.py,revenue_by_region.png,sales.csv,summary.json" \
        "science: the workspace holds the inputs and the two outputs, no cache"
    W=$(jr .workspace)
    PNG=$W/revenue_by_region.png
    if [ -f "$PNG" ]; then
        is "$(head -c 8 "$PNG" | od -An -tx1 | tr -d ' \n')" 89504e470d0a1a0a "science: the chart is a PNG"
        # IHDR: width and height, big-endian, at bytes 16-23 (figsize 6x4 at 100 dpi)
        is "$(dd if="$PNG" bs=1 skip=16 count=8 2>/dev/null | od -An -tu1 | tr -s ' ' | sed 's/^ //')" \
            "0 0 2 88 0 0 1 144" "science: the PNG is 600x400"
        check "science: the PNG is not trivially small" test "$(wc -c <"$PNG")" -gt 5000
    else
        not_ok "science: revenue_by_region.png is on the host" "workspace: $W"
    fi
    S=$W/summary.json
    if jqe . "$S" 2>/dev/null; then
        is "$(jq -r .rows "$S")" "$(jq -r .rows "$WORK/expect.json")" "science: summary.json counts every row"
        check "science: revenue by region matches the host's computation" \
            same_totals "$(jq -c .revenue_by_region "$S")" "$(jq -c .region "$WORK/expect.json")"
        check "science: the total matches" \
            same_totals "{\"t\":$(jq .total_revenue "$S")}" "{\"t\":$(jq .total "$WORK/expect.json")}"
        is "$(jq -r '.first_day + ".." + .last_day' "$S")" 2026-11-02..2026-11-06 "science: pandas parsed the dates"
        check "science: numpy, pandas and matplotlib are Debian's (versions recorded)" \
            jqe '.versions | (.numpy | length > 0) and (.pandas | length > 0) and (.matplotlib | length > 0)' "$S"
    else
        not_ok "science: summary.json is JSON on the host" "workspace: $W"
    fi
    # the cgroup depends on the host (an unprivileged caller on cgroup v1 has none)
    check "science: the report records every protection enforced but the host-dependent cgroup" \
        jqe '[.sandbox | to_entries[] | select(.key != "cgroup") | .value.enforced] | all'
else
    skip "science example" "python3-numpy, python3-pandas or python3-matplotlib missing (./setup installs them)"
fi

# ---- Node: a server on the sandbox's loopback and its client ------------------------------
if command -v node >/dev/null; then
    abb 120 --input "$CSV" "$EX/node/serve_and_fetch.js" sales.csv
    is "$rc" 0 "node: the job exits 0 under the defaults"
    is "$(jr '[.files[].path] | sort | join(",")')" "report.json,sales.csv,serve_and_fetch.js" \
        "node: the workspace holds the inputs and report.json"
    J=$(jr .workspace)/report.json
    if jqe . "$J" 2>/dev/null; then
        is "$(jq -r '.server.health + " " + (.server.not_found_status | tostring)' "$J")" "ok 404" \
            "node: the client reached the server on 127.0.0.1 (health ok, 404 for an unknown path)"
        check "node: revenue by region matches the host's computation" \
            same_totals "$(jq -c .revenue_by_region "$J")" "$(jq -c .region "$WORK/expect.json")"
        check "node: revenue by product matches" \
            same_totals "$(jq -c .revenue_by_product "$J")" "$(jq -c .product "$WORK/expect.json")"
    else
        not_ok "node: report.json is JSON on the host" "workspace: $(jr .workspace)"
    fi
    is "$(jr .sandbox.network.mode)" loopback "node: the default network mode (own loopback)"
else
    skip "node example" "node is not installed"
fi

done_testing
