#!/bin/sh
# test-prepnet.sh -- the network of `agentbox prepare`'s install sandbox (issue 13 item 5). The
# install has its own network namespace with only lo; its one way out is agentbox-netproxy on
# 127.0.0.1:3128 there, which CONNECTs only to allow-listed hosts and never to a loopback,
# private, link-local or host-own address. An install script tries a listener on the host's
# 127.0.0.1 directly (TCP v4, v6, by name; UDP), the host's other addresses, an abstract socket
# of the host, and the proxy (CONNECT 127.0.0.1, localhost, [::1] and the host's addresses, all
# on --allow-host; a plain GET; the registry on another port). Oracle: the host listener logs
# nothing; the proxy answers 403 and the report counts each refusal. A real `prepare --node`
# of is-number goes through the proxy (skipped when the registry is unreachable from here).
# Traffic goes nowhere but 127.0.0.1 and registry.npmjs.org.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

CACHE=$WORK/cache
AGENTBOX_RUNS_DIR=$RUNS
export AGENTBOX_RUNS_DIR
PROXY_PORT=3128
NETPROXY=$(dirname "$AGENTBOX")/agentbox-netproxy
ABS=abprepnet-$$
ABSPID=

# prep ARGS...: agentbox prepare; $rc, stdout in $WORK/pout, stderr in $WORK/perr
prep() {
    rc=0
    bounded 300 "$AGENTBOX" prepare "$@" >"$WORK/pout" 2>"$WORK/perr" || rc=$?
    keep_report "$WORK/pr.json"
}
# rj FILTER: jq -r FILTER on prepare's report
rj() { jq -r "$1" "$WORK/pr.json" 2>/dev/null; }

L=$WORK/listener
trap 'listener_stop "$L"; [ -z "$ABSPID" ] || kill "$ABSPID" 2>/dev/null; _cleanup' EXIT
listener_start "$L"
[ -f "$L.ports" ] || bail "the host listener did not start"
read -r TPORT UPORT <"$L.ports"
# an abstract unix socket of the host's network namespace, logging to the same file
python3 - "$L" "$ABS" <<'EOF' &
import socket, sys
base, name = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind('\0' + name)
s.listen(4)
log = open(base + '.log', 'a', buffering=1)
open(base + '.abs', 'w').write('ready\n')
s.settimeout(600)
while True:
    c, _ = s.accept()
    log.write('abstract\n')
    c.close()
EOF
ABSPID=$!
_i=0
while [ ! -f "$L.abs" ] && [ $_i -lt 100 ]; do sleep 0.05; _i=$((_i + 1)); done

# Control: connections from the host itself are logged (TCP, UDP, abstract).
python3 - "$TPORT" "$UPORT" "$ABS" <<'EOF'
import socket, sys
t, u, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
socket.create_connection(("127.0.0.1", t), timeout=2).close()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"host", ("127.0.0.1", u)); s.close()
a = socket.socket(socket.AF_UNIX); a.connect('\0' + name); a.close()
EOF
_i=0
while [ "$(wc -l <"$L.log")" -lt 3 ] && [ $_i -lt 40 ]; do sleep 0.05; _i=$((_i + 1)); done
is "$(wc -l <"$L.log")" 3 "control: the host's listeners log a TCP connection, a datagram and an abstract-socket connection from the host"
: >"$L.log"

# The host's own addresses other than loopback (a service bound to 0.0.0.0 answers on them).
HOSTADDRS=
if command -v ip >/dev/null 2>&1; then
    HOSTADDRS=$(ip -o addr show scope global 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4 }' | head -n 4 | tr '\n' ' ')
fi
echo "# host addresses: ${HOSTADDRS:-none found}"

