/* fuzz-spec.c: libFuzzer over the run spec parser (src/spec/spec.c), the first thing that reads
 * what a caller of the library, the CLI's --spec or an MCP client sends. Every input must be
 * accepted or refused with a usage error and a message, never crash or leak; an accepted spec
 * must survive spec_build → spec_parse with the same options. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/spec/options.h"
#include "src/spec/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ab_run_opts o, again;
	struct ab_err err = { 0 };
	int r;

	run_opts_init(&o);
	r = spec_parse_text((const char *) data, size, &o, &err);
	if (r < 0) {
		if (err.exit != AB_EXIT_USAGE || !err.msg[0])
			abort(); /* a refusal is always a usage error that says why */
	} else {
		json_t *j = spec_build(&o);
		char *text = json_dumps(j, JSON_COMPACT);
		struct ab_err err2 = { 0 };

		run_opts_init(&again);
		if (!text || spec_parse_text(text, (size_t) -1, &again, &err2) < 0 ||
		    again.lang != o.lang || again.rm != o.rm ||
		    again.script_args.n != o.script_args.n ||
		    memcmp(again.limits, o.limits, sizeof(o.limits)) != 0 ||
		    memcmp(again.without, o.without, sizeof(o.without)) != 0 ||
		    again.code_len != o.code_len || again.inline_output != o.inline_output ||
		    again.output_truncate != o.output_truncate)
			abort(); /* what the CLI builds must parse back to the same run */
		free(text);
		json_decref(j);
		run_opts_done(&again);
	}
	run_opts_done(&o);
	return 0;
}
