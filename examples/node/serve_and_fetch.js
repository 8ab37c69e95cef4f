#!/usr/bin/env node
// A Node job that starts a local HTTP server and is its own client, the way test suites and
// agent tools do: the server computes totals from a CSV, the client fetches them over the
// sandbox's own loopback and writes report.json. It runs under agentbox's defaults:
//
//   build/agentbox run --report report.json --input examples/sales.csv \
//       examples/node/serve_and_fetch.js sales.csv
//
// The loopback is the sandbox's own (a private network namespace): nothing of the host's
// is reachable from it, and nothing of the host's can reach this server.
'use strict';
const fs = require('fs');
const http = require('http');

const src = process.argv[2] || 'sales.csv';
const [header, ...lines] = fs.readFileSync(src, 'utf8').trim().split('\n');
const cols = header.split(',');
const rows = lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [cols[i], v])));

function totals(key) {
  const t = {};
  for (const r of rows) t[r[key]] = (t[r[key]] || 0) + Number(r.units) * Number(r.unit_price);
  return Object.fromEntries(Object.entries(t).sort().map(([k, v]) => [k, Math.round(v * 100) / 100]));
}

const server = http.createServer((req, res) => {
  const m = /^\/totals\/(region|product)$/.exec(req.url);
  if (req.url === '/health') return res.end('ok');
  if (!m) { res.statusCode = 404; return res.end('not found'); }
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify(totals(m[1])));
});

function get(port, path) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    }).on('error', reject);
  });
}

server.listen(0, '127.0.0.1', async () => {
  const { port } = server.address();
  try {
    const health = await get(port, '/health');
    const byRegion = await get(port, '/totals/region');
    const byProduct = await get(port, '/totals/product');
    const missing = await get(port, '/nope');
    const report = {
      source: src,
      rows: rows.length,
      server: { address: '127.0.0.1', health: health.body, not_found_status: missing.status },
      revenue_by_region: JSON.parse(byRegion.body),
      revenue_by_product: JSON.parse(byProduct.body),
    };
    fs.writeFileSync('report.json', JSON.stringify(report, null, 2) + '\n');
    console.log(`served and fetched totals for ${rows.length} rows on 127.0.0.1:${port}; wrote report.json`);
  } catch (e) {
    console.error('client failed: ' + e.message);
    process.exitCode = 1;
  } finally {
    server.close();
  }
});