# ---- an install script that tries every way to the host --------------------------------
cat >"$WORK/attack.js" <<'EOF'
const net = require('net'), dgram = require('dgram'), fs = require('fs');
const cfg = require('./package.json').abcfg;
const out = { direct: {}, proxy: {} };
function tcp(label, opts) {
  return new Promise((res) => {
    const s = net.connect(opts);
    const t = setTimeout(() => { out.direct[label] = 'TIMEOUT'; s.destroy(); res(); }, 3000);
    s.on('connect', () => { clearTimeout(t); out.direct[label] = 'CONNECTED'; s.destroy(); res(); });
    s.on('error', (e) => { clearTimeout(t); out.direct[label] = e.code || String(e); res(); });
  });
}
function viaProxy(label, request) {
  return new Promise((res) => {
    let data = '', done = false;
    const fin = (v) => { if (!done) { done = true; clearTimeout(t); out.proxy[label] = v; s.destroy(); res(); } };
    const s = net.connect({ host: '127.0.0.1', port: cfg.proxyPort });
    const t = setTimeout(() => fin('TIMEOUT ' + data.split('\r\n')[0]), 20000);
    s.on('connect', () => s.write(request));
    s.on('data', (d) => { data += d; if (data.includes('\r\n\r\n') && data.startsWith('HTTP/1.1 200')) fin(data.split('\r\n')[0]); });
    s.on('end', () => fin(data.split('\r\n')[0] || 'EMPTY'));
    s.on('error', (e) => fin(data ? data.split('\r\n')[0] : 'ERR ' + e.code));
  });
}
function udp(label, port) {
  return new Promise((res) => {
    const u = dgram.createSocket('udp4');
    u.send('from-install', port, '127.0.0.1', (e) => { out.direct[label] = e ? e.code : 'SENT'; u.close(); res(); });
  });
}
(async () => {
  const p = cfg.port;
  await tcp('tcp4', { host: '127.0.0.1', port: p });
  await tcp('tcp6', { host: '::1', port: p });
  await tcp('localhost', { host: 'localhost', port: p });
  await udp('udp', cfg.uport);
  await tcp('abstract', { path: '\0' + cfg.abstract });
  for (const a of cfg.hostAddrs) {
    await tcp('host ' + a, { host: a, port: p });
    await tcp('host ' + a + ' proxy port', { host: a, port: cfg.proxyPort });
  }
  const req = (target) => 'CONNECT ' + target + ' HTTP/1.1\r\nHost: ' + target + '\r\n\r\n';
  await viaProxy('127.0.0.1', req('127.0.0.1:' + p));
  await viaProxy('localhost', req('localhost:' + p));
  await viaProxy('[::1]', req('[::1]:' + p));
  await viaProxy('GET', 'GET http://127.0.0.1:' + p + '/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await viaProxy('registry other port', req('registry.npmjs.org:' + p));
  for (const a of cfg.hostAddrs)
    await viaProxy('host ' + a, req((a.includes(':') ? '[' + a + ']' : a) + ':' + p));
  out.ifaces = fs.readFileSync('/proc/net/dev', 'utf8').split('\n').slice(2)
    .map((l) => l.split(':')[0].trim()).filter((x) => x).sort().join(',');
  out.https_proxy = process.env.HTTPS_PROXY;
  out.npm_proxy = process.env.npm_config_https_proxy;
  fs.mkdirSync(process.env.INIT_CWD + '/node_modules', { recursive: true });
  fs.writeFileSync(process.env.INIT_CWD + '/net-report.json', JSON.stringify(out, null, 1));
})();
EOF
mkdir "$WORK/np-net"
# shellcheck disable=SC2086 # HOSTADDRS is a word list
jq -n --rawfile js "$WORK/attack.js" --argjson port "$TPORT" --argjson uport "$UPORT" \
    --argjson proxyPort "$PROXY_PORT" --arg abstract "$ABS" \
    --argjson hostAddrs "$(printf '%s\n' $HOSTADDRS | jq -R . | jq -s 'map(select(. != ""))')" '{
  name: "abprepnet", version: "1.0.0", private: true, abattack: $js,
  abcfg: { port: $port, uport: $uport, proxyPort: $proxyPort, abstract: $abstract,
           hostAddrs: $hostAddrs },
  scripts: { postinstall: "node -e \"eval(require(\u0027./package.json\u0027).abattack)\"" } }' \
    >"$WORK/np-net/package.json"
