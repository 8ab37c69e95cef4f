/* files.c: serving what a kept run left, and only that.
 *
 * A run's files are reached from its record (state/jobs/ID.json names its run directory),
 * then beneath that run's kept workspace with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV): no link is followed on the way or at the end,
 * nothing outside the workspace can be named, only regular files with one link are read,
 * and never more than the policy's cap. Nothing here trusts a path or an id a client sent. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "../util/fdutil.h"
#include "../util/hex.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "mcp.h"

#define URI_PREFIX "agentbox://runs/"

static const char id_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";

bool
mcp_id_valid(const char *id)
{
	size_t n = 0;

	if (!id)
		return false;
	for (; id[n]; n++)
		if (!strchr(id_chars, id[n]) || n >= MCP_ID_LEN)
			return false;
	return n == MCP_ID_LEN;
}

void
mcp_id_new(char id[MCP_ID_LEN + 1])
{
	unsigned char rnd[MCP_ID_LEN];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd)) {
		uint64_t x = (uint64_t) now_ns() ^ ((uint64_t) getpid() << 32);

		for (size_t i = 0; i < sizeof(rnd); i++, x = x * 6364136223846793005ULL + 1)
			rnd[i] = (unsigned char) (x >> 56);
	}
	for (size_t i = 0; i < MCP_ID_LEN; i++)
		id[i] = id_chars[rnd[i] % (sizeof(id_chars) - 1)];
	id[MCP_ID_LEN] = '\0';
}

bool
mcp_path_ok(const char *path)
{
	size_t len = path ? strlen(path) : 0;
	const char *p = path;

	if (len == 0 || len > 4096 || path[0] == '/')
		return false;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t) (slash - p) : strlen(p);

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p == '/')
			p++;
	}
	return path[len - 1] != '/';
}

bool
mcp_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s, *end = p + len;

	while (p < end) {
		unsigned c = *p;
		size_t n;
		uint32_t cp;

		if (c < 0x80) {
			if (c == 0)
				return false;
			p++;
			continue;
		}
		if ((c & 0xE0) == 0xC0)
			n = 1, cp = c & 0x1F;
		else if ((c & 0xF0) == 0xE0)
			n = 2, cp = c & 0x0F;
		else if ((c & 0xF8) == 0xF0)
			n = 3, cp = c & 0x07;
		else
			return false;
		if ((size_t) (end - p) <= n)
			return false;
		for (size_t i = 1; i <= n; i++) {
			if ((p[i] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i] & 0x3F);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		p += n + 1;
	}
	return true;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
mcp_base64(const unsigned char *buf, size_t len)
{
	char *out = xmalloc((len + 2) / 3 * 4 + 1), *o = out;
	size_t i;

	for (i = 0; i + 2 < len; i += 3) {
		*o++ = b64[buf[i] >> 2];
		*o++ = b64[((buf[i] & 3) << 4) | (buf[i + 1] >> 4)];
		*o++ = b64[((buf[i + 1] & 15) << 2) | (buf[i + 2] >> 6)];
		*o++ = b64[buf[i + 2] & 63];
	}
	if (i < len) {
		*o++ = b64[buf[i] >> 2];
		if (i + 1 < len) {
			*o++ = b64[((buf[i] & 3) << 4) | (buf[i + 1] >> 4)];
			*o++ = b64[(buf[i + 1] & 15) << 2];
		} else {
			*o++ = b64[(buf[i] & 3) << 4];
			*o++ = '=';
		}
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

unsigned char *
mcp_unbase64(const char *s, size_t len, size_t cap, size_t *ret_len)
{
	unsigned char *out;
	size_t n = 0, bits = 0;
	uint32_t acc = 0;

	while (len > 0 && s[len - 1] == '=')
		len--;
	if (len % 4 == 1 || len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0) > cap)
		return NULL;
	out = xmalloc(len / 4 * 3 + 3);
	for (size_t i = 0; i < len; i++) {
		const char *c = s[i] ? strchr(b64, s[i]) : NULL;

		if (!c) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (uint32_t) (c - b64);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (unsigned char) (acc >> bits);
		}
	}
	*ret_len = n;
	return out;
}

static bool
unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
}

char *
mcp_uri_build(const char *job_id, const char *path)
{
	size_t n = strlen(path);
	char *enc = xmalloc(n * 3 + 1), *o = enc, *uri;

	for (const unsigned char *p = (const unsigned char *) path; *p; p++) {
		if (unreserved(*p)) {
			*o++ = (char) *p;
		} else {
			snprintf(o, 4, "%%%02X", *p);
			o += 3;
		}
	}
	*o = '\0';
	uri = xasprintf(URI_PREFIX "%s/files/%s", job_id, enc);
	free(enc);
	return uri;
}

int
mcp_uri_parse(const char *uri, char id[MCP_ID_LEN + 1], char **ret_path)
{
	const char *p;
	char *path, *o;

	if (strncmp(uri, URI_PREFIX, strlen(URI_PREFIX)) != 0)
		return -EINVAL;
	p = uri + strlen(URI_PREFIX);
	if (strlen(p) < MCP_ID_LEN || strncmp(p + MCP_ID_LEN, "/files/", 7) != 0)
		return -EINVAL;
	memcpy(id, p, MCP_ID_LEN);
	id[MCP_ID_LEN] = '\0';
	if (!mcp_id_valid(id))
		return -EINVAL;
	p += MCP_ID_LEN + 7;
	path = o = xmalloc(strlen(p) + 1);
	for (; *p; p++) {
		if (*p == '%') {
			int hi = hex_digit(p[1]), lo = hi >= 0 ? hex_digit(p[2]) : -1;

			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				free(path);
				return -EINVAL;
			}
			*o++ = (char) (hi * 16 + lo);
			p += 2;
		} else if (*p == '?' || *p == '#') {
			break;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	if (!mcp_path_ok(path)) {
		free(path);
		return -EINVAL;
	}
	*ret_path = path;
	return 0;
}

static const struct {
	const char *ext, *type;
} mime_types[] = {
	{ ".png", "image/png" },        { ".jpg", "image/jpeg" },
	{ ".jpeg", "image/jpeg" },      { ".gif", "image/gif" },
	{ ".svg", "image/svg+xml" },    { ".webp", "image/webp" },
	{ ".pdf", "application/pdf" },  { ".json", "application/json" },
	{ ".csv", "text/csv" },         { ".tsv", "text/tab-separated-values" },
	{ ".html", "text/html" },       { ".htm", "text/html" },
	{ ".md", "text/markdown" },     { ".txt", "text/plain" },
	{ ".log", "text/plain" },       { ".py", "text/x-python" },
	{ ".js", "text/javascript" },   { ".mjs", "text/javascript" },
	{ ".xml", "application/xml" },  { ".yaml", "application/yaml" },
	{ ".yml", "application/yaml" }, { ".zip", "application/zip" },
	{ ".gz", "application/gzip" },  { ".npy", "application/octet-stream" },
	{ ".wav", "audio/wav" },
};

const char *
mcp_mime_type(const char *path)
{
	const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');

	if (dot && (!slash || dot > slash)) {
		for (size_t i = 0; i < ARRAY_SIZE(mime_types); i++)
			if (strcasecmp(dot, mime_types[i].ext) == 0)
				return mime_types[i].type;
	}
	return "application/octet-stream";
}

int
mcp_open_beneath(int dirfd, const char *path, struct stat *st)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	cleanup_fd int fd = -1;

	if (!mcp_path_ok(path))
		return -EINVAL;
	fd = (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	if (fd < 0)
		return -errno; /* ENOSYS: no openat2, so no file is served at all */
	if (fstat(fd, st) < 0)
		return -errno;
	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	if (!S_ISREG(st->st_mode) || st->st_nlink != 1)
		return -EPERM;
	return steal_fd(&fd);
}

