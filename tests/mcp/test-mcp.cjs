// test-mcp.cjs: `agentbox mcp` driven by clients nobody here wrote -- the official MCP
// TypeScript SDK (Client + StdioClientTransport) -- and, for what no SDK would send, raw
// JSON-RPC lines. TAP on stdout. Env: AGENTBOX, AB_MCP_STATE (a fresh directory),
// AB_AS_USER (set for the unprivileged variant), NODE_PATH (the SDK's node_modules).
'use strict';
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { spawn, spawnSync } = require('child_process');
const crypto = require('crypto');

const AGENTBOX = process.env.AGENTBOX;
const STATE = process.env.AB_MCP_STATE;
const asUser = !!process.env.AB_AS_USER || process.getuid() !== 0;
let n = 0;
let failures = 0;
function ok(cond, desc, extra) {
    n++;
    console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${desc}`);
    if (!cond) {
        failures++;
        if (extra !== undefined) console.log('# ' + JSON.stringify(extra).slice(0, 3000).replace(/\n/g, '\n# '));
    }
}
function skip(desc, why) {
    n++;
    console.log(`ok ${n} - ${desc} # SKIP ${why}`);
}
let keptRun = null;
// the ASan+UBSan build's binaries (tests/run-suite's root variants: run-as.sh sets
// AB_SANITIZED): the server is several times bigger and slower there, so the budget test's
// memory and time bounds are checked in the plain build only
const SAN = process.env.AB_SANITIZED === '1';
// sleeps this test starts and looks for on the host: the digits of its own pid after the
// point (the other user's variant may run beside it, with sleeps of its own)
const TAG = String(process.pid);
const SAN_WHY = 'under ASan the server is several times bigger and slower; the plain build checks this bound';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function serverEnv() {
    const env = { ...process.env };
    delete env.NODE_PATH;
    return env;
}

async function connect(extraArgs = []) {
    const transport = new StdioClientTransport({
        command: AGENTBOX,
        args: ['mcp', '--state-dir', STATE, ...extraArgs],
        env: serverEnv(),
        stderr: 'pipe',
    });
    const log = [];
    transport.stderr.on('data', (d) => log.push(d.toString()));
    const client = new Client({ name: 'agentbox-test', version: '1.0.0' });
    await client.connect(transport);
    return { client, transport, log };
}

const sc = (r) => r.structuredContent || {};

// A raw JSON-RPC session: lines in, parsed lines out, matched by id.
function raw(extraArgs = []) {
    const p = spawn(AGENTBOX, ['mcp', '--state-dir', STATE, ...extraArgs], {
        env: serverEnv(),
        stdio: ['pipe', 'pipe', 'pipe'],
    });
    let buf = '';
    const msgs = [];
    const waiters = [];
    let nonJson = 0;
    p.stdout.on('data', (d) => {
        buf += d.toString();
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, i);
            buf = buf.slice(i + 1);
            let m;
            try {
                m = JSON.parse(line);
            } catch (e) {
                nonJson++;
                continue;
            }
            msgs.push(m);
            for (const w of waiters.slice()) if (w.pred(m)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(m); }
        }
    });
    p.stderr.on('data', () => {});
    const s = {
        proc: p,
        msgs,
        get nonJson() { return nonJson; },
        send(obj) { p.stdin.write((typeof obj === 'string' ? obj : JSON.stringify(obj)) + '\n'); },
        wait(pred, ms = 20000) {
            const found = msgs.find(pred);
            if (found) return Promise.resolve(found);
            return new Promise((resolve, reject) => {
                const w = { pred, resolve };
                waiters.push(w);
                setTimeout(() => { const k = waiters.indexOf(w); if (k >= 0) { waiters.splice(k, 1); reject(new Error('timeout')); } }, ms);
            });
        },
        reply(id, ms) { return s.wait((m) => m.id === id && ('result' in m || 'error' in m), ms); },
        async request(id, method, params, ms) {
            s.send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
            return s.reply(id, ms);
        },
        close() { p.stdin.end(); return new Promise((r) => p.on('exit', (code, sig) => r({ code, sig }))); },
    };
    return s;
}