set -- --allow-host "localhost:$TPORT" --allow-host "[::1]:$TPORT"
NADDR=0
for a in $HOSTADDRS; do
    case $a in *:*) set -- "$@" --allow-host "[$a]:$TPORT" ;; *) set -- "$@" --allow-host "$a:$TPORT" ;; esac
    NADDR=$((NADDR + 1))
done
prep --node "$WORK/np-net/package.json" --cache-dir "$CACHE" --timeout 2m --report "$WORK/pr.json" "$@"
NENV=$(tail -n1 "$WORK/pout")
sed -n '1,30s/^/# prepare: /p' "$WORK/perr"
is "$rc" 0 "attack install: prepare finishes (exit 0)"
sleep 0.3
is "$(wc -l <"$L.log")" 0 "attack install: the host's listeners logged nothing (TCP, UDP, abstract)"
sed 's/^/# listener: /' "$L.log"
R=$NENV/net-report.json
if [ -f "$R" ]; then
    echo "# install saw: $(jq -c . "$R")"
    for k in tcp4 tcp6 localhost abstract; do
        got=$(jq -r ".direct[\"$k\"]" "$R")
        case $got in CONNECTED | TIMEOUT | null) not_ok "direct $k: refused by the sandbox" "got: $got" ;;
        *) ok "direct $k to the host: fails at once ($got)" ;; esac
    done
    for a in $HOSTADDRS; do
        got=$(jq -r ".direct[\"host $a\"]" "$R")
        case $got in CONNECTED | TIMEOUT | null) not_ok "direct to the host's $a: fails" "got: $got" ;;
        *) ok "direct to the host's $a: fails at once ($got)" ;; esac
        # Landlock lets connect() reach the proxy's port: only the namespace stops this one
        is "$(jq -r ".direct[\"host $a proxy port\"]" "$R")" ENETUNREACH \
            "direct to the host's $a on the proxy's port: no route (own network namespace)"
    done
    is "$(jq -r .ifaces "$R")" lo "attack install: the only interface is lo"
    is "$(jq -r .https_proxy "$R")" "http://127.0.0.1:$PROXY_PORT" "attack install: HTTPS_PROXY points at the proxy"
    is "$(jq -r .npm_proxy "$R")" "http://127.0.0.1:$PROXY_PORT" "attack install: npm_config_https_proxy too"
    nproxy=0
    for k in 127.0.0.1 localhost '[::1]' GET 'registry other port'; do
        is "$(jq -r ".proxy[\"$k\"]" "$R")" "HTTP/1.1 403 Forbidden" "through the proxy: $k is refused (403)"
        nproxy=$((nproxy + 1))
    done
    for a in $HOSTADDRS; do
        is "$(jq -r ".proxy[\"host $a\"]" "$R")" "HTTP/1.1 403 Forbidden" \
            "through the proxy: the host's $a (allow-listed) is refused (403)"
        nproxy=$((nproxy + 1))
    done
else
    not_ok "attack install: the script's report is in the environment" "no $R"
    nproxy=$((5 + NADDR))
fi

# what the report says
is "$(rj .sandbox.network.enforced)" true "report: sandbox.network enforced"
case $(rj .sandbox.network.detail) in "own network namespace; only the registry proxy ("*"registry.npmjs.org:443"*") is reachable")
    ok "report: the network detail names the mechanism and the registry" ;;
*) not_ok "report: the network detail names the mechanism and the registry" "got: $(rj .sandbox.network.detail)" ;; esac
is "$(rj .sandbox.network.refused_connections)" "$nproxy" "report: every refused connection is counted ($nproxy)"
is "$(rj .network_proxy.connections_allowed)" 0 "report: nothing was let through"
check "report: CONNECT 127.0.0.1 refused as not on the allow-list" \
    grep -q "CONNECT 127.0.0.1:$TPORT: not on the allow-list" "$WORK/pr.json"
check "report: CONNECT localhost (allow-listed) refused: it resolves to loopback" \
    grep -q "CONNECT localhost:$TPORT: resolves to 127.0.0.1: loopback address" "$WORK/pr.json"
check "report: CONNECT [::1] (allow-listed) refused: loopback" \
    grep -q "CONNECT \[::1\]:$TPORT: resolves to ::1: loopback address" "$WORK/pr.json"