/* state/jobs/ID.json, parsed (NULL when there is none) */
static json_t *
read_record(struct mcp *m, const char *job_id)
{
	cleanup_free char *name = xasprintf("%s.json", job_id), *text = NULL;
	cleanup_fd int fd = -1;

	if (!mcp_id_valid(job_id) || m->jobs_fd < 0)
		return NULL;
	fd = openat(m->jobs_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || read_all_capped(fd, 64 << 10, &text) < 0)
		return NULL;
	return json_loads(text, 0, NULL);
}

json_t *
mcp_result_from_record(struct mcp *m, const char *job_id)
{
	json_t *rec = read_record(m, job_id), *res = NULL;
	const char *rd = json_string_value(json_object_get(rec, "run_dir"));
	const char *err = json_string_value(json_object_get(rec, "error"));

	if (!rec)
		return NULL;
	if (rd && strncmp(rd, "run-", 4) == 0 && !strchr(rd, '/') && m->runs_fd >= 0) {
		cleanup_free char *rel = xasprintf("%s/report.json", rd), *text = NULL;
		struct stat st;
		cleanup_fd int fd = mcp_open_beneath(m->runs_fd, rel, &st);
		json_t *rep = NULL;

		if (fd >= 0 && read_all_capped(fd, 256u << 20, &text) >= 0)
			rep = json_loads(text, 0, NULL);
		if (rep)
			res = mcp_result_from_report(
				m, job_id, rep,
				json_integer_value(json_object_get(rec, "queue_ms")));
		json_decref(rep);
		if (!res)
			res = mcp_result_error("run %s: its report is gone (removed?)", job_id);
	} else {
		res = mcp_result_error("run %s did not run: %s", job_id, err ? err : "unknown");
	}
	json_decref(rec);
	return res;
}

