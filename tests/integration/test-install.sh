#!/bin/sh
# test-install.sh -- issue 14: `meson install` into a staging directory, then the README's C
# example (examples/c/hello.c) compiled against the installed header and library with
# `pkg-config --cflags --libs agentbox`, and run: it must print "exited: 42". Also: the
# installed library exports ab_* and nothing else, and has a soname.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

if [ -z "${AB_BUILDDIR:-}" ] || [ ! -f "$AB_BUILDDIR/build.ninja" ]; then
    skip "meson install into a stage" "needs the build tree (AB_BUILDDIR); the staged user variant has none"
    done_testing
    exit $?
fi
STAGE=$WORK/stage
rc=0
meson install -C "$AB_BUILDDIR" --destdir "$STAGE" --no-rebuild --quiet >"$WORK/install.log" 2>&1 || rc=$?
is "$rc" 0 "meson install --destdir: exit 0"
PREFIX=$(meson introspect "$AB_BUILDDIR" --buildoptions | jq -r '.[] | select(.name == "prefix") | .value')
# a library built with sanitizers (run-suite's ASan+UBSan pass) needs its programs built with
# them too, or the ASan runtime does not come first
SAN=$(meson introspect "$AB_BUILDDIR" --buildoptions | jq -r '.[] | select(.name == "b_sanitize") | .value')
SANFLAGS=""
[ "$SAN" = none ] || [ -z "$SAN" ] || SANFLAGS="-fsanitize=$SAN"
PC=$(find "$STAGE" -name agentbox.pc | head -n1)
check "the pkg-config file is installed" test -n "$PC"
check "the header is installed" test -f "$STAGE$PREFIX/include/agentbox/agentbox.h"
MAN=$STAGE$PREFIX/share/man/man1/agentbox.1
check "the man page is installed" test -f "$MAN"
# it covers every command and every option each command's --help lists
for _c in run session prepare doctor collect rm gc version help mcp; do
    check "man page: command $_c" grep -q "fB\(agentbox \)\?$_c\b" "$MAN"
    for _o in $("$AGENTBOX" "$_c" --help 2>/dev/null | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        check "man page: $_c $_o" grep -q -- "fB$_o\b" "$MAN"
    done
done
check "man page: the exit statuses" grep -q 'EXIT STATUS' "$MAN"
check "man page: AGENTBOX_KEEP_RUNS" grep -q 'AGENTBOX_KEEP_RUNS' "$MAN"
SUP=$(find "$STAGE" -name agentbox-supervisor -type f | head -n1)
check "agentbox-supervisor is installed (libexec)" test -n "$SUP"
LIB=$(find "$STAGE" -name 'libagentbox.so.1' | head -n1)
is "$(objdump -p "$LIB" 2>/dev/null | awk '/SONAME/ { print $2 }')" libagentbox.so.1 "the library's soname is libagentbox.so.1"
is "$(nm -D --defined-only "$LIB" | awk '$3 !~ /^ab_/ && $3 != "AGENTBOX_1" { print $3 }' | head -n5 | tr '\n' ' ')" "" \
    "the library exports ab_* only"
check "the library exports ab_run_start" sh -c "nm -D --defined-only '$LIB' | grep -qw ab_run_start"

# pkg-config relocated to the stage: --define-variable=prefix
CFLAGS_LIBS=$(PKG_CONFIG_PATH=$(dirname "$PC") pkg-config --define-variable=prefix="$STAGE$PREFIX" \
    --cflags --libs agentbox 2>"$WORK/pc.err")
check "pkg-config --cflags --libs agentbox works" test -n "$CFLAGS_LIBS"
rc=0
# shellcheck disable=SC2086 # the flags are words
cc -Wall -Werror $SANFLAGS "$AB_SRCDIR/examples/c/hello.c" $CFLAGS_LIBS -o "$WORK/hello" >"$WORK/cc.log" 2>&1 || rc=$?
is "$rc" 0 "examples/c/hello.c compiles against the installed files ($(head -c 200 "$WORK/cc.log"))"
# the README's first C block itself, exactly as written there
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on { print }' "$AB_SRCDIR/README.md" >"$WORK/readme.c"
check "the README has a C block" test -s "$WORK/readme.c"
rc=0
# shellcheck disable=SC2086 # the flags are words
cc -Wall -Werror $SANFLAGS -x c "$WORK/readme.c" $CFLAGS_LIBS -o "$WORK/readme" >"$WORK/cc2.log" 2>&1 || rc=$?
is "$rc" 0 "the README's first C block compiles against the installed files ($(head -c 200 "$WORK/cc2.log"))"
rc=0
LD_LIBRARY_PATH=$(dirname "$LIB") AGENTBOX_SUPERVISOR=$SUP AGENTBOX_RUNS_DIR=$RUNS \
    bounded 60 "$WORK/readme" >"$WORK/out" 2>"$WORK/err" || rc=$?
is "$(cat "$WORK/out")" "exited: 42" "the README's block runs and prints 'exited: 42'"
rc=0
LD_LIBRARY_PATH=$(dirname "$LIB") AGENTBOX_SUPERVISOR=$SUP AGENTBOX_RUNS_DIR=$RUNS \
    bounded 60 "$WORK/hello" >"$WORK/out" 2>"$WORK/err" || rc=$?
is "$rc" 0 "the example runs (exit 0)"
is "$(cat "$WORK/out")" "exited: 42" "the example prints 'exited: 42'"

done_testing