check "report: the plain GET refused" grep -q "only CONNECT requests are allowed" "$WORK/pr.json"
for a in $HOSTADDRS; do
    case $a in
    fc* | fd*) want="unique local address" ;;
    10.* | 172.1[6-9].* | 172.2?.* | 172.3[01].* | 192.168.*) want="private address" ;;
    100.*) want="100.64.0.0/10" ;;
    *) want="an address of this host" ;;
    esac
    check "report: the host's $a (allow-listed) refused: $want" grep -q "$want" "$WORK/pr.json"
done
case $(rj .sandbox.landlock.detail) in *"connect only to the registry proxy"*)
    ok "report: Landlock allows TCP connect only to the proxy's port" ;;
*) skip "report: Landlock allows TCP connect only to the proxy's port" "Landlock ABI < 4 here: $(rj .sandbox.landlock.detail)" ;; esac
check "stderr: the proxy logged its refusals" grep -q "agentbox-netproxy: refused CONNECT localhost:$TPORT" "$WORK/perr"
check "stderr: prepare sums them up" grep -q "the registry proxy refused $nproxy connection" "$WORK/perr"
check "no agentbox-netproxy is left after prepare" no_procs "$NETPROXY"

# ---- usage -------------------------------------------------------------------------------
prep --node "$WORK/np-net/package.json" --cache-dir "$CACHE" --allow-host "http://example.org/"
is "$rc" 2 "--allow-host with a URL: usage error (2)"
prep --node "$WORK/np-net/package.json" --cache-dir "$CACHE" --allow-host "[::1"
is "$rc" 2 "--allow-host '[::1': usage error (2)"

# ---- Python, offline: nothing is reachable at all ----------------------------------------
mkdir "$WORK/wheels"
python3 - "$WORK/wheels" <<'EOF'
import base64, hashlib, sys, zipfile
d, name, ver = sys.argv[1], 'abnetpkg', '1.0.0'
info = '%s-%s.dist-info' % (name, ver)
files = {name + '/__init__.py': "VALUE = 1\n",
         info + '/METADATA': 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' % (name, ver),
         info + '/WHEEL': 'Wheel-Version: 1.0\nGenerator: agentbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n'}
rec = ['%s,sha256=%s,%d' % (p, base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode(), len(t)) for p, t in files.items()]
with zipfile.ZipFile('%s/%s-%s-py3-none-any.whl' % (d, name, ver), 'w') as z:
    for p, t in files.items():
        z.writestr(p, t)
    z.writestr(info + '/RECORD', '\n'.join(rec + [info + '/RECORD,,']) + '\n')
EOF
printf 'abnetpkg==1.0.0\n' >"$WORK/req.txt"
prep --python "$WORK/req.txt" --no-index --find-links "$WORK/wheels" --cache-dir "$CACHE" --report "$WORK/pr.json"
is "$rc" 0 "python --no-index: prepare finishes (exit 0)"
is "$(rj .sandbox.network.enforced)" true "python --no-index: sandbox.network enforced"
case $(rj .sandbox.network.detail) in *"allows no host"*) ok "python --no-index: the proxy allows no host" ;;
*) not_ok "python --no-index: the proxy allows no host" "got: $(rj .sandbox.network.detail)" ;; esac
is "$(rj '.network_proxy.allowed_hosts | length')" 0 "python --no-index: the allow-list is empty"
# pip goes through the proxy too: a requirement by URL on the host's loopback, allow-listed
: >"$L.log"
printf 'abnetpkg @ https://localhost:%s/abnetpkg-1.0.0-py3-none-any.whl\n' "$TPORT" >"$WORK/req-url.txt"
prep --python "$WORK/req-url.txt" --no-index --allow-host "localhost:$TPORT" --cache-dir "$CACHE" \
    --report "$WORK/pr.json"
