#!/bin/sh
# test-mcp.sh -- issue 16: `agentbox mcp` driven by the official MCP TypeScript SDK (Client +
# StdioClientTransport) and by raw JSON-RPC lines (tests/mcp/test-mcp.cjs prints the TAP).
# The SDK comes from npm: ./setup installs tests/mcp/package-lock.json into .deps/mcp-sdk,
# and AB_MCP_SDK points at its node_modules (run-as.sh stages a copy for the user variant).
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

sdk=${AB_MCP_SDK:-}
if ! command -v node >/dev/null 2>&1; then
    echo "1..0 # SKIP no node on this host"
    exit 0
fi
if [ -z "$sdk" ] || [ ! -d "$sdk/@modelcontextprotocol/sdk" ]; then
    echo "1..0 # SKIP the MCP TypeScript SDK is not installed (./setup: npm ci into .deps/mcp-sdk)"
    exit 0
fi
rc=0
AB_MCP_STATE="$WORK/state" NODE_PATH="$sdk" node "$AB_TESTDIR/mcp/test-mcp.cjs" || rc=$?
exit "$rc"
