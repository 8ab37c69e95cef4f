/* hello.c: the README's first C example. Build against an installed agentbox:
 *   cc hello.c $(pkg-config --cflags --libs agentbox) -o hello && ./hello */
#include <agentbox/agentbox.h>
#include <stdio.h>

int
main(void)
{
	ab_error *err = NULL;
	ab_result *res = NULL;
	ab_spec *spec = ab_spec_from_json("{\"language\": \"python\", \"code\": \"print(6 * 7)\"}",
					  (size_t) -1, &err);

	if (!spec || ab_run(NULL, spec, &res, &err) < 0) {
		fprintf(stderr, "agentbox: %s\n", ab_error_message(err));
		return 1;
	}
	printf("%s: %s", ab_result_status(res), ab_result_stdout(res, NULL));
	ab_result_free(res);
	ab_spec_free(spec);
	return 0;
}
