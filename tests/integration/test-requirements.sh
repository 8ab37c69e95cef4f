#!/bin/sh
# test-requirements.sh -- packages on request (issue 28): tests/integration/test-requirements.py
# drives `agentbox run --spec -` with requirements against real installs and real runs.
# Bounded by an outer timeout.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
trap - EXIT
rc=0
bounded 900 python3 "$(dirname "$0")/test-requirements.py" || rc=$?
_cleanup
exit "$rc"
