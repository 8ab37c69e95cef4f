// bench/warm/bench.cjs: warm slots (docs/warm.md) against bare interpreters, cold
// `agentbox run` and the raw bwrap line, interleaved in one run. Driven by bench/warm/run.
//
// Latency: each round runs every configuration once, in a shuffled order, and times it from
// the caller's side (a spawn, an MCP tools/call through the official SDK client, or a line to
// pool-bench, the library's ab_pool_* in a long-lived process). Before and after each warm
// configuration the bench waits, untimed, until the slot it used has been replaced, so that a
// slot being built in the background never runs during another configuration's timing.
// Throughput: N trivial runs at 1 and 2 at once, the library's pool (as many slots as runs at
// once) vs the raw bwrap line and vs the same runs cold through the library, in alternating
// batches.
'use strict';
const path = require('path');
const fs = require('fs');
const os = require('os');
const readline = require('readline');
const { spawn, spawnSync } = require('child_process');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const arg = (name, def) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? process.argv[i + 1] : def;
};
const rounds = Number(arg('--rounds', 30));
const tputRuns = Number(arg('--tput', 200));
const build = process.env.BUILD;
const agentbox = path.join(build, 'agentbox');
const poolBench = process.env.POOL_BENCH;
const PY = '/usr/bin/python3';
const NODE = spawnSync('sh', ['-c', 'command -v node'], { encoding: 'utf8' }).stdout.trim() || '/usr/bin/node';

