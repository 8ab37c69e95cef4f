// bench/mcp.cjs: a trivial run_code round trip through `agentbox mcp` (the official MCP SDK's
// Client + StdioClientTransport, one long-lived server) against `agentbox run` from a shell
// and bare python3 (/usr/bin/python3, the interpreter the sandbox runs), interleaved in one run (each round runs all three in a shuffled order).
// Prints median and min-max wall ms of each, and the ratios of medians.
// Usage: bench/mcp [--rounds N]   (needs ./setup's SDK in .deps/mcp-sdk)
'use strict';
const path = require('path');
const fs = require('fs');
const os = require('os');
const { spawnSync } = require('child_process');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const root = path.resolve(__dirname, '..');
const agentbox = process.env.AGENTBOX || path.join(root, 'build', 'agentbox');
const rounds = Number((process.argv.indexOf('--rounds') >= 0 && process.argv[process.argv.indexOf('--rounds') + 1]) || 30);
const code = 'print(6 * 7)';

const med = (a) => { const s = [...a].sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

(async () => {
    const state = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-bench-mcp-'));
    fs.chmodSync(state, 0o711);
    const runs = path.join(state, 'runs-cli');
    fs.mkdirSync(runs, { mode: 0o711 });
    const transport = new StdioClientTransport({ command: agentbox, args: ['mcp', '--state-dir', path.join(state, 'mcp'), '--keep-runs', '50'], stderr: 'ignore' });
    const client = new Client({ name: 'bench', version: '1' });
    await client.connect(transport);
    await client.listTools();
    const cfg = {
        'mcp run_code (SDK round trip)': async () => {
            const r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code } });
            if (r.structuredContent.stdout.text !== '42\n') throw new Error('mcp: ' + JSON.stringify(r));
        },
        'agentbox run (a process per run)': async () => {
            const r = spawnSync(agentbox, ['run', '--runs-dir', runs, '--rm', '--lang', 'python', '--code', code], { encoding: 'utf8' });
            if (r.stdout !== '42\n') throw new Error('cli: ' + r.stderr);
        },
        'bare python3': async () => {
            const r = spawnSync(fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3', ['-c', code], { encoding: 'utf8' });
            if (r.stdout !== '42\n') throw new Error('python3: ' + r.stderr);
        },
    };
    const names = Object.keys(cfg);
    const t = Object.fromEntries(names.map((n) => [n, []]));
    for (const n of names) await cfg[n](); // warm up
    for (let i = 0; i < rounds; i++) {
        const order = [...names].sort(() => Math.random() - 0.5);
        for (const n of order) {
            const t0 = process.hrtime.bigint();
            await cfg[n]();
            t[n].push(Number(process.hrtime.bigint() - t0) / 1e6);
        }
    }
    await client.close();
    fs.rmSync(state, { recursive: true, force: true });
    const bare = med(t['bare python3']);
    console.log(`${rounds} interleaved rounds, ${os.cpus().length} cores, node ${process.version}`);
    console.log('configuration                        median ms   min-max ms      x bare python3');
    for (const n of names) {
        const s = t[n];
        console.log(`${n.padEnd(36)} ${med(s).toFixed(1).padStart(9)}   ${Math.min(...s).toFixed(1)}-${Math.max(...s).toFixed(1)}`.padEnd(68) + (med(s) / bare).toFixed(2));
    }
    console.log(`mcp / agentbox run: ${(med(t[names[0]]) / med(t[names[1]])).toFixed(2)}`);
})().catch((e) => { console.error(e); process.exit(1); });
