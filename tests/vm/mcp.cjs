// tests/vm/mcp.cjs -- the VM lane's MCP calls (issue 23): `agentbox mcp` driven by the official
// MCP TypeScript SDK as the user in a login session, on the systemd + cgroup v2 VM. TAP lines;
// tests/vm/checks.sh relays them. Env: AGENTBOX, NODE_PATH (the SDK's node_modules).
'use strict';
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const fs = require('fs');
const os = require('os');
const path = require('path');

let n = 0;
function ok(cond, desc, extra) {
    n++;
    console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${desc}`);
    if (!cond && extra !== undefined) console.log('# ' + JSON.stringify(extra).slice(0, 2000));
}
const sc = (r) => r.structuredContent || {};

async function session(args) {
    const state = fs.mkdtempSync(path.join(os.tmpdir(), 'vm-mcp-'));
    const env = { ...process.env };
    delete env.NODE_PATH;
    const transport = new StdioClientTransport({ command: process.env.AGENTBOX, args: ['mcp', '--state-dir', state, ...args], env, stderr: 'pipe' });
    const client = new Client({ name: 'agentbox-vm-lane', version: '1.0.0' });
    await client.connect(transport);
    return { client, state };
}

(async () => {
    let { client, state } = await session([]);
    let r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'print(6*7)' } });
    ok(!r.isError && sc(r).status === 'exited' && sc(r).stdout.text === '42\n', 'run_code runs', sc(r));
    ok(sc(r).protections && sc(r).protections.cgroup === true, 'run_code: the run had its cgroup', sc(r).protections);
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'x = bytearray(300 << 20)', limits: { memory: '64M' } } });
    ok(r.isError === true && sc(r).status === 'oom', 'run_code: an OOM is status oom', sc(r));
    await client.close();
    fs.rmSync(state, { recursive: true, force: true });

    ({ client, state } = await session(['--warm', '1']));
    let warm = false;
    for (let i = 0; i < 60 && !warm; i++) {
        const info = await client.callTool({ name: 'sandbox_info', arguments: {} });
        const w = sc(info).warm || {};
        warm = (w.classes || []).some((c) => c.language === 'python' && c.ready >= 1);
        if (!warm) await new Promise((res) => setTimeout(res, 500));
    }
    ok(warm, 'a warm Python slot gets ready');
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'print("warm")' } });
    ok(!r.isError && sc(r).warm === true && sc(r).stdout.text === 'warm\n', 'run_code takes the warm slot', sc(r));
    ok(sc(r).protections && sc(r).protections.cgroup === true, 'the warm run had its cgroup', sc(r).protections);
    await client.close();
    fs.rmSync(state, { recursive: true, force: true });
})().catch((e) => {
    ok(false, 'the MCP session', String(e && e.stack || e));
}).finally(() => process.exit(0));
