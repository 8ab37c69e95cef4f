#!/usr/bin/env node
// An agent-style script: read sales data, compute per-product totals, write a result file,
// print a summary. Run it sandboxed:
//
//   build/agentbox run --report report.json --input examples/sales.csv examples/agent_script.js
//
// Without sales.csv in the workspace it falls back to a small built-in sample.
'use strict';
const fs = require('fs');

const SAMPLE = `date,region,product,units,unit_price
2026-11-02,north,widget,12,9.50
2026-11-03,east,gadget,6,24.00
2026-11-04,south,gizmo,4,31.00
`;

function load(path) {
  if (fs.existsSync(path)) return [fs.readFileSync(path, 'utf8'), path];
  return [SAMPLE, 'built-in sample'];
}

const [text, source] = load(process.argv[2] || 'sales.csv');
const [header, ...lines] = text.trim().split('\n');
const cols = header.split(',');
const rows = lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [cols[i], v])));
const byProduct = {};
for (const r of rows) {
  byProduct[r.product] = (byProduct[r.product] || 0) + Number(r.units) * Number(r.unit_price);
}
const result = {
  source,
  rows: rows.length,
  revenue_by_product: Object.fromEntries(
    Object.entries(byProduct).sort().map(([k, v]) => [k, Math.round(v * 100) / 100])),
};
fs.writeFileSync('result.json', JSON.stringify(result, null, 2));
const best = Object.entries(result.revenue_by_product).sort((a, b) => b[1] - a[1])[0][0];
console.log(`read ${rows.length} rows from ${source}; best product: ${best}; wrote result.json`);
