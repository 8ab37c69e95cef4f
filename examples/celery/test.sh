#!/bin/sh
# examples/celery/test.sh -- agentbox behind Celery, for real (issue 18): redis-server on
# 127.0.0.1 (a free port) as broker and result backend, two Celery workers of
# examples/celery/tasks.py (two processes each), 50 jobs from client.py (some exit 3, some
# time out), and then: every job's report came back exactly once, from one of the two workers,
# with the status its code asked for; both workers took jobs; and once the workers and redis
# are stopped (by pid), nothing of the runs is left. TAP on stdout.
#
# Needs Debian's python3-celery, python3-redis and redis-server (./setup installs them) and
# /usr/bin/python3, which sees Debian's packages; AGENTBOX names the agentbox binary (default:
# agentbox on PATH). Missing pieces are an explicit SKIP.
set -u
here=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
AGENTBOX=${AGENTBOX:-$(command -v agentbox || echo agentbox)}
JOBS=${JOBS:-50}

n=0
failed=0
ok() {
    n=$((n + 1))
    echo "ok $n - $*"
}
not_ok() {
    n=$((n + 1))
    failed=$((failed + 1))
    echo "not ok $n - $1"
    shift
    for l in "$@"; do echo "#   $l"; done
}

if ! command -v redis-server >/dev/null 2>&1 ||
    ! "$PY" -c 'import celery, redis' >/dev/null 2>&1; then
    echo "1..0 # SKIP needs redis-server, python3-celery, python3-redis (./setup installs them)"
    exit 0
fi
[ -x "$AGENTBOX" ] || {
    echo "1..0 # SKIP AGENTBOX='$AGENTBOX' is not an executable agentbox"
    exit 0
}

work=$(mktemp -d /tmp/agentbox-celery.XXXXXX)
token=abcelery$$x$(date +%s)
redis_pid=
worker_pids=
cleanup() {
    # by pid, never by name: the workers first (a warm shutdown), then redis
    for p in $worker_pids; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $worker_pids; do
        i=0
        while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do
            sleep 0.1
            i=$((i + 1))
        done
        kill -KILL "$p" 2>/dev/null || true
    done
    if [ -n "$redis_pid" ]; then
        kill -TERM "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
    worker_pids=
    redis_pid=
}
trap 'cleanup; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM

t0=$(date +%s)
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$work" \
    --protected-mode yes --daemonize no >"$work/redis.log" 2>&1 &
redis_pid=$!
BROKER=redis://127.0.0.1:$port/0
i=0
until "$PY" -c "import redis, sys; redis.Redis.from_url('$BROKER').ping()" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 50 ]; then
        echo "Bail out! redis-server did not start: $(tail -n 3 "$work/redis.log")"
        exit 1
    fi
    sleep 0.1
done
ok "redis-server up on 127.0.0.1:$port (pid $redis_pid)"

for w in w1 w2; do
    (cd "$here" && exec env AGENTBOX="$AGENTBOX" AGENTBOX_CELERY_BROKER="$BROKER" \
        "$PY" -m celery -A tasks worker -n "$w-$token@%h" -c 2 --loglevel=WARNING \
        --without-gossip --without-mingle --without-heartbeat) >"$work/$w.log" 2>&1 &
    worker_pids="$worker_pids $!"
done
i=0
until [ "$(cd "$here" && AGENTBOX_CELERY_BROKER="$BROKER" "$PY" -c '
from tasks import app
r = app.control.ping(timeout=0.5) or []
print(len(r))' 2>/dev/null)" = 2 ]; do
    i=$((i + 1))
    if [ $i -gt 40 ]; then
        echo "Bail out! the two workers did not come up: $(tail -n 5 "$work/w1.log" "$work/w2.log")"
        exit 1
    fi
done
ok "two workers answer ($(($(date +%s) - t0)) s)"

t1=$(date +%s)
(cd "$here" && AGENTBOX_CELERY_BROKER="$BROKER" "$PY" client.py "$JOBS" "$token") \
    >"$work/results.jsonl" 2>"$work/client.err"
echo "# $JOBS jobs in $(($(date +%s) - t1)) s"

"$PY" - "$work/results.jsonl" "$JOBS" >"$work/verdict" <<'EOF'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
rows = [json.loads(l) for l in open(path) if l.strip()]
problems = []
jobs = [r["job"] for r in rows]
run_ids = [((r.get("report") or {}).get("run_id")) for r in rows]
workers = {r.get("worker") for r in rows if r.get("worker")}
for r in rows:
    i, rep = r["job"], r.get("report") or {}
    if "error" in r:
        problems.append("job %d: %s" % (i, r["error"]))
        continue
    st, code, out = rep.get("status"), rep.get("exit_code"), (rep.get("stdout") or {}).get("text", "")
    if i % 10 == 9:
        want = st == "timeout" and r["exit"] == 124 and "limits" in rep and "timeout" in rep.get("limits_hit", [])
    elif i % 10 == 7:
        want = st == "exited" and code == 3 and r["exit"] == 3 and out == "job %d fails\n" % i
    else:
        want = st == "exited" and code == 0 and r["exit"] == 0 and out == "job %d\n" % i
    if not want:
        problems.append("job %d: status %s exit %s (agentbox %s) out %r %s" % (i, st, code, r["exit"], out, r.get("stderr", "")[-200:]))
print("rows=%d" % len(rows))
print("jobs_once=%d" % (sorted(jobs) == list(range(n))))
print("run_ids_unique=%d" % (len(set(run_ids)) == n and None not in run_ids))
print("workers=%d" % len(workers))
print("worker_names=%s" % ",".join(sorted(w.split("@")[0] for w in workers)))
print("problems=%d" % len(problems))
for p in problems[:10]:
    print("problem " + p)
EOF
v() { sed -n "s/^$1=//p" "$work/verdict"; }
if [ "$(v rows)" = "$JOBS" ]; then ok "$JOBS results came back"; else
    not_ok "$JOBS results came back" "got $(v rows)" "$(tail -n 3 "$work/client.err")"
fi
if [ "$(v jobs_once)" = 1 ]; then ok "every job's result came back exactly once"; else
    not_ok "every job's result came back exactly once"
fi
if [ "$(v run_ids_unique)" = 1 ]; then ok "every result carries its own report (50 distinct run ids)"; else
    not_ok "every result carries its own report"
fi
if [ "$(v problems)" = 0 ]; then ok "each report says what its code did: exited 0, exited 3, or timeout (exit 124)"; else
    not_ok "each report says what its code did" "$(sed -n 's/^problem //p' "$work/verdict")"
fi
if [ "$(v workers)" = 2 ]; then ok "both workers took jobs ($(v worker_names))"; else
    not_ok "both workers took jobs" "workers: $(v worker_names)"
fi

rpid=$redis_pid
cleanup
left=""
for p in /proc/[0-9]*; do
    if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -q "$token" ||
        tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q "$token"; then
        left="$left ${p#/proc/}"
    fi
done
if [ -z "$left" ]; then ok "nothing left running: no worker, no sandbox process carries the token"; else
    not_ok "nothing left running" "pids:$left"
fi
if kill -0 "$rpid" 2>/dev/null; then not_ok "redis-server stopped (pid $rpid)"; else ok "redis-server stopped (pid $rpid)"; fi
echo "# total $(($(date +%s) - t0)) s"
echo "1..$n"
[ "$failed" -eq 0 ]