async function sdkTests() {
    const { client, log } = await connect(['--max-runs', '4']);
    const tools = (await client.listTools()).tools;
    const names = tools.map((t) => t.name).sort();
    ok(['cancel_run', 'create_workspace', 'delete_workspace', 'list_files', 'read_file', 'run_code', 'sandbox_info', 'wait_run'].every((x) => names.includes(x)), 'tools/list names every tool', names);
    const rc = tools.find((t) => t.name === 'run_code');
    ok(rc && rc.inputSchema.type === 'object' && rc.outputSchema && rc.annotations && rc.annotations.readOnlyHint === false, 'run_code has inputSchema, outputSchema and annotations', rc);

    // Python and Node (the SDK validates structuredContent against outputSchema itself)
    let r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import sys\nprint(6*7)\nprint("warn", file=sys.stderr)' } });
    ok(!r.isError && sc(r).status === 'exited' && sc(r).exit_code === 0 && sc(r).stdout.text === '42\n' && sc(r).stderr.text === 'warn\n', 'python: exited 0 with its stdout and stderr', sc(r));
    ok(r.content[0].type === 'text' && /exited with code 0/.test(r.content[0].text), 'the first block is a text summary', r.content[0]);
    ok(typeof sc(r).cpu_ms === 'number' && typeof sc(r).wall_ms === 'number' && sc(r).protections.network === true, 'usage and protections are reported', sc(r));
    r = await client.callTool({ name: 'run_code', arguments: { language: 'node', code: 'console.log(process.argv.slice(2).join("+"), require("fs").readFileSync("in/x.txt","utf8"))', args: ['a', 'b'], files: [{ path: 'in/x.txt', content: 'aGk=', encoding: 'base64' }] } });
    ok(!r.isError && sc(r).stdout.text === 'a+b hi\n', 'node: args and a base64 input file', sc(r));
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import os, sys\nprint(sys.stdin.read().upper(), os.environ.get("GREETING"), os.environ.get("HOME"))', stdin: 'abc', env: { GREETING: 'hello' } } });
    ok(!r.isError && sc(r).stdout.text === 'ABC hello /work\n', 'stdin and env reach the program', sc(r).stdout);
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import sys; sys.exit(3)' } });
    ok(r.isError === true && sc(r).exit_code === 3, 'a script that fails is isError with its exit code', sc(r));
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'print(1)', limits: { timeout: '100000h' } } });
    ok(r.isError === true && /invalid|above/.test(r.content[0].text), 'a limit above the cap (or out of range) is a tool error the model can read', r);
    r = await client.callTool({ name: 'run_code', arguments: { language: 'cobol', code: 'x' } });
    ok(r.isError === true && /not allowed/.test(r.content[0].text), 'an unknown language is a tool error', r);

    // matplotlib: an image block, and the same bytes through resources/read
    // matplotlib as the sandbox sees it (Debian's python3-matplotlib, which ./setup installs)
    const probe = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import importlib.util; print(importlib.util.find_spec("matplotlib") is not None)' } });
    if (sc(probe).stdout.text !== 'True\n') {
        skip('matplotlib PNG as an image block and a resource', 'python3-matplotlib is not installed (./setup installs it)');
        skip('the PNG resource reads back byte-identical', 'no matplotlib');
    } else {
        r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nplt.plot([1,2,3],[1,4,9])\nplt.savefig("plot.png")\nopen("data.csv","w").write("a,b\\n1,2\\n")\nprint("saved")' } });
        const img = r.content.find((c) => c.type === 'image');
        const link = r.content.find((c) => c.type === 'resource_link' && c.name === 'plot.png');
        ok(!r.isError && img && img.mimeType === 'image/png' && link && r.content.some((c) => c.type === 'resource_link' && c.name === 'data.csv'), 'matplotlib PNG comes back as an image block, and every file as a resource_link', { sc: sc(r), content: r.content.map((c) => c.type + ':' + (c.name || c.mimeType)) });
        if (img && link) {
            const rr = await client.readResource({ uri: link.uri });
            const fromRes = Buffer.from(rr.contents[0].blob || '', 'base64');
            const fromImg = Buffer.from(img.data, 'base64');
            const man = sc(r).files.find((f) => f.path === 'plot.png');
            const sha = crypto.createHash('sha256').update(fromRes).digest('hex');
            ok(fromRes.length > 100 && fromRes.equals(fromImg) && man && man.sha256 === sha && fromRes.slice(1, 4).toString() === 'PNG', 'the PNG resource reads back byte-identical (and matches the manifest sha256)', { len: fromRes.length, sha, man });
            const part = await client.callTool({ name: 'read_file', arguments: { run_id: sc(r).run_id, path: 'data.csv', offset: 2, length: 3 } });
            ok(!part.isError && part.structuredContent.content === 'b\n1' && part.structuredContent.size === 8, 'read_file reads a byte range', part.structuredContent);
        } else {
            skip('the PNG resource reads back byte-identical', 'no image came back');
            skip('read_file reads a byte range', 'no image came back');
        }
    }

    // limits, told apart
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'while True: pass', limits: { timeout: '1s' } } });
    ok(r.isError === true && sc(r).status === 'timeout' && sc(r).limits_hit.includes('timeout'), 'a timeout is status timeout', sc(r));
    if (asUser) {
        skip('an OOM is status oom', 'unprivileged: no memory cgroup for this user here');
    } else {
        r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'x = []\nwhile True: x.append(bytearray(16 << 20))', limits: { memory: '64M', timeout: '30s' } } });
        ok(r.isError === true && sc(r).status === 'oom', 'an OOM is status oom', sc(r));
    }
    // issue 25: a chatty script is not killed: it finishes, the text stays small and ends with
    // what it printed last
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'for i in range(200000): print("line", i)', limits: { timeout: '60s' } } });
    ok(!r.isError && sc(r).status === 'exited' && sc(r).exit_code === 0 && sc(r).stdout.truncated === true && sc(r).limits_hit.includes('output-limit') && r.content[0].text.length < 10000 && /line 199999\n/.test(r.content[0].text), 'a chatty script (2.5 MB) runs to its end; the text stays small and shows the last line', { status: sc(r).status, len: r.content[0].text.length, tail: r.content[0].text.slice(-300) });

    // progress
    const prog = [];
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import time\nfor i in range(3):\n    print("step", i, flush=True)\n    time.sleep(0.9)' } }, undefined, { onprogress: (p) => prog.push(p) });
    ok(!r.isError && prog.length >= 1 && prog.every((p, i) => i === 0 || p.progress > prog[i - 1].progress) && prog.some((p) => /step/.test(p.message || '')), 'a call with a progress token gets increasing progress with the output tail', prog);

    // cancellation: the SDK sends notifications/cancelled; the run is killed, no result comes
    const ac = new AbortController();
    const t0 = Date.now();
    const pc = client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import time; time.sleep(30)' } }, undefined, { signal: ac.signal });
    setTimeout(() => ac.abort('test'), 700);
    let aborted = false;
    try { await pc; } catch (e) { aborted = true; }
    let killed = false;
    for (let i = 0; i < 50 && !killed; i++) { killed = /: interrupted/.test(log.join('')); if (!killed) await sleep(100); }
    ok(aborted && killed && Date.now() - t0 < 10000, 'a cancelled call kills its run (interrupted) well before it would end', log.join('').slice(-600));

    // 4 at once overlap (the server was started with --max-runs 4)
    const code = 'import time, json\ns = time.time()\ntime.sleep(1.5)\nprint(json.dumps([s, time.time()]))';
    const rs = await Promise.all([0, 1, 2, 3].map(() => client.callTool({ name: 'run_code', arguments: { language: 'python', code } })));
    const iv = rs.map((x) => JSON.parse(sc(x).stdout.text || '[0,0]'));
    const latestStart = Math.max(...iv.map((x) => x[0]));
    const earliestEnd = Math.min(...iv.map((x) => x[1]));
    ok(rs.every((x) => !x.isError) && latestStart < earliestEnd, '4 concurrent calls all run at the same time (their sleeps overlap)', iv);
    // a slow run does not block ping or tools/list
    let slowDone = false;
    const slow = client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import time; time.sleep(3)' } }).then((x) => { slowDone = true; return x; });
    await sleep(300);
    await client.ping();
    await client.listTools();
    ok(!slowDone, 'ping and tools/list answer while a run is going (before it ends)', slowDone);
    await slow;

    // soft wait, picked up with wait_run
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import time; time.sleep(2); print("late")', wait_s: 0.3 } });
    ok(!r.isError && sc(r).status === 'running' && typeof sc(r).run_id === 'string', 'a run still going after wait_s answers status running with its run id', sc(r));
    const w = await client.callTool({ name: 'wait_run', arguments: { run_id: sc(r).run_id, wait_s: 20 } });
    ok(!w.isError && sc(w).status === 'exited' && sc(w).stdout.text === 'late\n', 'wait_run picks up its result', sc(w));
    const w2 = await client.callTool({ name: 'wait_run', arguments: { run_id: sc(r).run_id } });
    ok(sc(w2).status === 'exited', 'wait_run answers again for a finished run (from its record)', sc(w2));

    // cancel_run: the run is killed; whoever waits for it gets status interrupted
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import time; time.sleep(30)', wait_s: 0.3 } });
    const cr = await client.callTool({ name: 'cancel_run', arguments: { run_id: sc(r).run_id } });
    const cw = await client.callTool({ name: 'wait_run', arguments: { run_id: sc(r).run_id, wait_s: 20 } });
    ok(sc(cr).state === 'cancelling' && sc(cw).status === 'interrupted' && cw.isError === true && sc(cw).wall_ms < 10000, 'cancel_run kills a run; wait_run then reports it interrupted', [sc(cr), sc(cw).status, sc(cw).wall_ms]);

    // workspaces: files persist between runs, each run on its own copy
    const ws = await client.callTool({ name: 'create_workspace', arguments: { files: [{ path: 'n.txt', content: '1' }], ttl_s: 600 } });
    const wid = sc(ws).workspace_id;
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'n = int(open("n.txt").read()); open("n.txt","w").write(str(n+1)); print(n)', workspace_id: wid } });
    const r2 = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'print(open("n.txt").read())', workspace_id: wid } });
    ok(sc(r).stdout.text === '1\n' && sc(r2).stdout.text === '2\n', 'a workspace keeps what a run left for the next run', [sc(r).stdout, sc(r2).stdout]);
    const del = await client.callTool({ name: 'delete_workspace', arguments: { workspace_id: wid } });
    const r3 = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'print(1)', workspace_id: wid } });
    ok(!del.isError && r3.isError === true, 'a deleted workspace is gone', r3.content);

    // sandbox_info
    let infoDone = false;
    const infoP = client.callTool({ name: 'sandbox_info', arguments: {} }).then((x) => { infoDone = true; return x; });
    await client.ping();
    ok(!infoDone, 'the first sandbox_info (its interpreter probes are runs) does not hold up a ping', infoDone);
    r = await infoP;
    ok(!r.isError && sc(r).languages.python.version && sc(r).languages.node.version && Array.isArray(sc(r).languages.python.packages) && sc(r).limits.timeout, 'sandbox_info: interpreters, versions, packages, limits', Object.keys(sc(r)));

    // files of a run: symlinks and other runs are never served
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import os\nos.symlink("/etc/passwd", "link")\nopen("ok.txt","w").write("fine")' } });
    const id = sc(r).run_id;
    let e1 = null;
    try { await client.readResource({ uri: `agentbox://runs/${id}/files/link` }); } catch (e) { e1 = e; }
    ok(e1 && !/root:/.test(String(e1)), 'resources/read never follows a link the script made', String(e1));
    let e2 = null;
    try { await client.readResource({ uri: `agentbox://runs/${id}/files/..%2f..%2freport.json` }); } catch (e) { e2 = e; }
    ok(e2 !== null, 'resources/read refuses a path traversal', String(e2));
    const rf = await client.callTool({ name: 'read_file', arguments: { run_id: id, path: '../report.json' } });
    ok(rf.isError === true && !/schema_version/.test(JSON.stringify(rf)), 'read_file refuses a path traversal', rf.content);
    let e3 = null;
    try { await client.readResource({ uri: 'agentbox://runs/aaaaaaaaaaaa/files/ok.txt' }); } catch (e) { e3 = e; }
    ok(e3 !== null, 'a resource URI of a run that is not ours is not found', String(e3));
    const good = await client.readResource({ uri: `agentbox://runs/${id}/files/ok.txt` });
    keptRun = id;
    ok(good.contents[0].text === 'fine', 'resources/read serves a regular file of the run', good.contents);

    await client.close();
    await sleep(1000);
    const all = log.join('');
    ok(!/AddressSanitizer|LeakSanitizer|runtime error:/.test(all), 'the server said nothing of memory errors or leaks on stderr (sanitizer builds)', all.slice(-2000));
}

