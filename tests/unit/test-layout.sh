#!/bin/sh
# tests/unit/test-layout.sh -- the tree keeps the shape of the processes (issue 26): no source
# file loose in src/, and the CLI (src/cli) and the MCP server (src/mcp) are clients of the
# library and the shared floors (spec/, fs/, warm/, util/) only: nothing of the supervisor's,
# nothing lib-private. TAP.
set -u
src=${AB_SRCDIR:?}/src
n=0
fails=0
check() { # DESCRIPTION OFFENDERS
    n=$((n + 1))
    if [ -z "$2" ]; then
        echo "ok $n - $1"
    else
        echo "not ok $n - $1"
        printf '%s\n' "$2" | sed 's/^/# /'
        fails=$((fails + 1))
    fi
}
check "no .c or .h loose in src/" "$(find "$src" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \))"
check "src/cli and src/mcp include nothing from src/supervisor" \
    "$(grep -rnE '#[[:space:]]*include[[:space:]]+"[^"]*supervisor/' "$src/cli" "$src/mcp")"
check "src/cli and src/mcp include nothing lib-private" \
    "$(grep -rnE '#[[:space:]]*include[[:space:]]+"[^"]*api-private\.h"' "$src/cli" "$src/mcp")"
check "the floors (spec, fs, util, warm) include nothing from a process's folder" \
    "$(grep -rnE '#[[:space:]]*include[[:space:]]+"[^"]*(supervisor|cli|mcp|lib|init)/' \
        "$src/spec" "$src/fs" "$src/util" "$src/warm")"
check "util includes nothing above it" \
    "$(grep -rnE '#[[:space:]]*include[[:space:]]+"\.\./' "$src/util")"
# the test itself must be able to fail: a planted offender is seen
tmp=$(mktemp -d)
mkdir -p "$tmp/cli"
printf '#include "../supervisor/run.h"\n' >"$tmp/cli/x.c"
check "the include check sees a planted offender" \
    "$(grep -rnqE '#[[:space:]]*include[[:space:]]+"[^"]*supervisor/' "$tmp/cli" || echo missed)"
rm -rf "$tmp"
echo "1..$n"
[ "$fails" = 0 ]