const med = (a) => { const s = [...a].sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

function must(r, what) {
    if (r.status !== 0) throw new Error(`${what}: exit ${r.status} ${r.stderr}`);
}

// pool-bench: one command line in, one answer line out
function startPoolBench() {
    const p = spawn(poolBench, [], { stdio: ['pipe', 'pipe', 'inherit'] });
    const rl = readline.createInterface({ input: p.stdout });
    const waiting = [];
    rl.on('line', (l) => waiting.shift()(l));
    const cmd = (line) => new Promise((res) => { waiting.push(res); p.stdin.write(line + '\n'); });
    const must2 = async (line) => {
        const a = await cmd(line);
        if (!a.startsWith('ok')) throw new Error(`pool-bench ${line}: ${a}`);
        return a;
    };
    return { p, cmd: must2 };
}

(async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-bench-warm-'));
    fs.chmodSync(tmp, 0o711);
    const runs = path.join(tmp, 'runs');
    fs.mkdirSync(runs, { mode: 0o711 });
    const work = path.join(tmp, 'work');
    fs.mkdirSync(work, { mode: 0o777 });
    fs.writeFileSync(path.join(work, 's.py'), 'pass\n', { mode: 0o644 });

    // the MCP server with a warm slot per language
    const transport = new StdioClientTransport({ command: agentbox, args: ['mcp', '--state-dir', path.join(tmp, 'mcp'), '--keep-runs', '20', '--warm', '1'], stderr: 'ignore', env: process.env });
    const client = new Client({ name: 'bench-warm', version: '1' });
    await client.connect(transport);
    const mcpReady = async (lang) => {
        for (let i = 0; i < 600; i++) {
            const w = (await client.callTool({ name: 'sandbox_info', arguments: {} })).structuredContent.warm;
            const c = (w.classes || []).find((x) => x.language === lang);
            if (c && c.ready >= 1 && c.starting === 0) return;
            await sleep(20);
        }
        throw new Error('mcp: no ready slot for ' + lang);
    };
    const mcpRun = async (lang, code, extra, wantWarm) => {
        const r = await client.callTool({ name: 'run_code', arguments: { language: lang, code, ...extra } });
        const sc = r.structuredContent;
        if (sc.status !== 'exited' || sc.exit_code !== 0 || sc.warm !== wantWarm) throw new Error('mcp run: ' + JSON.stringify(sc));
    };

    // the library's pool
    const pb = startPoolBench();
    await pb.cmd('add py python 1 -');
    await pb.cmd('add js node 1 -');
    await pb.cmd('add np python 1 numpy,pandas');
    await pb.cmd('ready');
    const libRun = async (name) => {
        const a = await pb.cmd('run ' + name);
        if (a !== 'ok 1') throw new Error('lib run ' + name + ': ' + a);
    };

    // Bare interpreters get the environment a sandbox gives its script (a clean one): this
    // machine's environment has NODE_EXTRA_CA_CERTS, which alone triples node's start.
    const bareEnv = { PATH: '/usr/bin:/bin', HOME: work, LANG: 'C.UTF-8' };
    const spawnOk = (cmd, args, what, env) => must(spawnSync(cmd, args, { encoding: 'utf8', env: env || process.env }), what);
    const abRun = (lang, code) => spawnOk(agentbox, ['run', '--runs-dir', runs, '--rm', '--quiet', '--lang', lang, '--code', code], 'agentbox run');

    // name -> { prep (untimed), run (timed), post (untimed) }
    const cfg = {
        'bare python3 -c pass': { run: () => spawnOk(PY, ['-c', 'pass'], 'python3', bareEnv) },
        'bare node -e 0': { run: () => spawnOk(NODE, ['-e', '0'], 'node', bareEnv) },
        'mcp run_code python, warm': { prep: () => mcpReady('python'), run: () => mcpRun('python', 'pass', {}, true), post: () => mcpReady('python') },
        'mcp run_code node, warm': { prep: () => mcpReady('node'), run: () => mcpRun('node', '0', {}, true), post: () => mcpReady('node') },
        'mcp run_code python, cold': { run: () => mcpRun('python', 'pass', { limits: { memory: '300M' } }, false) },
        'library ab_pool python, warm': { prep: () => pb.cmd('ready'), run: () => libRun('py'), post: () => pb.cmd('ready') },
        'library ab_pool node, warm': { prep: () => pb.cmd('ready'), run: () => libRun('js'), post: () => pb.cmd('ready') },
        'agentbox run python (cold)': { run: () => abRun('python', 'pass') },
        'agentbox run node (cold)': { run: () => abRun('node', '0') },
        'bare python3 -c "import numpy, pandas"': { run: () => spawnOk(PY, ['-c', 'import numpy, pandas'], 'python3 numpy', bareEnv) },
        'library ab_pool python, numpy+pandas pre-imported, warm': { prep: () => pb.cmd('ready'), run: () => libRun('np'), post: () => pb.cmd('ready') },
    };
    // not round trips: from the request to the script's first statement (pool-bench start)
    const startAfter = { py: [], np: [] };
    const startOf = async (name) => {
        const a = (await pb.cmd('start ' + name)).split(' ');
        if (a[1] !== '1') throw new Error('start ' + name + ': not warm');
        startAfter[name].push(Number(a[2]));
        await pb.cmd('ready');
    };
    const names = Object.keys(cfg);
    const t = Object.fromEntries(names.map((n) => [n, []]));
    for (const n of names) { // warm-up, untimed
        if (cfg[n].prep) await cfg[n].prep();
        await cfg[n].run();
        if (cfg[n].post) await cfg[n].post();
    }
    for (let i = 0; i < rounds; i++) {
        const order = [...names].sort(() => Math.random() - 0.5);
        for (const n of order) {
            if (cfg[n].prep) await cfg[n].prep();
            const t0 = process.hrtime.bigint();
            await cfg[n].run();
            t[n].push(ms(t0));
            if (cfg[n].post) await cfg[n].post();
        }
        await pb.cmd('ready');
        await startOf('py');
        await startOf('np');
    }
    const info = JSON.parse((await pb.cmd('info')).slice(3));
    const mcpInfo = (await client.callTool({ name: 'sandbox_info', arguments: {} })).structuredContent.warm;

    // throughput: alternating batches, the pool with as many slots as runs at once
    const tput = [];
    const bwrapArgv = ['--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/sbin', '/sbin',
        '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--ro-bind', '/etc/alternatives', '/etc/alternatives',
        '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--bind', work, '/work', '--chdir', '/work', '--unshare-all',
        '--new-session', '--die-with-parent', '--clearenv', '--setenv', 'PATH', '/usr/bin', '--setenv', 'HOME', '/work',
        '--setenv', 'PYTHONDONTWRITEBYTECODE', '1', '--cap-drop', 'ALL', '--unshare-user', '--disable-userns', PY, '/work/s.py'];
    const bwrapOnce = () => new Promise((res, rej) => {
        const c = spawn('bwrap', bwrapArgv, { stdio: 'ignore', env: bareEnv });
        c.on('exit', (code) => (code === 0 ? res() : rej(new Error('bwrap exit ' + code))));
    });
    const bwrapBatch = async (k, conc) => {
        let next = 0;
        const worker = async () => { while (next < k) { next++; await bwrapOnce(); } };
        await Promise.all(Array.from({ length: conc }, worker));
    };
    if (tputRuns > 0) {
        for (const conc of [1, 2]) {
            await pb.cmd(`add tput${conc} python ${conc} -`);
            await pb.cmd('ready');
            // issue 29: the pool against the same runs cold through the same library (a spec
            // of no class), the target being that a pool never sustains fewer runs a second
            const spent = { bwrap: 0, pool: 0, cold: 0 };
            let warm = 0;
            const batch = 50;
            for (let done = 0; done < tputRuns; done += batch) {
                const k = Math.min(batch, tputRuns - done);
                const order = ['bwrap', 'pool', 'cold'].sort(() => Math.random() - 0.5);
                for (const which of order) {
                    const t0 = process.hrtime.bigint();
                    if (which === 'bwrap') await bwrapBatch(k, conc);
                    else if (which === 'cold') await pb.cmd(`tput tput${conc} ${k} ${conc} cold`);
                    else warm += Number((await pb.cmd(`tput tput${conc} ${k} ${conc}`)).split(' ')[1]);
                    spent[which] += ms(t0);
                }
            }
            tput.push({ conc, runs: tputRuns, bwrap_per_s: tputRuns / (spent.bwrap / 1000), pool_per_s: tputRuns / (spent.pool / 1000), cold_per_s: tputRuns / (spent.cold / 1000), pool_warm: warm });
        }
    }
    await client.close();
    pb.p.stdin.end();
    await new Promise((r) => pb.p.on('exit', r));
    fs.rmSync(tmp, { recursive: true, force: true });

    const m = Object.fromEntries(names.map((n) => [n, med(t[n])]));
    const cpu = os.cpus()[0].model;
    console.log(`${rounds} interleaved rounds, ${os.cpus().length} cores (${cpu}), node ${process.version}, ${new Date().toISOString()}`);
    console.log('| configuration | median ms | min-max ms |');
    console.log('| --- | ---: | ---: |');
    for (const n of names) console.log(`| ${n} | ${m[n].toFixed(1)} | ${Math.min(...t[n]).toFixed(1)}-${Math.max(...t[n]).toFixed(1)} |`);
    const r = (a, b) => (m[a] / m[b]).toFixed(2);
    console.log('\n| ratio (of medians) | measured | target |');
    console.log('| --- | ---: | ---: |');
    console.log(`| mcp warm python / bare python3 -c pass | ${r('mcp run_code python, warm', 'bare python3 -c pass')} | <= 0.5 |`);
    console.log(`| library warm python / bare python3 -c pass | ${r('library ab_pool python, warm', 'bare python3 -c pass')} | <= 0.5 |`);
    console.log(`| mcp warm node / bare node -e 0 | ${r('mcp run_code node, warm', 'bare node -e 0')} | <= 0.5 |`);
    console.log(`| library warm node / bare node -e 0 | ${r('library ab_pool node, warm', 'bare node -e 0')} | <= 0.5 |`);
    console.log(`| mcp warm python / agentbox run python | ${r('mcp run_code python, warm', 'agentbox run python (cold)')} | |`);
    console.log(`| library warm python / agentbox run python | ${r('library ab_pool python, warm', 'agentbox run python (cold)')} | |`);
    console.log(`| mcp warm node / agentbox run node | ${r('mcp run_code node, warm', 'agentbox run node (cold)')} | |`);
    console.log(`| library warm node / agentbox run node | ${r('library ab_pool node, warm', 'agentbox run node (cold)')} | |`);
    console.log(`| mcp warm python / mcp cold python (same server) | ${r('mcp run_code python, warm', 'mcp run_code python, cold')} | |`);
    console.log(`| warm run with numpy+pandas pre-imported, round trip / bare import of them | ${r('library ab_pool python, numpy+pandas pre-imported, warm', 'bare python3 -c "import numpy, pandas"')} | |`);
    const bareNp = m['bare python3 -c "import numpy, pandas"'];
    console.log(`| numpy+pandas slot: the run starts after (median ${med(startAfter.np).toFixed(1)} ms) / bare import of them | ${(med(startAfter.np) / bareNp).toFixed(3)} | <= 0.2 |`);
    console.log(`| plain Python slot: the run starts after (median ${med(startAfter.py).toFixed(1)} ms) / bare python3 -c pass | ${(med(startAfter.py) / m['bare python3 -c pass']).toFixed(3)} | |`);
    for (const c of info.classes) {
        console.log(`slot of class ${c.language} [${c.preimport.join(',') || 'no pre-imports'}]: ready ${c.slot_ready_ms} ms after its bwrap started, holding ${(c.memory_bytes / 1048576).toFixed(1)} MiB (${c.warm_runs} warm, ${c.cold_runs} cold runs)`);
    }
    console.log(`mcp server: ${JSON.stringify((mcpInfo.classes || []).map((c) => ({ language: c.language, warm_runs: c.warm_runs, cold_runs: c.cold_runs, memory_bytes: c.memory_bytes })))}`);
    if (tput.length) {
        console.log('\n| throughput, trivial python | at once | runs/s raw bwrap | runs/s library cold | runs/s library pool | pool / bwrap | pool / cold (target >= 1) | warm runs |');
        console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
        for (const x of tput) console.log(`| ${x.runs} runs | ${x.conc} | ${x.bwrap_per_s.toFixed(1)} | ${x.cold_per_s.toFixed(1)} | ${x.pool_per_s.toFixed(1)} | ${(x.pool_per_s / x.bwrap_per_s).toFixed(2)} | ${(x.pool_per_s / x.cold_per_s).toFixed(2)} | ${x.pool_warm}/${x.runs} |`);
    }
})().catch((e) => { console.error(e); process.exit(1); });