async function rawTests() {
    const s = raw(['--max-message', '1M']);
    // before initialize
    let m = await s.request(1, 'tools/list');
    ok(m.error && m.error.code === -32600, 'a request before initialize is refused (-32600)', m);
    m = await s.request(2, 'ping');
    ok(m.result && Object.keys(m.result).length === 0, 'ping works before initialize', m);
    // modern era: stateless, per-request _meta
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    m = await s.request('d1', 'server/discover', { _meta: meta });
    ok(m.result && m.result.resultType === 'complete' && m.result.supportedVersions.includes('2026-07-28') && m.result.supportedVersions.includes('2025-11-25') && m.result._meta['io.modelcontextprotocol/serverInfo'].name === 'agentbox' && typeof m.result.ttlMs === 'number', 'server/discover (2026-07-28) answers versions, capabilities, serverInfo', m);
    m = await s.request('d2', 'tools/list', { _meta: { ...meta, 'io.modelcontextprotocol/protocolVersion': '1900-01-01' } });
    ok(m.error && m.error.code === -32022 && m.error.data.requested === '1900-01-01' && m.error.data.supported.includes('2026-07-28'), 'an unsupported per-request version is -32022 with the supported list', m);
    m = await s.request('d3', 'tools/list', { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } });
    ok(m.error && m.error.code === -32602, 'a modern request without clientCapabilities is -32602', m);
    m = await s.request('d4', 'tools/list', { _meta: meta });
    ok(m.result && m.result.resultType === 'complete' && m.result.tools.length >= 8, 'a modern request is served without initialize', m.error);
    m = await s.request('d5', 'tools/call', { _meta: meta, name: 'run_code', arguments: { language: 'python', code: 'print(7)' } });
    ok(m.result && m.result.resultType === 'complete' && m.result.structuredContent.stdout.text === '7\n', 'a modern tools/call runs code', m);
    // legacy handshake
    m = await s.request(3, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } });
    ok(m.result && m.result.protocolVersion === '2025-06-18', 'initialize negotiates 2025-06-18', m);
    s.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    m = await s.request(4, 'initialize', { protocolVersion: '2025-11-25', capabilities: {} });
    ok(m.error && m.error.code === -32600, 'a second initialize is refused', m);
    // malformed input
    s.send('{"jsonrpc": "2.0", "id": 5, "method": ');
    m = await s.wait((x) => x.error && x.error.code === -32700);
    ok(m.id === null, 'invalid JSON is -32700 with id null', m);
    s.send('[' + JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'ping' }) + ']');
    m = await s.wait((x) => x.error && x.error.code === -32600 && /batch/.test(x.error.message));
    ok(m.id === null, 'a batch is -32600', m);
    s.send('['.repeat(100000) + ']'.repeat(100000));
    m = await s.wait((x) => x.error && x.error.code === -32700 && s.msgs.filter((y) => y.error && y.error.code === -32700).length >= 2);
    ok(m.id === null, 'deep nesting is -32700, no crash', m);
    s.send({ jsonrpc: '2.0', id: { a: 1 }, method: 'ping' });
    m = await s.wait((x) => x.error && /id must/.test(x.error.message));
    ok(m.id === null && m.error.code === -32600, 'an id of the wrong type is -32600', m);
    m = await s.request(7, 5);
    ok(m.error && m.error.code === -32600, 'a method that is not a string is -32600', m);
    m = await s.request(8, 'tools/call', []);
    ok(m.error && m.error.code === -32602, 'params that are not an object is -32602', m);
    m = await s.request(9, 'tools/call', { name: 42 });
    ok(m.error && m.error.code === -32602, 'a tool name that is not a string is -32602', m);
    m = await s.request(10, 'no/such/method', {});
    ok(m.error && m.error.code === -32601, 'an unknown method is -32601', m);
    m = await s.request(11, 'tools/call', { name: 'no_such_tool', arguments: {} });
    ok(m.error && m.error.code === -32602, 'an unknown tool is -32602', m);
    m = await s.request(12, 'tools/call', { name: 'run_code', arguments: { language: 'python', code: 5 } });
    ok(m.result && m.result.isError === true, 'arguments of the wrong type are a tool error', m);
    const before = s.msgs.length;
    s.send({ jsonrpc: '2.0', method: 'no/such/notification', params: { x: 1 } });
    s.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'nothing' } });
    s.send({ jsonrpc: '2.0', method: 42 });
    m = await s.request(13, 'ping');
    ok(s.msgs.length === before + 1, 'notifications, even malformed ones, are never answered', s.msgs.slice(before));
    // a line over --max-message (1M here; the test below is 100 MB)
    s.send('{"jsonrpc":"2.0","id":14,"method":"ping","params":{"x":"' + 'x'.repeat(100 * 1024 * 1024) + '"}}');
    m = await s.wait((x) => x.error && /too large/.test(x.error.message), 60000);
    ok(m.id === 14 && m.error.code === -32600 && m.error.data.max_bytes === 1024 * 1024, 'a 100 MB line is refused as too large, by its id', m);
    m = await s.request(15, 'ping');
    ok(m.result !== undefined, 'and the server keeps serving', m);
    // duplicate ids while the first is in flight
    s.send({ jsonrpc: '2.0', id: 16, method: 'tools/call', params: { name: 'run_code', arguments: { language: 'python', code: 'import time; time.sleep(1); print("first")' } } });
    await sleep(200);
    s.send({ jsonrpc: '2.0', id: 16, method: 'ping' });
    m = await s.wait((x) => x.id === 16 && x.error);
    const first = await s.wait((x) => x.id === 16 && x.result);
    ok(m.error.code === -32600 && first.result.structuredContent.stdout.text === 'first\n', 'a duplicate id in flight is -32600; the first request still gets its result', [m, first.result.structuredContent.status]);
    // resources outside a run
    m = await s.request(17, 'resources/read', { uri: 'file:///etc/passwd' });
    ok(m.error && !JSON.stringify(m).includes('root:'), 'resources/read of a non-agentbox URI is an error', m);
    m = await s.request(18, 'resources/read', { uri: 'agentbox://runs/../../files/etc/passwd' });
    ok(m.error && !JSON.stringify(m).includes('root:'), 'a malformed run id in a URI is an error', m);
    m = await s.request(19, 'resources/templates/list');
    ok(m.result && m.result.resourceTemplates[0].uriTemplate === 'agentbox://runs/{run_id}/files/{path}', 'resources/templates/list names the URI template', m);
    // notifications/cancelled: the run is killed and its request never answered
    s.send({ jsonrpc: '2.0', id: 30, method: 'tools/call', params: { name: 'run_code', arguments: { language: 'python', code: 'import time; time.sleep(30)' } } });
    await sleep(500);
    s.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 30, reason: 'test' } });
    await sleep(1500);
    m = await s.request(31, 'ping');
    ok(!s.msgs.some((x) => x.id === 30), 'a cancelled request gets no reply, ever', s.msgs.filter((x) => x.id === 30));
    ok(s.nonJson === 0, 'stdout carried nothing but JSON-RPC messages', s.nonJson);
    // every request got exactly one reply
    const ids = s.msgs.filter((x) => x.id !== undefined && x.id !== null).map((x) => JSON.stringify(x.id));
    const dup = ids.filter((x, i) => ids.indexOf(x) !== i && x !== '16');
    ok(dup.length === 0, 'no request was answered twice', dup);
    const ex = await s.close();
    ok(ex.code === 0, 'the server exits 0 at the end of its input', ex);
}

