#!/bin/sh
# clients.sh python|node -- the client packages' own tests (issue 17): clients/python with
# pytest, clients/node with `node --test`, real runs through this build's agentbox (AGENTBOX,
# AGENTBOX_SUPERVISOR, AGENTBOX_INIT and AB_SRCDIR come from tests/meson.build). Exit 77 (meson's
# skip) when the language's runner is not installed. Run as whoever runs meson test: as root
# in CI (the OOM tests need root's memory cgroup; as a user they skip, saying why).
set -eu
src=${AB_SRCDIR:?AB_SRCDIR is not set}
# Their temporary directories (pytest's, TMPDIR's) in one of ours, named like the integration
# tests' (/tmp/agentbox-test.*): escape and isolation, which run beside these, leave those out
# when they look for anything new in /tmp. 0711 like theirs: the install sandbox's user reads
# a test's wheels in it. Removed afterwards.
tmp=$(mktemp -d /tmp/agentbox-test.XXXXXX)
chmod 711 "$tmp"
trap 'rm -rf --one-file-system "$tmp"' EXIT
trap 'exit 1' INT TERM
TMPDIR=$tmp
export TMPDIR
rc=0
case ${1:-} in
python)
    # Debian's python3 (the one python3-pytest and python3-matplotlib install into)
    py=/usr/bin/python3
    [ -x "$py" ] || py=$(command -v python3) || {
        echo "SKIP: no python3"
        exit 77
    }
    if ! "$py" -c 'import pytest' 2>/dev/null; then
        echo "SKIP: pytest is not installed for $py (apt-get install python3-pytest)"
        exit 77
    fi
    PYTHONDONTWRITEBYTECODE=1 "$py" -m pytest -q -rs -p no:cacheprovider --basetemp "$tmp/pytest" \
        "$src/clients/python/tests" || rc=$?
    exit "$rc"
    ;;
node)
    if ! command -v node >/dev/null 2>&1; then
        echo "SKIP: node is not installed"
        exit 77
    fi
    cd "$src/clients/node"
    node --test test/run.test.mjs test/types.test.mjs test/readme.test.mjs || rc=$?
    exit "$rc"
    ;;
*)
    echo "usage: clients.sh python|node" >&2
    exit 2
    ;;
esac