int
mcp_run_workspace(struct mcp *m, const char *job_id)
{
	json_t *rec = read_record(m, job_id);
	const char *rd = json_string_value(json_object_get(rec, "run_dir"));
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	int fd;

	if (!rd || strncmp(rd, "run-", 4) != 0 || strchr(rd, '/') || strlen(rd) > 64 ||
	    m->runs_fd < 0) {
		json_decref(rec);
		return -ENOENT;
	}
	{
		cleanup_free char *rel = xasprintf("%s/work", rd);

		fd = (int) syscall(SYS_openat2, m->runs_fd, rel, &how, sizeof(how));
	}
	json_decref(rec);
	return fd < 0 ? (errno == ENOENT ? -ENOENT : -errno) : fd;
}

json_t *
mcp_read_run_file(struct mcp *m, const char *job_id, const char *path, uint64_t offset,
		  uint64_t length, bool as_resource, int *ret_code, char **ret_msg)
{
	cleanup_fd int ws = -1, fd = -1;
	cleanup_free unsigned char *buf = NULL;
	struct stat st;
	size_t got = 0, want;
	json_t *out;
	const char *mime = mcp_mime_type(path);

	*ret_code = 0;
	*ret_msg = NULL;
	if (!mcp_id_valid(job_id)) {
		*ret_code = -ENOENT;
		*ret_msg = xstrdup("Resource not found: no such run");
		return NULL;
	}
	if (!mcp_path_ok(path)) {
		*ret_code = -EINVAL;
		*ret_msg = xstrdup("invalid path: relative to the workspace, no '..', no "
				   "empty or '.' components");
		return NULL;
	}
	ws = mcp_run_workspace(m, job_id);
	if (ws < 0) {
		*ret_code = -ENOENT;
		*ret_msg = xasprintf("Resource not found: run %s has no kept files (unknown, "
				     "still running, or removed)",
				     job_id);
		return NULL;
	}
	fd = mcp_open_beneath(ws, path, &st);
	if (fd < 0) {
		*ret_code = fd == -ENOENT ? -ENOENT : fd;
		*ret_msg = xasprintf("%s '%s' in run %s: %s",
				     fd == -ENOENT ? "Resource not found:" : "cannot serve", path,
				     job_id,
				     fd == -ELOOP || fd == -EXDEV ? "a link (never followed)"
				     : fd == -EPERM  ? "not a regular file with a single link"
				     : fd == -EISDIR ? "a directory (use list_files)"
						     : strerror(-fd));
		return NULL;
	}
	if (as_resource && (uint64_t) st.st_size > length) {
		*ret_code = -EFBIG;
		*ret_msg =
			xasprintf("'%s' is %lld bytes, over this server's %llu-byte cap for "
				  "resources/read: use the read_file tool with offset and length",
				  path, (long long) st.st_size, (unsigned long long) length);
		return NULL;
	}
	if (offset > (uint64_t) st.st_size)
		offset = (uint64_t) st.st_size;
	want = (size_t) ((uint64_t) st.st_size - offset < length ? (uint64_t) st.st_size - offset
								 : length);
	buf = xmalloc(want + 1);
	while (got < want) {
		ssize_t n = pread(fd, buf + got, want - got, (off_t) (offset + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t) n;
	}
	buf[got] = '\0';
	if (as_resource) {
		out = json_pack("{s:s}", "mimeType", mime);
		if (strncmp(mime, "image/", 6) != 0 && mcp_utf8_valid((char *) buf, got)) {
			json_object_set_new(out, "text", json_stringn((char *) buf, got));
		} else {
			cleanup_free char *b = mcp_base64(buf, got);

			json_object_set_new(out, "blob", json_string(b));
		}
		return out;
	}
	out = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:b}", "run_id", job_id, "path", path,
			"mime_type", mime, "offset", (json_int_t) offset, "length",
			(json_int_t) got, "size", (json_int_t) st.st_size, "eof",
			offset + got >= (uint64_t) st.st_size);
	if (mcp_utf8_valid((char *) buf, got)) {
		json_object_set_new(out, "encoding", json_string("utf-8"));
		json_object_set_new(out, "content", json_stringn((char *) buf, got));
	} else {
		cleanup_free char *b = mcp_base64(buf, got);

		json_object_set_new(out, "encoding", json_string("base64"));
		json_object_set_new(out, "content", json_string(b));
	}
	return out;
}