// issue 24: what the server holds for its clients is bounded in bytes. One run slot, busy; 64
// calls of 15 MiB of code each then: the byte budget (128M here) takes a few, the rest are
// answered busy at once; the server's memory stays under the budget plus 64 MiB; tools/list is
// answered all along, within 5 s (a server that waited on the held run would take its 300 s;
// one that keeps answering still parses the 15 MiB calls between, up to 1.5 s here with the
// suite's other tests beside it); a call with more code than a run takes, and one over
// --max-message, are refused on arrival.
async function budgetTests() {
    const MiB = 1024 * 1024;
    const s = raw(['--max-runs', '1', '--max-pending-bytes', '128M']);
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    const call = (id, args) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { _meta: meta, name: 'run_code', arguments: args } });
    const write = (line) => new Promise((resolve) => { if (s.proc.stdin.write(line + '\n')) resolve(); else s.proc.stdin.once('drain', resolve); });
    let peak = 0;
    const rss = () => {
        try {
            const st = require('fs').readFileSync(`/proc/${s.proc.pid}/status`, 'utf8');
            const kb = Number((/VmRSS:\s+(\d+)/.exec(st) || [0, 0])[1]);
            if (kb > peak) peak = kb;
        } catch (e) { /* gone */ }
    };
    const sampler = setInterval(rss, 20);
    const lat = [];
    let k = 0;
    const listTime = async () => {
        const id = 'list' + k++;
        const t0 = Date.now();
        const m = await s.request(id, 'tools/list', { _meta: meta }, 30000);
        lat.push(m.result ? Date.now() - t0 : 99999);
    };

    // a call with more code than a run takes: refused on arrival, not when its turn comes
    let t0 = Date.now();
    await write(JSON.stringify(call('c20', { language: 'python', code: '#' + 'x'.repeat(20 * MiB) })));
    let m = await s.reply('c20', 30000);
    ok(m.result && m.result.isError && /at most 16777216/.test(JSON.stringify(m.result.content)) && Date.now() - t0 < 10000,
        'a call with 20 MiB of code is refused on arrival (a run takes 16 MiB)', [m.result && m.result.content, Date.now() - t0]);
    await listTime();

    m = await s.request('blk', 'tools/call', { _meta: meta, name: 'run_code', arguments: { language: 'python', code: 'import time; time.sleep(300)', wait_s: 0.1 } });
    const blk = m.result && m.result.structuredContent && m.result.structuredContent.run_id;
    ok(!!blk && m.result.structuredContent.status === 'running', 'a run holds the one slot', m);
    const code = '#' + 'x'.repeat(15 * MiB);
    for (let i = 0; i < 64; i++) {
        // a long wait_s: on a loaded host the 64 writes can outlast the default 45 s, and a
        // taken call would answer "still queued" before its run (not what is tested here)
        await write(JSON.stringify(call('b' + i, { language: 'python', code, wait_s: 280 })));
        if (i % 4 === 3) await listTime();
    }
    t0 = Date.now();
    await write(JSON.stringify(call('c32', { language: 'python', code: '#' + 'y'.repeat(32 * MiB) })));
    m = await s.reply('c32', 30000);
    ok(m.error && m.error.code === -32600 && /too large/.test(m.error.message) && (SAN || Date.now() - t0 < 5000),
        'a 32 MiB call (over --max-message) is refused on arrival, by its id', [m, Date.now() - t0]);
    await listTime();
    await sleep(500);
    const busy = [...Array(64).keys()].filter((i) => s.msgs.some((x) => x.id === 'b' + i && x.result && x.result.isError && /busy.*max-pending-bytes/.test(JSON.stringify(x.result.content))));
    const answered = [...Array(64).keys()].filter((i) => s.msgs.some((x) => x.id === 'b' + i));
    if (SAN) {
        ok(busy.length >= 48 && busy.length < 64, `of 64 calls of 15 MiB, the budget took ${64 - busy.length} and answered ${busy.length} busy`, [busy.length, answered.length]);
        skip('the server held at most its budget + 64 MiB', SAN_WHY);
    } else {
        ok(busy.length >= 48 && busy.length === answered.length && busy.length < 64,
            `of 64 calls of 15 MiB, the budget took ${64 - busy.length} and answered ${busy.length} busy at once`, [busy.length, answered.length]);
        rss();
        ok(peak > 0 && peak * 1024 < 192 * MiB, `the server held at most ${Math.round(peak / 1024)} MiB (its budget 128M + 64 MiB)`, peak);
    }

    // the slot frees: the calls the budget took run, and tools/list still answers meanwhile
    await s.request('cx', 'tools/call', { _meta: meta, name: 'cancel_run', arguments: { run_id: blk } });
    const taken = [...Array(64).keys()].filter((i) => !busy.includes(i));
    const t1 = Date.now();
    while (Date.now() - t1 < 180000 && !taken.every((i) => s.msgs.some((x) => x.id === 'b' + i))) {
        await listTime();
        await sleep(200);
    }
    ok(taken.every((i) => s.msgs.some((x) => x.id === 'b' + i && x.result && x.result.structuredContent && x.result.structuredContent.exit_code === 0)),
        'each call the budget took ran, once the slot was free', taken.map((i) => (s.msgs.find((x) => x.id === 'b' + i) || {}).result));
    clearInterval(sampler);
    if (SAN)
        skip(`tools/list answered within 5 s all along (slowest ${Math.max(...lat)} ms of ${lat.length})`, SAN_WHY);
    else
        ok(lat.length > 20 && Math.max(...lat) < 5000, `tools/list answered within 5 s all along, never behind the held run (slowest ${Math.max(...lat)} ms of ${lat.length})`, lat);
    ok(s.nonJson === 0, 'stdout carried nothing but JSON-RPC messages', s.nonJson);
    await s.close();
}

// issue 24: the server hands the library paths under its state directory as strings, which
// each run resolves again: under a parent another user may rename things in, it refuses to
// start; under a sticky one (/tmp) it starts.
function stateDirTests() {
    const fs = require('fs');
    const shared = STATE + '-shared';
    fs.mkdirSync(shared);
    fs.chmodSync(shared, 0o777);
    let r = spawnSync(AGENTBOX, ['mcp', '--state-dir', shared + '/state'], { input: '', env: serverEnv(), encoding: 'utf8', timeout: 30000 });
    ok(r.status === 125 && r.stderr.includes(`is under '${shared}'`) && /another user can rename/.test(r.stderr),
        'a state directory under a directory others can write: refused, naming it', [r.status, r.stderr]);
    fs.chmodSync(shared, 0o1777);
    r = spawnSync(AGENTBOX, ['mcp', '--state-dir', shared + '/state2'], { input: '', env: serverEnv(), encoding: 'utf8', timeout: 30000 });
    ok(r.status === 0, 'under a sticky one (like /tmp): the server starts', [r.status, r.stderr]);
}