is "$rc" 125 "python, a wheel URL on localhost: the install fails (exit 125)"
sleep 0.3
is "$(wc -l <"$L.log")" 0 "python, a wheel URL on localhost: the host listener logged nothing"
n=$(rj .network_proxy.connections_refused)
if [ "${n:-0}" -ge 1 ] 2>/dev/null && rj '.network_proxy.refused[0]' | grep -q "CONNECT localhost:$TPORT: resolves to 127.0.0.1: loopback"; then
    ok "python, a wheel URL on localhost: pip asked the proxy, which refused ($n)"
else
    not_ok "python, a wheel URL on localhost: pip asked the proxy, which refused" "got: $n $(rj '.network_proxy.refused[0]')"
fi

# ---- the package index out of reach; the cache's lock -------------------------------------
# prepare asks the proxy to open a TCP connection to each index host before the install
# starts: one that cannot be reached is one line and exit 3 in well under pip's ~20 s of
# retries, with no traceback and nothing left in the cache. The index is --index-url on a
# closed port of 127.0.0.1, so no traffic leaves this host (pypi.org may or may not resolve).
check "a successful prepare leaves no lock file in the cache" \
    test -z "$(find "$CACHE" -maxdepth 1 -name '*.lock')"
CPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
printf 'six==1.16.0\n' >"$WORK/req-six.txt"
for kind in python node; do
    mkdir "$WORK/cache-$kind"
    if [ "$kind" = python ]; then set -- --python "$WORK/req-six.txt"; else set -- --node "$WORK/np-net/package.json"; fi
    _t0=$(date +%s%N)
    prep "$@" --index-url "https://127.0.0.1:$CPORT/simple" --cache-dir "$WORK/cache-$kind"
    ms=$((($(date +%s%N) - _t0) / 1000000))
    sed -n '1,5s/^/# prepare: /p' "$WORK/perr"
    is "$rc" 3 "$kind, index unreachable: exit 3"
    is "$(wc -l <"$WORK/perr")" 1 "$kind, index unreachable: one line on stderr"
    check "$kind, index unreachable: the line names the index, the reason and the fix" \
        grep -q "^agentbox: prepare: cannot reach the package index: 127.0.0.1:$CPORT: Connection refused (fix: " "$WORK/perr"
    refute "$kind, index unreachable: no traceback" grep -q Traceback "$WORK/perr"
    is "$(find "$WORK/cache-$kind" -mindepth 1 | wc -l)" 0 \
        "$kind, index unreachable: nothing left in the cache (no lock, no build directory)"
    if [ "$ms" -lt 10000 ]; then ok "$kind, index unreachable: fails fast (${ms} ms)"; else
        not_ok "$kind, index unreachable: fails fast" "took ${ms} ms"
    fi
    check "$kind, index unreachable: no agentbox-netproxy is left" no_procs "$NETPROXY"
done
prep --python "$WORK/req-six.txt" --index-url "http://127.0.0.1:$CPORT/simple" --cache-dir "$WORK/cache-python"
is "$rc" 2 "--index-url http://: usage error (2)"
prep --python "$WORK/req-six.txt" --index-url "https://u:p@127.0.0.1:$CPORT/simple" --cache-dir "$WORK/cache-python"
is "$rc" 2 "--index-url with credentials: usage error (2)"

# An index that answers passes the check, and pip really uses it: here it is the host's
# loopback listener, so the proxy then refuses the install's CONNECT (policy, not
# reachability: exit 125, not 3), and the listener saw only the check's connection.
: >"$L.log"
prep --python "$WORK/req-six.txt" --index-url "https://127.0.0.1:$TPORT/simple" \
    --cache-dir "$WORK/cache-python" --report "$WORK/pr.json"
is "$rc" 125 "--index-url on a listening loopback port: the install fails (125), the check passed"
check "--index-url: pip asked the proxy for it, which refused it" \
    grep -q "agentbox-netproxy: refused CONNECT 127.0.0.1:$TPORT: resolves to 127.0.0.1: loopback" "$WORK/perr"
sleep 0.3
is "$(wc -l <"$L.log")" 1 "--index-url: the listener saw exactly one connection (the check's)"
refute "--index-url: no traceback" grep -q Traceback "$WORK/perr"

