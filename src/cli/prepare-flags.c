/* prepare-flags.c: `agentbox prepare ARGS` as the request the library's ab_prepare takes
 * (the supervisor's prepare.c builds the environment; this is only the command line). */
#include "prepare-flags.h"

#include <getopt.h>
#include <jansson.h>

#include "../util/err.h"

const char *
prepare_usage(void)
{
	return "usage: agentbox prepare --python requirements.txt [--system-site-packages]\n"
	       "                        [--find-links DIR] [--no-index] [--interpreter PATH]\n"
	       "       agentbox prepare --node package.json [package-lock.json]\n"
	       "options for both: --cache-dir DIR --timeout DUR --memory SIZE --pids N\n"
	       "                  --disk SIZE --report FILE --allow-host HOST[:PORT]\n"
	       "                  --index-url https://HOST[:PORT]/PATH (pip's index, npm's "
	       "registry)\n"
	       "Builds the environment in a sandbox that writes only into a tmpfs of its own, and\n"
	       "publishes agentbox's sanitised copy in the cache; prints its path. Same inputs\n"
	       "again: a cache hit. The sandbox has its own network: only HTTPS to the package\n"
	       "index (pypi.org and files.pythonhosted.org, or registry.npmjs.org, or the\n"
	       "--index-url host; none with --no-index) and each --allow-host, through a proxy\n"
	       "that never connects to loopback, private or link-local addresses. The index\n"
	       "must answer first (5 s), or prepare stops.\n"
	       "Exit status: 0 built or found; 2 usage error; 3 the package index cannot be\n"
	       "reached; 125 the install failed or was refused.\n";
}

int
prepare_request_from_args(int argc, char **argv, json_t **ret, const char **ret_report,
			  struct ab_err *err)
{
	static const struct option opts[] = {
		{ "allow-host", required_argument, NULL, 'a' },
		{ "cache-dir", required_argument, NULL, 'c' },
		{ "disk", required_argument, NULL, 'd' },
		{ "find-links", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "index-url", required_argument, NULL, 'u' },
		{ "interpreter", required_argument, NULL, 'i' },
		{ "memory", required_argument, NULL, 'm' },
		{ "no-index", no_argument, NULL, 'n' },
		{ "node", required_argument, NULL, 'N' },
		{ "pids", required_argument, NULL, 'p' },
		{ "python", required_argument, NULL, 'P' },
		{ "report", required_argument, NULL, 'r' },
		{ "system-site-packages", no_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	json_t *q = json_object(), *lim = json_object(), *hosts = json_array();
	int c;

	*ret = NULL;
	*ret_report = NULL;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			json_array_append_new(hosts, json_string(optarg));
			break;
		case 'c':
			json_object_set_new(q, "cache_dir", json_string(optarg));
			break;
		case 'd':
			json_object_set_new(lim, "disk", json_string(optarg));
			break;
		case 'f':
			json_object_set_new(q, "find_links", json_string(optarg));
			break;
		case 'h':
			json_decref(q);
			json_decref(lim);
			json_decref(hosts);
			return 1;
		case 'i':
			json_object_set_new(q, "interpreter", json_string(optarg));
			break;
		case 'u':
			json_object_set_new(q, "index_url", json_string(optarg));
			break;
		case 'm':
			json_object_set_new(lim, "memory", json_string(optarg));
			break;
		case 'n':
			json_object_set_new(q, "no_index", json_true());
			break;
		case 'N':
			json_object_del(q, "python");
			json_object_set_new(q, "node", json_string(optarg));
			break;
		case 'p':
			json_object_set_new(lim, "pids", json_string(optarg));
			break;
		case 'P':
			json_object_del(q, "node");
			json_object_set_new(q, "python", json_string(optarg));
			break;
		case 'r':
			*ret_report = optarg;
			break;
		case 's':
			json_object_set_new(q, "system_site_packages", json_true());
			break;
		case 't':
			json_object_set_new(lim, "timeout", json_string(optarg));
			break;
		default:
			json_decref(q);
			json_decref(lim);
			json_decref(hosts);
			return ab_err_usage(err, "prepare: %s '%s'",
					    c == ':' ? "option needs a value" : "unknown option",
					    argv[optind - 1]);
		}
	}
	if (json_object_get(q, "node") && optind < argc)
		json_object_set_new(q, "lock", json_string(argv[optind++]));
	if (optind < argc || (!json_object_get(q, "python") && !json_object_get(q, "node"))) {
		json_decref(q);
		json_decref(lim);
		json_decref(hosts);
		return ab_err_usage(err, "prepare: give --python requirements.txt or --node "
					 "package.json (and nothing else)");
	}
	if (json_object_size(lim))
		json_object_set(q, "limits", lim);
	if (json_array_size(hosts))
		json_object_set(q, "allow_hosts", hosts);
	json_decref(lim);
	json_decref(hosts);
	*ret = q;
	return 0;
}
