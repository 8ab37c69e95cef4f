// agentbox's session driver for Node (docs/sessions.md). A session's sandbox starts
// `node --expose-internals /.agentbox/script/agentbox-session.js` with fd 1000 a socket to
// libagentbox (src/lib/session.c); it runs the cells it is sent in this one global context, as Node's REPL
// does: `let`, `const`, `class` and `function` declarations persist from cell to cell (V8
// keeps a script's top-level declarations for the next script in the same context), top-level
// `await` works (Node's own REPL rewrite, internal/repl/await: --expose-internals is for that),
// and the last expression's value is returned. stdout and stderr stay the process's own (pipes,
// synchronous on Linux): after a cell it writes the cell's mark on each, so the library gives
// each cell what it printed. Everything this driver says is untrusted to agentbox: a cell's
// status, its limits and crashes come from the library and the supervisor, never from here.
//
// Messages both ways: a little-endian u32 length, then one JSON object.
//   driver -> agentbox  {"ready": {"version": "v18.19.0"}}
//   agentbox -> driver  {"cell": {"id": N, "code": "...", "mark": "..."}}
//   driver -> agentbox  {"done": {"id": N, "value": {"text": inspect} | null, "images": [],
//                        "error": {"type", "value", "traceback": [...]} | null}}
// A cell is interrupted by SIGINT: synchronous code through vm's breakOnSigint, a pending
// await by this driver's SIGINT listener.
'use strict';
(() => {
    const fs = require('fs');
    const net = require('net');
    const path = require('path');
    const util = require('util');
    const vm = require('vm');
    const { createRequire } = require('module');
    let processTopLevelAwait = null;
    try {
        ({ processTopLevelAwait } = require('internal/repl/await'));
    } catch (e) {
        processTopLevelAwait = null; // without --expose-internals: no top-level await
    }

    const MAX_TEXT = 64 << 10;
    const here = __filename;
    const sock = new net.Socket({ fd: 1000, readable: true, writable: true });
    let buf = Buffer.alloc(0);
    let pending = null; // the running cell's {reject}
    const queue = [];

    function send(obj) {
        const body = Buffer.from(JSON.stringify(obj));
        const head = Buffer.alloc(4);
        head.writeUInt32LE(body.length, 0);
        sock.write(Buffer.concat([head, body]));
    }

    // The cells' globals: require from /work, as a script there would have it.
    globalThis.require = createRequire(path.join(process.cwd(), '[cell]'));

    function clip(s) {
        return s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) + '...' : s;
    }

    function errorOf(e) {
        if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
            const lines = String(e.stack || '').split('\n');
            // the cell's own frames (and what it called), not this driver's nor vm's
            const tb = lines.filter((l, i) => i === 0 || !(l.includes(here) || /\(node:|at node:/.test(l)));
            const type = e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED' ? 'Interrupted' : typeof e.name === 'string' ? e.name : (e.constructor && e.constructor.name) || 'Error';
            return { type, value: clip(String(e.message)), traceback: tb.slice(0, 64).map((l) => l.slice(0, 4096)) };
        }
        return { type: 'Uncaught', value: clip(util.inspect(e)), traceback: [] };
    }

    function interrupted() {
        const e = new Error('Script execution was interrupted by `SIGINT`');
        e.name = 'Interrupted';
        return e;
    }

    async function runCell(id, code) {
        const filename = `<cell ${id}>`;
        let src = code;
        let awaited = false;
        // an object literal on its own is an expression, as in the REPL
        if (/^\s*\{/.test(src) && /\}\s*$/.test(src)) {
            try {
                new vm.Script(`(${src})`, { filename });
                src = `(${src})`;
            } catch (e) {
                // a block statement after all
            }
        }
        if (processTopLevelAwait && src.includes('await')) {
            try {
                new vm.Script(src, { filename });
            } catch (e) {
                const wrapped = processTopLevelAwait(src);
                if (wrapped !== null) {
                    src = wrapped;
                    awaited = true;
                }
            }
        }
        const script = new vm.Script(src, { filename });
        let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
        if (awaited) {
            value = await new Promise((resolve, reject) => {
                pending = { reject };
                value.then(resolve, reject);
            });
            value = value ? value.value : undefined;
        }
        return value;
    }

    async function serve() {
        while (queue.length) {
            const msg = queue.shift();
            const cell = msg && msg.cell;
            if (!cell || typeof cell !== 'object') continue;
            const id = Number(cell.id) || 0;
            const result = { id, value: null, images: [], error: null };
            try {
                const v = await runCell(id, String(cell.code || ''));
                if (v !== undefined) {
                    globalThis._ = v;
                    result.value = { text: clip(util.inspect(v, { depth: 4, maxArrayLength: 100, maxStringLength: 10000, breakLength: 100 })) };
                }
            } catch (e) {
                result.error = errorOf(e);
            } finally {
                pending = null;
            }
            // the end of this cell's output on each stream: agentbox splits the streams there
            for (const f of [1, 2]) {
                try {
                    fs.writeSync(f, String(cell.mark || ''));
                } catch (e) {
                    // the cell closed it
                }
            }
            send({ done: result });
        }
    }

    let serving = false;
    function kick() {
        if (serving) return;
        serving = true;
        serve().finally(() => {
            serving = false;
            if (queue.length) kick();
        });
    }
    sock.on('data', (chunk) => {
        buf = Buffer.concat([buf, chunk]);
        while (buf.length >= 4) {
            const n = buf.readUInt32LE(0);
            if (buf.length < 4 + n) break;
            const body = buf.subarray(4, 4 + n);
            buf = buf.subarray(4 + n);
            try {
                queue.push(JSON.parse(body.toString()));
            } catch (e) {
                // not ours to understand: ignored
            }
        }
        kick();
    });
    sock.on('end', () => process.exit(0)); // agentbox closed the session
    sock.on('error', () => process.exit(0));
    process.on('SIGINT', () => {
        if (pending) pending.reject(interrupted());
    });
    // what a cell left running may throw later: said on stderr, as the REPL does; the session goes on
    process.on('uncaughtException', (e) => {
        try {
            fs.writeSync(2, `Uncaught ${util.inspect(e)}\n`);
        } catch (x) {
            // stderr is gone
        }
    });
    process.on('unhandledRejection', (e) => {
        try {
            fs.writeSync(2, `Uncaught (in promise) ${util.inspect(e)}\n`);
        } catch (x) {
            // stderr is gone
        }
    });
    send({ ready: { version: process.version } });
})();
