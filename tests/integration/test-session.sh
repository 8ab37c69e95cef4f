#!/bin/sh
# test-session.sh -- sessions (issue 27) end to end: tests/integration/test-session.py drives
# `agentbox session --jsonl` against real sandboxes. Bounded by an outer timeout.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
trap - EXIT
rc=0
bounded 400 python3 "$(dirname "$0")/test-session.py" || rc=$?
_cleanup
exit "$rc"
