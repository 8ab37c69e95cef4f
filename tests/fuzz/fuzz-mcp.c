/* fuzz-mcp.c: libFuzzer over the MCP message handler (src/mcp/proto.c and the tools it
 * dispatches to), what every client of `agentbox mcp` talks to. The input is split into
 * lines, each handed over as one message, with no state directory and no runs (queued runs
 * never start here). Every message the server sends must be one JSON-RPC 2.0 object: a
 * response with an id (or null) and exactly one of result and error, or a notification;
 * nothing may crash or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/mcp/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(struct mcp *m, json_t *msg)
{
	json_t *id = json_object_get(msg, "id");
	bool res = json_object_get(msg, "result") != NULL;
	bool err = json_object_get(msg, "error") != NULL;
	char *text = json_dumps(msg, JSON_COMPACT);

	(void) m;
	if (!text || strchr(text, '\n'))
		abort(); /* one message, one line */
	free(text);
	if (strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0") != 0)
		abort();
	if (json_object_get(msg, "method")) {
		if (id || res || err)
			abort();
		return;
	}
	if (!id || !(json_is_null(id) || json_is_string(id) || json_is_integer(id)) || res == err)
		abort();
	if (err && !json_is_integer(json_object_get(json_object_get(msg, "error"), "code")))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp m;
	size_t start = 0;

	mcp_init(&m);
	m.fuzzing = true;
	m.send = check;
	m.pol.max_message = 1 << 20;
	for (size_t i = 0; i <= size; i++) {
		if (i == size || data[i] == '\n') {
			if (i > start)
				mcp_handle_line(&m, (const char *) data + start, i - start);
			start = i + 1;
		}
	}
	mcp_done(&m);
	return 0;
}