async function restartAndRetention() {
    // a new server on the same state finds the runs of the last one; --keep-runs removes runs
    const fs = require('fs');
    const cfg = STATE + '.config.json';
    fs.writeFileSync(cfg, JSON.stringify({ 'keep-runs': 2, cap: { timeout: '20s' }, languages: ['python'] }));
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    const s0 = raw();
    let m = await s0.request(1, 'resources/read', { _meta: meta, uri: `agentbox://runs/${keptRun}/files/ok.txt` });
    ok(m.result && m.result.contents[0].text === 'fine', 'a restarted server serves the files of a run of the last one', m);
    await s0.close();
    const s = raw(['--config', cfg]);
    m = await s.request(2, 'tools/call', { _meta: meta, name: 'run_code', arguments: { language: 'node', code: '1' } });
    ok(m.result && m.result.isError === true && /not allowed/.test(m.result.content[0].text), 'the operator policy from --config: node not allowed', m.result);
    m = await s.request(3, 'tools/call', { _meta: meta, name: 'run_code', arguments: { language: 'python', code: '1', limits: { timeout: 60 } } });
    ok(m.result && m.result.isError === true && /above this server's cap/.test(m.result.content[0].text), 'a call cannot raise a limit over the cap', m.result);
    m = await s.request(4, 'tools/call', { _meta: meta, name: 'run_code', arguments: { language: 'python', code: '1' } });
    ok(m.result && m.result.structuredContent.limits.timeout === 20000, 'the cap is the default when it is lower', m.result.structuredContent && m.result.structuredContent.limits);
    const ids = [];
    for (let i = 0; i < 3; i++) {
        m = await s.request(10 + i, 'tools/call', { _meta: meta, name: 'run_code', arguments: { language: 'python', code: `open("f.txt","w").write("${i}")` } });
        ids.push(m.result.structuredContent.run_id);
    }
    m = await s.request(20, 'resources/read', { _meta: meta, uri: `agentbox://runs/${ids[0]}/files/f.txt` });
    const m2 = await s.request(21, 'resources/read', { _meta: meta, uri: `agentbox://runs/${ids[2]}/files/f.txt` });
    ok(m.error && m.error.code === -32602 && m2.result && m2.result.contents[0].text === '2', 'retention (--keep-runs 2) removed the oldest run, kept the newest', [m, m2]);
    const jobs = fs.existsSync(STATE + '/jobs') ? fs.readdirSync(STATE + '/jobs').length : -1;
    ok(jobs === 2, 'two run records are left', jobs);
    await s.close();
}

async function v2Client() {
    // the v2 SDK client (@modelcontextprotocol/client): the 2026-07-28 era pinned (it probes
    // with server/discover, sends the per-request _meta and checks every result's shape), and
    // its auto negotiation
    let V2;
    try {
        V2 = { ...require('@modelcontextprotocol/client'), ...require('@modelcontextprotocol/client/stdio') };
    } catch (e) {
        skip('the v2 SDK client, 2026-07-28 pinned', 'no @modelcontextprotocol/client: ' + e.message);
        return;
    }
    for (const mode of [{ pin: '2026-07-28' }, 'auto']) {
        const t = new V2.StdioClientTransport({ command: AGENTBOX, args: ['mcp', '--state-dir', STATE], env: serverEnv(), stderr: 'pipe' });
        t.stderr.on('data', () => {});
        const c = new V2.Client({ name: 'v2', version: '1' }, { versionNegotiation: { mode } });
        const label = `v2 SDK client, negotiation ${JSON.stringify(mode)}`;
        try {
            await c.connect(t);
            const tools = await c.listTools();
            const prog = [];
            const r = await c.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import time\nprint("v2", flush=True)\ntime.sleep(1.3)\nopen("o.txt","w").write("x")' } }, { onprogress: (p) => prog.push(p) });
            const rr = await c.readResource({ uri: `agentbox://runs/${r.structuredContent.run_id}/files/o.txt` });
            ok(c.getNegotiatedProtocolVersion() === '2026-07-28' && tools.tools.length >= 8 && r.structuredContent.stdout.text === 'v2\n' && prog.length >= 1 && rr.contents[0].text === 'x', `${label}: 2026-07-28, tools, run_code with progress, resources/read`, { v: c.getNegotiatedProtocolVersion(), prog: prog.length, sc: r.structuredContent.status });
        } catch (e) {
            ok(false, label, String(e && e.stack));
        }
        await c.close();
    }
}

// Warm slots (issue 19, docs/mcp.md "Warm slots"): --warm 1 keeps a slot per language; a
// run_code of the default class takes one, anything else runs cold.
const WARM_PROBES = {
    python: 'import os, sys\nprint(sys.argv, __name__, __file__, sys.path[0], os.getcwd())\n' +
        'print(sorted(os.environ.items()), sorted(os.listdir("/proc/self/fd")))\n' +
        'open("out.txt", "w").write("x")\ndef f():\n    1 / 0\nf()\n',
    node: 'console.log(process.argv.slice(1), process.execArgv, __filename, require.main === module, process.cwd());\n' +
        'console.log(Object.keys(process.env).sort().map((k) => k + "=" + process.env[k]));\n' +
        'require("fs").writeFileSync("out.txt", "x");\nthrow new Error("boom");\n',
};
// structuredContent without what differs run to run: ids (also in the files' links), timings
function runShape(x) {
    const c = JSON.parse(JSON.stringify(x));
    for (const k of ['agentbox_run_id', 'wall_ms', 'cpu_ms', 'queue_ms', 'memory_peak_bytes', 'warm']) delete c[k];
    return JSON.stringify(c).split(x.run_id).join('RUN').split(x.agentbox_run_id || '\0').join('ABRUN');
}
async function probeRuns(client) {
    const out = {};
    for (const lang of ['python', 'node']) {
        out[lang] = sc(await client.callTool({ name: 'run_code', arguments: { language: lang, code: WARM_PROBES[lang], args: ['a', 'b c'] } }));
    }
    return out;
}
async function closed(client, transport) {
    await client.close();
    await new Promise((res) => { if (transport._process && transport._process.exitCode === null) transport._process.on('exit', res); else res(); });
}

async function warmTests() {
    // the same calls on a server without warm slots first (cold), compared below
    const c0 = await connect([]);
    const cold = await probeRuns(c0.client);
    await closed(c0.client, c0.transport);
    const { client, transport, log } = await connect(['--warm', '1', '--preimport', 'json,csv', '--warm-idle', '5m']);
    const info = async () => sc(await client.callTool({ name: 'sandbox_info', arguments: {} })).warm || {};
    const ready = async (lang) => {
        for (let i = 0; i < 300; i++) {
            const w = await info();
            const c = (w.classes || []).find((x) => x.language === lang);
            if (c && c.ready >= 1) return w;
            await sleep(100);
        }
        return info();
    };
    let w = await ready('python');
    await ready('node');
    const py = (w.classes || []).find((x) => x.language === 'python') || {};
    ok(w.slots_per_language === 1 && JSON.stringify(w.preimport && w.preimport.python) === '["json","csv"]' && py.ready === 1 && w.memory_bytes > 1000000, 'sandbox_info: the warm settings, a ready Python slot and the memory the slots hold', w);
    let r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import sys\nprint(sys.argv[1:], "json" in sys.modules, __file__)', args: ['x y'], limits: { timeout: 7 } } });
    ok(!r.isError && sc(r).warm === true && sc(r).stdout.text === "['x y'] True /work/script.py\n" && sc(r).limits.timeout === 7000, 'a run_code of the default class takes the warm slot (its own args and timeout, the pre-imports in place)', sc(r));
    r = await client.callTool({ name: 'run_code', arguments: { language: 'node', code: 'console.log(process.argv.length, require.main === module)' } });
    ok(!r.isError && sc(r).warm === true && sc(r).stdout.text === '2 true\n', 'node: warm too', sc(r));
    await ready('python');
    await ready('node');
    const warm = await probeRuns(client);
    for (const lang of ['python', 'node']) {
        ok(cold[lang].warm === false && warm[lang].warm === true && cold[lang].status === 'exited' && cold[lang].exit_code === 1 &&
            cold[lang].files.length === 1 && runShape(cold[lang]) === runShape(warm[lang]),
        `${lang}: the same call cold (a server without --warm) and warm: the results are the same, ids and timings aside`,
        { cold: runShape(cold[lang]), warm: runShape(warm[lang]) });
    }
    await ready('python');
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'import json; print(json.__file__)', files: [{ path: 'json.py', content: 'print("mine")' }] } });
    ok(!r.isError && sc(r).warm === false && sc(r).stdout.text === 'mine\n/work/json.py\n', 'a file that shadows a pre-imported module: the slot declines, the run is cold and imports the file', sc(r));
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'print(input())', stdin: 'in' } });
    ok(!r.isError && sc(r).warm === false && sc(r).stdout.text === 'in\n', 'stdin: cold', sc(r));
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'print(1)', limits: { memory: '300M' } } });
    ok(!r.isError && sc(r).warm === false, 'a limit of its own (memory): cold', sc(r));
    r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'raise SystemExit(5)' } });
    ok(r.isError === true && sc(r).warm === true && sc(r).exit_code === 5, 'the slot was still there for the next run of the class', sc(r));
    w = await ready('python');
    const py2 = (w.classes || []).find((x) => x.language === 'python') || {};
    ok(py2.warm_runs === 3 && py2.cold_runs === 1 && py2.slots_started >= 4 && py2.slots_lost === 0, 'sandbox_info counts the warm and cold runs of the class', py2);
    // the slots are the server's grandchildren (the library's intermediate process between;
    // argv[0] agentbox-supervisor, then "slot")
    const procs = spawnSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' }).stdout.split('\n')
        .map((l) => l.trim().match(/^(\d+)\s+(\d+)\s+(.*)$/)).filter(Boolean);
    const parent = Object.fromEntries(procs.map((m) => [m[1], m[2]]));
    const mine = procs.filter((m) => m[3].startsWith('agentbox-supervisor slot') &&
        parent[m[2]] === String(transport._process.pid)).map((m) => m[1]);
    ok(mine.length >= 2, 'while it runs, the server has a slot per language', mine);
    await closed(client, transport);
    await sleep(300);
    // this server's slots only (other tests' slots may run beside this one): each pid gone,
    // or (reused since) no longer a slot
    const slotArgs = (pid) => { try { return require('fs').readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '); } catch (e) { return ''; } };
    const left = mine.filter((pid) => slotArgs(pid).startsWith('agentbox-supervisor slot'));
    ok(mine.length >= 2 && left.length === 0, 'the server lets its slots go when it exits', { left, log: log.join('').slice(-2000) });
}

// issue 25: what an agent meets, through the official SDK and the server's defaults
async function issue25Tests() {
    const { client } = await connect();
    const call = (args) => client.callTool({ name: 'run_code', arguments: args });
    const text = (r) => (r.content[0] && r.content[0].text) || '';

    // 8 sleeping runs at once on this machine's cores: none waits for a core (the server used
    // to run at most one per core; 8 x time.sleep(1) took 4.2 s on 2)
    const rs = await Promise.all([...Array(8)].map(() => call({ language: 'python', code: 'import time; time.sleep(1)' })));
    const waited = rs.map((x) => sc(x).queue_ms);
    ok(rs.every((x) => !x.isError) && Math.max(...waited) < 500, '8 sleeping runs at once: none queued behind a core count', waited);
    // ... but what runs hold is bounded: two runs whose memory limits together pass the
    // host's memory go one after the other
    const info = sc(await client.callTool({ name: 'sandbox_info', arguments: {} }));
    const budget = info.server && info.server.memory_budget_bytes;
    if (typeof budget === 'number' && budget > 0) {
        const big = String(Math.floor(budget * 0.6));
        const two = await Promise.all([0, 1].map(() => call({ language: 'python', code: 'import time; time.sleep(1.5)', limits: { memory: big } })));
        const q = two.map((x) => sc(x).queue_ms);
        ok(two.every((x) => !x.isError) && Math.max(...q) >= 1000, 'two runs that would hold more than the host\'s memory: the second waits for the first', { q, budget });
    } else {
        ok(false, 'sandbox_info says the memory budget', info.server);
    }

    // an uploaded input the run did not change is not returned as a resource_link
    let r = await call({ language: 'python', code: 'rows = open("sales.csv").read().splitlines()\nopen("summary.txt","w").write(str(len(rows)))', files: [{ path: 'sales.csv', content: 'region,amount\nwest,10\n' }] });
    const links = r.content.filter((c) => c.type === 'resource_link').map((c) => c.name);
    const csv = sc(r).files.find((f) => f.path === 'sales.csv');
    ok(!r.isError && links.includes('summary.txt') && !links.includes('sales.csv') && csv && csv.origin === 'unchanged', 'only what the run created or changed is a resource_link; the input stays in structuredContent', { links, csv });

    // the caller's words: a spec's keys, never a flag it did not use; every error has a fix
    r = await call({ language: 'python', code: 'while True: pass', limits: { timeout: '1s' } });
    ok(sc(r).status === 'timeout' && /limits\.timeout/.test(sc(r).fix || '') && !/--/.test((sc(r).fix || '') + text(r)), 'a timeout\'s fix names limits.timeout, no flag', { fix: sc(r).fix });
    r = await call({ language: 'python', code: 'print(1)', limits: { memory: '5' } });
    ok(r.isError === true && /limits\.memory/.test(text(r)) && /fix:/.test(text(r)) && !/--memory/.test(text(r)), 'a limit that does not parse: in the call\'s words, with a fix', text(r));

    // code without a language is Python
    r = await call({ code: 'import sys; print(sys.version_info[0])' });
    ok(!r.isError && sc(r).stdout.text === '3\n', 'run_code without a language runs Python', sc(r));

    // honest figures: the CPU of a killed run, the memory of a short one
    r = await call({ language: 'python', code: 'import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\nprint(int(time.process_time() * 1000), flush=True)\ntime.sleep(60)', limits: { timeout: '6s' } });
    const own = parseInt(sc(r).stdout.text, 10);
    ok(sc(r).status === 'timeout' && own > 0 && sc(r).cpu_ms >= own - 20 && !/CPU 0\.0/.test(text(r)), 'a killed run: cpu_ms counts what the script used before the kill', { cpu_ms: sc(r).cpu_ms, own, line: text(r).split('\n')[0] });
    r = await call({ language: 'python', code: 'print(6 * 7)' });
    const peak = sc(r).memory_peak_bytes;
    ok(!r.isError && (peak === null || peak > 1048576) && !/peak memory [0-9.]+ KiB/.test(text(r)), 'print(6*7): the peak is the interpreter\'s, or not measured, never agentbox-init\'s', { peak, line: text(r).split('\n')[0] });
    // a default this host cannot apply is no warning line in every text
    const mine = (sc(r).warnings || []).filter((w) => !/^default \S+ /.test(w)).length;
    ok(mine > 0 ? /warnings: /.test(text(r)) : !/warnings: /.test(text(r)), 'the text counts only the warnings about this run', { warnings: sc(r).warnings, tail: text(r).slice(-200) });
    await client.close();
}

// issue 28: packages on request, through run_code and create_session
async function requirementsTests() {
    const fs = require('fs');
    const path = require('path');
    const cacheEnv = { ...serverEnv(), AGENTBOX_CACHE_DIR: path.join(STATE, '..', 'mcp-envs') };
    fs.mkdirSync(cacheEnv.AGENTBOX_CACHE_DIR, { recursive: true, mode: 0o700 });
    const start = async (extra) => {
        const transport = new StdioClientTransport({ command: AGENTBOX, args: ['mcp', '--state-dir', STATE, ...extra], env: cacheEnv, stderr: 'pipe' });
        const client = new Client({ name: 'agentbox-test', version: '1.0.0' });
        await client.connect(transport);
        return client;
    };
    let client = await start([]);
    const tools = (await client.listTools()).tools;
    const rc = tools.find((t) => t.name === 'run_code');
    const cs = tools.find((t) => t.name === 'create_session');
    ok(rc.inputSchema.properties.requirements && cs.inputSchema.properties.requirements, 'run_code and create_session take requirements');
    const code = "const isNumber = require('is-number'); console.log('isNumber', isNumber(5))";
    let r = await client.callTool({ name: 'run_code', arguments: { language: 'node', code, requirements: ['is-number@7.0.0'] } });
    ok(!r.isError && /isNumber true/.test(sc(r).stdout && sc(r).stdout.text), 'run_code with requirements: the module loads', { text: ttext(r).slice(0, 400) });
    r = await client.callTool({ name: 'run_code', arguments: { language: 'node', code: "console.log(require('is-number')(1))", requirements: ['is-number@7.0.0'] } });
    ok(!r.isError && /true/.test(sc(r).stdout && sc(r).stdout.text), 'run_code with the same requirements again (cached)', { text: ttext(r).slice(0, 300) });
    const ses = await client.callTool({ name: 'create_session', arguments: { language: 'node', requirements: ['is-number@7.0.0'] } });
    const sid = sc(ses).session_id;
    r = sid ? await client.callTool({ name: 'run_code', arguments: { session_id: sid, code: "require('is-number')(2)" } }) : null;
    ok(r && !r.isError && /true/.test(ttext(r)), 'create_session with requirements: a cell loads the module', { ses: ttext(ses).slice(0, 300), r: r && ttext(r).slice(0, 300) });
    if (sid) await client.callTool({ name: 'close_session', arguments: { session_id: sid } });
    await client.close();
    client = await start(['--requirements', 'deny']);
    r = await client.callTool({ name: 'run_code', arguments: { language: 'node', code, requirements: ['is-number@7.0.0'] } });
    ok(r.isError === true && /requirements=deny/.test(ttext(r)), 'agentbox mcp --requirements deny: a call with requirements is a tool error naming the rule', ttext(r).slice(0, 300));
    await client.close();
    client = await start(['--allow-packages', 'lodash']);
    r = await client.callTool({ name: 'run_code', arguments: { language: 'node', code, requirements: ['is-number@7.0.0'] } });
    ok(r.isError === true && /allow-list/.test(ttext(r)) && /is-number/.test(ttext(r)), 'agentbox mcp --allow-packages: another package is refused, named', ttext(r).slice(0, 300));
    await client.close();
}

// issue 27: sessions -- one live sandbox per session, cells as in a notebook
const ttext = (r) => (r.content && r.content[0] && r.content[0].text) || '';
const psCount = (pat) => spawnSync('sh', ['-c', `ps -eo args | grep -c "${pat}"`], { encoding: 'utf8' }).stdout.trim();
async function sessionTests() {
    const { client, transport, log } = await connect(['--max-sessions', '4']);
    const names = (await client.listTools()).tools.map((t) => t.name);
    ok(names.includes('create_session') && names.includes('close_session'), 'tools/list names create_session and close_session', names);
    const cell = (sid, code, extra = {}, opts) => client.callTool({ name: 'run_code', arguments: { session_id: sid, code, ...extra } }, undefined, opts);

    let r = await client.callTool({ name: 'create_session', arguments: { language: 'python', files: [{ path: 'data/in.txt', content: 'hello' }] } });
    const sid = sc(r).session_id;
    ok(!r.isError && typeof sid === 'string' && ttext(r).includes(sid), 'create_session answers once ready, with a session_id (structuredContent and text)', r);
    r = await cell(sid, 'x = 1\nprint(open("data/in.txt").read())');
    ok(!r.isError && sc(r).status === 'ok' && sc(r).stdout.text === 'hello\n' && sc(r).session_id === sid, 'a cell runs in the session, with the files given to create_session', sc(r));
    r = await cell(sid, 'x += 1; x');
    ok(!r.isError && sc(r).result && sc(r).result.text === '2' && /result: 2/.test(ttext(r)), 'x = 1 then x += 1; x -> 2 (the state stays between calls)', r);

    r = await cell(sid, 'while True: pass', { limits: { timeout: '1s' } });
    ok(r.isError === true && sc(r).status === 'timeout' && sc(r).wall_ms < 10000, 'a 1 s cell timeout on while True: pass -> status timeout', sc(r));
    r = await cell(sid, 'x');
    ok(!r.isError && sc(r).result && sc(r).result.text === '2', 'after the timeout the session goes on: x is still 2', sc(r));
    r = await cell(sid, 'x', { limits: { memory: '1G' } });
    ok(r.isError === true && /create_session/.test(ttext(r)), 'a cell takes no limits but its timeout (a tool error says where they go)', ttext(r));

    r = await cell(sid, '1/0');
    ok(r.isError === true && sc(r).status === 'error' && sc(r).error && sc(r).error.type === 'ZeroDivisionError' && Array.isArray(sc(r).error.traceback) && /ZeroDivisionError/.test(ttext(r)), '1/0 -> a structured ZeroDivisionError', sc(r).error);

    r = await cell(sid, 'import importlib.util; importlib.util.find_spec("matplotlib") is not None');
    if (!(sc(r).result && sc(r).result.text === 'True')) {
        skip('plt.show() in a cell -> a PNG image block', 'python3-matplotlib is not installed (./setup installs it)');
    } else {
        r = await cell(sid, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()', { limits: { timeout: '60s' } });
        const img = (r.content || []).find((c) => c.type === 'image');
        const png = img ? Buffer.from(img.data, 'base64') : Buffer.alloc(0);
        ok(!r.isError && img && img.mimeType === 'image/png' && png.slice(1, 4).toString() === 'PNG' && png.length > 1000, 'plt.show() in a cell -> a PNG image block', { status: sc(r).status, text: ttext(r), types: (r.content || []).map((c) => c.type) });
    }

    // a module imported in one cell is used in the next without being imported again (pandas
    // where the sandbox has it, else numpy, which matplotlib brings)
    r = await cell(sid, 'import importlib.util\n[m for m in ("pandas", "numpy") if importlib.util.find_spec(m)]');
    const mod = sc(r).result && /pandas/.test(sc(r).result.text) ? 'pandas' : sc(r).result && /numpy/.test(sc(r).result.text) ? 'numpy' : null;
    if (!mod) {
        skip('a module imported in one cell is used in the next (well under 300 ms)', 'neither pandas nor numpy in the sandbox');
    } else {
        const imp = await cell(sid, mod === 'pandas' ? 'import pandas as pd' : 'import numpy as np', { limits: { timeout: '60s' } });
        const use = await cell(sid, mod === 'pandas' ? 'int(pd.DataFrame({"a": [1, 2, 3]}).a.sum())' : 'int(np.arange(4).sum())');
        ok(!imp.isError && !use.isError && sc(use).result && sc(use).result.text === '6' && sc(use).wall_ms < 300, `${mod} imported in one cell is used in the next (its wall_ms well under 300)`, { mod, imp: sc(imp).wall_ms, use: sc(use).wall_ms, result: sc(use).result });
    }

    // progress while a cell runs; cancelling the call interrupts the cell, the state stays
    const prog = [];
    r = await cell(sid, 'import time\ntime.sleep(2.5)\n"slept"', {}, { onprogress: (p) => prog.push(p) });
    ok(!r.isError && prog.length >= 1 && prog.every((p, i) => i === 0 || p.progress > prog[i - 1].progress), 'a cell with a progress token gets increasing progress', prog);
    const ac = new AbortController();
    const t0 = Date.now();
    const pc = cell(sid, 'import time\nfor i in range(300): time.sleep(0.1)\nfinished = True', {}, { signal: ac.signal });
    setTimeout(() => ac.abort('test'), 800);
    let aborted = false;
    try { await pc; } catch (e) { aborted = true; }
    let after = null;
    for (let i = 0; i < 40; i++) {
        after = await cell(sid, '("finished" in globals(), x)');
        if (!(after.isError && /running a cell/.test(ttext(after)))) break;
        await sleep(100);
    }
    ok(aborted && !after.isError && sc(after).result && sc(after).result.text === '(False, 2)' && Date.now() - t0 < 10000, 'cancelling a run_code interrupts its cell (it never finished); the session and x stay', { aborted, after: sc(after), ms: Date.now() - t0 });

    // a crash: lost, the next call says so; restart: true says the state is gone
    r = await cell(sid, 'import os; os._exit(3)');
    ok(r.isError === true && sc(r).status === 'lost' && /exited with code 3/.test(sc(r).message || ''), 'os._exit(3) -> status lost, saying how the session ended', sc(r));
    r = await cell(sid, 'x');
    ok(r.isError === true && /has ended/.test(ttext(r)) && /exited with code 3/.test(ttext(r)), 'the next call on a lost session is an error that says how it ended', ttext(r));
    r = await cell(sid, '"x" in globals()', { restart: true });
    ok(!r.isError && sc(r).result && sc(r).result.text === 'False' && /restarted/.test(ttext(r)) && sc(r).session.restarted, 'restart: true starts it again and says the state is gone', { text: ttext(r), session: sc(r).session });

    // a cell that ignores its interrupt: the session is killed after the grace (lost), and the
    // server does not spin on the ended session's fd afterwards
    r = await cell(sid, 'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass', { limits: { timeout: '1s' } });
    const ticks = () => { const f = require('fs').readFileSync(`/proc/${transport._process.pid}/stat`, 'utf8').split(')')[1].trim().split(/\s+/); return Number(f[11]) + Number(f[12]); };
    const tk0 = ticks();
    await sleep(2000);
    const spent = ticks() - tk0;
    ok(r.isError === true && sc(r).status === 'lost' && /did not stop/.test(sc(r).message || '') && spent < 30, 'a cell that ignores its interrupt: lost after the grace, and the server stays idle afterwards', { status: sc(r).status, message: sc(r).message, cpuTicksIn2s: spent });
    r = await cell(sid, 'x = 2', { restart: true });
    ok(!r.isError, 'restarted again for what follows', sc(r));

    // a Node session
    r = await client.callTool({ name: 'create_session', arguments: { language: 'node' } });
    const nid = sc(r).session_id;
    const n1 = await cell(nid, 'let y = 5');
    const n2 = await cell(nid, 'y * 2');
    ok(!r.isError && !n1.isError && !n2.isError && sc(n2).result && sc(n2).result.text === '10', 'a Node session keeps let y = 5 and returns y * 2 -> 10', [sc(n1), sc(n2)]);
    r = await cell(nid, 'y', { language: 'python' });
    ok(r.isError === true && /runs node, not python/.test(ttext(r)), 'a cell whose language is not its session\'s is a tool error', ttext(r));

    // two sessions share nothing: not /tmp, not variables, not /work
    r = await client.callTool({ name: 'create_session', arguments: {} });
    const other = sc(r).session_id;
    await cell(sid, 'secret = 42\nopen("/tmp/secret.txt", "w").write("a")\nopen("mine.txt", "w").write("b")');
    const iso = await cell(other, 'import os\n("secret" in globals(), os.path.exists("/tmp/secret.txt"), os.path.exists("mine.txt"))');
    const own = await cell(sid, 'import os\n("secret" in globals(), os.path.exists("/tmp/secret.txt"), os.path.exists("mine.txt"))');
    ok(sc(iso).result && sc(iso).result.text === '(False, False, False)' && sc(own).result && sc(own).result.text === '(True, True, True)', 'a second session sees neither the first\'s variables nor its /tmp nor its files', [sc(iso).result, sc(own).result]);

    // one cell at a time per session
    const slow = cell(other, 'import time; time.sleep(1.5)');
    await sleep(300);
    r = await cell(other, '1');
    ok(r.isError === true && /running a cell/.test(ttext(r)), 'a second call while a cell runs is a tool error saying so', ttext(r));
    await slow;

    // sandbox_info lists the live sessions
    r = await client.callTool({ name: 'sandbox_info', arguments: {} });
    const live = ((sc(r).sessions || {}).live || []);
    ok(live.length === 3 && live.some((x) => x.id === sid && x.language === 'python' && x.state === 'ready' && x.cells >= 1 && typeof x.idle_ms === 'number') && live.some((x) => x.id === nid && x.language === 'node') && sc(r).sessions.max_sessions === 4, 'sandbox_info lists the live sessions (id, language, state, cells, idle_ms)', sc(r).sessions);

    // close_session: a summary, then the id is refused
    r = await client.callTool({ name: 'close_session', arguments: { session_id: other } });
    ok(!r.isError && sc(r).closed === true && sc(r).session_id === other && sc(r).cells === 2 && /closed after 2 cell/.test(ttext(r)), 'close_session answers with a summary (cells, usage)', r);
    r = await cell(other, '1');
    ok(r.isError === true && /closed by close_session/.test(ttext(r)), 'run_code on a closed session is an error that says it was closed', ttext(r));

    // --max-sessions: the server has 2 live now (of 4); two more fit, a fifth is refused
    const more = await Promise.all([0, 1].map(() => client.callTool({ name: 'create_session', arguments: {} })));
    r = await client.callTool({ name: 'create_session', arguments: {} });
    ok(more.every((x) => !x.isError) && r.isError === true && /--max-sessions/.test(ttext(r)), 'a create_session beyond --max-sessions is a tool error naming the flag', ttext(r));
    // 4 sessions at once: their cells overlap
    const four = [sid, nid, ...more.map((x) => sc(x).session_id)];
    await cell(nid, 'y = undefined');
    const codeOf = (id) => (id === nid
        ? 'const s = Date.now() / 1000; await new Promise((r) => setTimeout(r, 1500)); JSON.stringify([s, Date.now() / 1000])'
        : 'import time, json\ns = time.time()\ntime.sleep(1.5)\njson.dumps([s, time.time()])');
    const rs = await Promise.all(four.map((id) => cell(id, codeOf(id))));
    const iv = rs.map((x) => { try { return JSON.parse(JSON.parse(sc(x).result.text.replace(/^'(.*)'$/, '"$1"'))); } catch (e) { return [0, 0]; } });
    ok(rs.every((x) => !x.isError) && Math.max(...iv.map((x) => x[0])) < Math.min(...iv.map((x) => x[1])), '4 concurrent sessions work: their cells run at the same time', { iv, st: rs.map((x) => sc(x).status), t: rs.map(ttext) });

    // a session id is this connection's only
    const c2 = await connect([]);
    r = await c2.client.callTool({ name: 'run_code', arguments: { session_id: sid, code: 'x' } });
    ok(r.isError === true && /no session/.test(ttext(r)), 'another connection (server) cannot use a session id', ttext(r));
    await closed(c2.client, c2.transport);

    // the client's disconnect ends its sessions: no process of theirs survives
    await cell(sid, `import subprocess\np = subprocess.Popen(["sleep", "4321.${TAG}"])`);
    const before = psCount(`[s]leep 4321.${TAG}$`);
    await closed(client, transport);
    let after2 = '1';
    for (let i = 0; i < 50 && after2 !== '0'; i++) { await sleep(200); after2 = psCount(`[s]leep 4321.${TAG}$`); }
    ok(before === '1' && after2 === '0', 'a client\'s disconnect closes its sessions (their processes are gone)', { before, after: after2, log: log.join('').slice(-800) });

    // idle sessions are reaped: gone from sandbox_info, and a later call says why
    const c3 = await connect([]);
    r = await c3.client.callTool({ name: 'create_session', arguments: { idle_timeout: 2 } });
    const idle = sc(r).session_id;
    let info = await c3.client.callTool({ name: 'sandbox_info', arguments: {} });
    const listed = (sc(info).sessions.live || []).some((x) => x.id === idle);
    await sleep(3500);
    info = await c3.client.callTool({ name: 'sandbox_info', arguments: {} });
    const gone = !(sc(info).sessions.live || []).some((x) => x.id === idle);
    r = await c3.client.callTool({ name: 'run_code', arguments: { session_id: idle, code: '1' } });
    ok(listed && gone && r.isError === true && /idle/.test(ttext(r)), 'an idle session (idle_timeout 2 s) is reaped: gone from sandbox_info, a later call says why', { listed, gone, text: ttext(r) });
    await closed(c3.client, c3.transport);

    // a session's memory limit counts against the server's memory budget, as a run's does
    let c4log = [];
    if (asUser) {
        skip('a session whose memory limit does not fit beside another\'s is refused', 'unprivileged: no memory cgroup for this user here');
        skip('a session\'s memory limit binds it across cells', 'unprivileged: no memory cgroup for this user here');
    } else {
        const c4 = await connect(['--max-sessions', '8']);
        c4log = c4.log;
        info = await c4.client.callTool({ name: 'sandbox_info', arguments: {} });
        const big = Math.floor(sc(info).server.memory_budget_bytes * 0.6);
        const a = await c4.client.callTool({ name: 'create_session', arguments: { limits: { memory: big } } });
        const b = await c4.client.callTool({ name: 'create_session', arguments: { limits: { memory: big } } });
        await c4.client.callTool({ name: 'close_session', arguments: { session_id: sc(a).session_id } });
        const b2 = await c4.client.callTool({ name: 'create_session', arguments: { limits: { memory: big } } });
        ok(!a.isError && b.isError === true && /budget/.test(ttext(b)) && !b2.isError, 'a session whose memory limit does not fit beside another\'s is refused (and fits once that one is closed)', [ttext(a), ttext(b), ttext(b2)]);
        // the memory limit binds the session across cells: 70 MiB kept, then 70 more -> OOM
        const ms = await c4.client.callTool({ name: 'create_session', arguments: { limits: { memory: '128M' } } });
        const m1 = await c4.client.callTool({ name: 'run_code', arguments: { session_id: sc(ms).session_id, code: 'a = bytearray(70 << 20); len(a)' } });
        const m2 = await c4.client.callTool({ name: 'run_code', arguments: { session_id: sc(ms).session_id, code: 'b = bytearray(70 << 20); len(b)' } });
        const m3 = await c4.client.callTool({ name: 'run_code', arguments: { session_id: sc(ms).session_id, code: '1' } });
        ok(!m1.isError && sc(m2).status === 'lost' && /oom/i.test(sc(m2).message || '') && m3.isError === true && /oom/i.test(ttext(m3)), 'a session\'s memory limit binds it across cells: the second 70 MiB of 128M is an OOM, the session lost, the next call says so', [ttext(m1), sc(m2).message, ttext(m3)]);
        await closed(c4.client, c4.transport);
    }
    const logs = [log, c2.log, c3.log, ...(asUser ? [] : [c4log])].map((l) => l.join('')).join('');
    ok(!/AddressSanitizer|LeakSanitizer|runtime error:/.test(logs), 'the servers said nothing of memory errors or leaks (sessions)', logs.slice(-2000));
}

async function signalTest() {
    // SIGTERM with a run going: every run killed, clean exit
    const s = raw();
    await s.request(1, 'initialize', { protocolVersion: '2025-11-25', capabilities: {} });
    // and a session whose cell left a process behind (issue 27)
    const cs = await s.request(3, 'tools/call', { name: 'create_session', arguments: {} }, 60000);
    const sesId = cs && cs.result && cs.result.structuredContent && cs.result.structuredContent.session_id;
    const cc = await s.request(4, 'tools/call', { name: 'run_code', arguments: { session_id: sesId || 'none', code: `import subprocess\np = subprocess.Popen(["sleep", "4322.${TAG}"])` } }, 60000);
    const sesBefore = psCount(`[s]leep 4322.${TAG}$`);
    // a sleep of its own length: other tests' runs may sleep 60 s beside this one
    s.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_code', arguments: { language: 'python', code: `import subprocess; subprocess.run(["sleep", "4323.${TAG}"])` } } });
    let runBefore = '0';
    for (let i = 0; i < 50 && runBefore !== '1'; i++) { await sleep(100); runBefore = psCount(`^[s]leep 4323.${TAG}$`); }
    const t0 = Date.now();
    s.proc.kill('SIGTERM');
    const ex = await new Promise((r) => s.proc.on('exit', (code, sig) => r({ code, sig })));
    ok(ex.code === 0 && Date.now() - t0 < 10000, 'SIGTERM: the server cancels its runs and exits 0', ex);
    const left = psCount(`^[s]leep 4323.${TAG}$`);
    ok(runBefore === '1' && left === '0', 'no sandboxed process survives the server', { runBefore, left });
    const sesLeft = psCount(`[s]leep 4322.${TAG}$`);
    ok(sesId && cc && cc.result && !cc.result.isError && sesBefore === '1' && sesLeft === '0', 'SIGTERM closes the sessions too: no process of theirs survives', { sesId, cc: cc && cc.result, sesBefore, sesLeft });
}

(async () => {
    try {
        await sdkTests();
        await sessionTests();
        await requirementsTests();
        await rawTests();
        await budgetTests();
        stateDirTests();
        await restartAndRetention();
        await v2Client();
        await warmTests();
        await issue25Tests();
        await signalTest();
    } catch (e) {
        ok(false, 'the tests ran to the end', String(e && e.stack));
    }
    console.log(`1..${n}`);
    process.exit(failures ? 1 : 0);
})();
