#!/bin/sh
# container-inside.sh -- runs inside a test container of test-containers.sh (issue 18), as
# whoever the container runs as; writes everything to /out for the host to judge:
#   doctor.json, doctor.rc     agentbox doctor --json
#   hello.json, hello.rc, hello.out, hello.err   one run of a small script (it prints its hostname)
#   TEST-WHO.tap               each integration test named on the command line, run with
#                              run-as.sh WHO (root: as root and as a throwaway user; user: as is)
# Usage: container-inside.sh WHO [TEST...]   (the source tree is at /src, read-only)
set -u
who=$1
shift
cd /tmp || exit 1
agentbox doctor --json >/out/doctor.json 2>/out/doctor.err
echo $? >/out/doctor.rc
printf 'import socket\nprint("hello from", socket.gethostname())\n' >/tmp/hello.py
agentbox run --report /out/hello.json /tmp/hello.py >/out/hello.out 2>/out/hello.err
echo $? >/out/hello.rc
for t in "$@"; do
    for w in $who; do
        AGENTBOX=/usr/local/bin/agentbox \
            AGENTBOX_INIT=/usr/local/libexec/agentbox/agentbox-init \
            AGENTBOX_SUPERVISOR=/usr/local/libexec/agentbox/agentbox-supervisor \
            AGENTBOX_NETPROXY=/usr/local/libexec/agentbox/agentbox-netproxy \
            AB_PROBE=/opt/ab-probe AB_SRCDIR=/src AB_TESTDIR=/src/tests \
            sh /src/tests/integration/run-as.sh "$w" "/src/tests/integration/test-$t.sh" \
            >"/out/$t-$w.tap" 2>"/out/$t-$w.err"
        echo $? >"/out/$t-$w.rc"
    done
done