# A failed install (a requirement no index has) is the installer's output, one line from the
# driver and agentbox's, no traceback, and no lock or build directory left.
printf 'abmissingpkg==9.9\n' >"$WORK/req-missing.txt"
prep --python "$WORK/req-missing.txt" --no-index --find-links "$WORK/wheels" --cache-dir "$WORK/cache-python"
is "$rc" 125 "a failed pip install: exit 125"
check "a failed pip install: the driver says which step failed" \
    grep -q "^agentbox: prepare: pip install exited with status 1" "$WORK/perr"
check "a failed pip install: agentbox says the install failed" \
    grep -q "^agentbox: prepare: the install failed: exited (exit 1)" "$WORK/perr"
refute "a failed pip install: no traceback" grep -q Traceback "$WORK/perr"
is "$(find "$WORK/cache-python" -mindepth 1 | wc -l)" 0 \
    "a failed pip install: nothing left in the cache (no lock, no build directory)"

# Three prepares of one requirements file at once: the lock serialises them (one builds, two
# find it), the lock file is gone afterwards, and one environment is in the cache.
mkdir "$WORK/cache-conc"
pids=
for n in 1 2 3; do
    (
        _crc=0
        bounded 300 "$AGENTBOX" prepare --python "$WORK/req.txt" --no-index --find-links "$WORK/wheels" \
            --cache-dir "$WORK/cache-conc" >"$WORK/conc$n.out" 2>"$WORK/conc$n.err" || _crc=$?
        echo "$_crc" >"$WORK/conc$n.rc"
    ) &
    pids="$pids $!"
done
# only these three: the listeners started above are children of this shell too
# shellcheck disable=SC2086 # a list of pids
wait $pids
is "$(cat "$WORK/conc1.rc" "$WORK/conc2.rc" "$WORK/conc3.rc" | tr '\n' ' ')" "0 0 0 " \
    "concurrent prepares: all three succeed"
is "$(cat "$WORK/conc1.out" "$WORK/conc2.out" "$WORK/conc3.out" | sort -u | wc -l)" 1 \
    "concurrent prepares: all three print the same environment"
is "$(cat "$WORK/conc1.err" "$WORK/conc2.err" "$WORK/conc3.err" | grep -c 'cache hit')" 2 \
    "concurrent prepares: one built it, two found it (serialised)"
is "$(find "$WORK/cache-conc" -mindepth 1 -maxdepth 1 | sed 's|.*/||' | tr '\n' ' ')" \
    "$(sed 's|.*/||' "$WORK/conc1.out") " "concurrent prepares: one environment in the cache, no lock file"

# ---- a real install from the npm registry, through the proxy ------------------------------
mkdir "$WORK/np-real"
cat >"$WORK/np-real/package.json" <<'EOF'
{ "name": "abprepnet-real", "version": "1.0.0", "private": true,
  "dependencies": { "is-number": "7.0.0" } }
EOF
# from the host, with npm's own configuration (its CA file, as the install sees it too)
if ! bounded 30 npm view is-number@7.0.0 version --cache "$WORK/npm-cache" >/dev/null 2>&1; then
    for _i in 1 2 3 4 5 6; do
        skip "real npm install through the proxy, check $_i" "the npm registry is not reachable from this host"
    done
else
    prep --node "$WORK/np-real/package.json" --cache-dir "$CACHE" --report "$WORK/pr.json"
    sed -n '1,10s/^/# prepare: /p' "$WORK/perr"
    is "$rc" 0 "real npm install: prepare --node is-number succeeds through the proxy"
    check "real npm install: is-number is in node_modules" test -f "$(tail -n1 "$WORK/pout")/node_modules/is-number/package.json"
    is "$(rj .sandbox.network.enforced)" true "real npm install: sandbox.network enforced"
    n=$(rj .network_proxy.connections_allowed)
    if [ "${n:-0}" -ge 1 ] 2>/dev/null; then ok "real npm install: the proxy let $n connection(s) through"; else
        not_ok "real npm install: the proxy let connections through" "got: $n"
    fi
    is "$(rj .network_proxy.connections_refused)" 0 "real npm install: nothing was refused"
    check "no agentbox-netproxy is left after the real install" no_procs "$NETPROXY"
fi

done_testing
