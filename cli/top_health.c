/* `portcullis top`'s reading of the daemons' health: the engine's status
 * JSON (engine.sock, docs/engine.md) and logd's metrics (Prometheus text,
 * logd-control.sock), reduced to the few numbers the view shows. Bytes of
 * another process, read with bounds and a depth limit (fuzz_top). */
#include "cli/cli_int.h"

#include <stdlib.h>
#include <string.h>

#define JSON_DEPTH 8

struct jwalk {
	const char *s;
	size_t n, i;
	struct top_health *h;
};

static void ws(struct jwalk *w)
{
	while (w->i < w->n && (w->s[w->i] == ' ' || w->s[w->i] == '\n' || w->s[w->i] == '\t' ||
			       w->s[w->i] == '\r'))
		w->i++;
}

/* A string at w->i: its raw inside (escapes kept) in *v, *vl. */
static int jstring(struct jwalk *w, const char **v, size_t *vl)
{
	size_t start;

	if (w->i >= w->n || w->s[w->i] != '"')
		return PC_EPARSE;
	start = ++w->i;
	while (w->i < w->n && w->s[w->i] != '"') {
		if ((unsigned char)w->s[w->i] < 0x20)
			return PC_EPARSE;
		w->i += w->s[w->i] == '\\' ? 2 : 1;
	}
	if (w->i >= w->n)
		return PC_EPARSE;
	*v = w->s + start;
	*vl = w->i - start;
	w->i++;
	return 0;
}

static bool path_is(const char *path, const char *want)
{
	return strcmp(path, want) == 0;
}

/* A number or a string at a path the view shows. */
static void jfield(struct jwalk *w, const char *path, const char *v, size_t vl, bool str)
{
	struct top_health *h = w->h;
	static const struct {
		const char *path;
		size_t off;
		bool sum; /* over the queues */
	} nums[] = {
#define F(p, f, s) {p, offsetof(struct top_health, f), s}
	    F("uptime_s", uptime_s, false),
	    F("flows", flows, false),
	    F("held", held, false),
	    F("queues.queued", queued, true),
	    F("queues.kernel_dropped", kernel_dropped, true),
	    F("queues.user_dropped", user_dropped, true),
	    F("queues.enobufs", enobufs, true),
	    F("log.sent", log_sent, false),
	    F("log.failed", log_failed, false),
	    F("check.findings", check_findings, false),
#undef F
	};
	char text[64];
	size_t n = 0;

	/* display text: no escape decoded, nothing that moves a cursor */
	for (size_t i = 0; i < vl && n + 1 < sizeof(text); i++)
		text[n++] = (unsigned char)v[i] < 0x20 || v[i] == 0x7f || v[i] == '\\' ? '?' : v[i];
	text[n] = '\0';
	if (str) {
		if (path_is(path, "policy"))
			pc_strlcpy(h->policy, text, sizeof(h->policy));
		else if (path_is(path, "check.result"))
			pc_strlcpy(h->check, text, sizeof(h->check));
		return;
	}
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		uint64_t *dst = (uint64_t *)((char *)h + nums[i].off);
		uint64_t x;

		if (!path_is(path, nums[i].path))
			continue;
		if (text[0] < '0' || text[0] > '9')
			return;
		x = strtoull(text, NULL, 10);
		*dst = nums[i].sum ? *dst + x : x;
		return;
	}
}

/* A value at w->i, its path (keys joined by '.'; array items add none). */
static int jvalue(struct jwalk *w, char *path, size_t plen, int depth)
{
	const char *v;
	size_t vl, start;
	int rc;

	ws(w);
	if (w->i >= w->n)
		return PC_EPARSE;
	if (w->s[w->i] == '"') {
		if ((rc = jstring(w, &v, &vl)) < 0)
			return rc;
		jfield(w, path, v, vl, true);
		return 0;
	}
	if (w->s[w->i] == '{' || w->s[w->i] == '[') {
		bool obj = w->s[w->i] == '{';
		char close = obj ? '}' : ']';
		size_t base = strlen(path);

		if (depth >= JSON_DEPTH)
			return PC_EPARSE;
		w->i++;
		ws(w);
		if (w->i < w->n && w->s[w->i] == close) {
			w->i++;
			return 0;
		}
		for (;;) {
			if (obj) {
				ws(w);
				if ((rc = jstring(w, &v, &vl)) < 0)
					return rc;
				/* the key joins the path (cut if it would not fit) */
				if (base + 1 + vl < plen)
					snprintf(path + base, plen - base, "%s%.*s",
						 base ? "." : "", (int)vl, v);
				ws(w);
				if (w->i >= w->n || w->s[w->i] != ':')
					return PC_EPARSE;
				w->i++;
			}
			rc = jvalue(w, path, plen, depth + 1);
			path[base] = '\0';
			if (rc < 0)
				return rc;
			ws(w);
			if (w->i < w->n && w->s[w->i] == ',') {
				w->i++;
				continue;
			}
			if (w->i < w->n && w->s[w->i] == close) {
				w->i++;
				return 0;
			}
			return PC_EPARSE;
		}
	}
	start = w->i;
	while (w->i < w->n && w->s[w->i] && strchr("0123456789+-.eEtruefalsn", w->s[w->i]))
		w->i++;
	if (w->i == start)
		return PC_EPARSE;
	jfield(w, path, w->s + start, w->i - start, false);
	return 0;
}

int top_health_engine(const char *json, size_t len, struct top_health *h)
{
	struct jwalk w = {.s = json, .n = len, .h = h};
	char path[128] = "";
	int rc;

	h->policy[0] = h->check[0] = '\0';
	h->queued = h->kernel_dropped = h->user_dropped = h->enobufs = 0;
	ws(&w);
	if (w.i >= w.n || json[w.i] != '{')
		return PC_EPARSE;
	if ((rc = jvalue(&w, path, sizeof(path), 0)) < 0)
		return rc;
	ws(&w);
	if (w.i != w.n)
		return PC_EPARSE;
	h->engine_up = true;
	return 0;
}

int top_health_logd(const char *text, size_t len, struct top_health *h)
{
	static const struct {
		const char *name;
		size_t off;
	} rows[] = {
#define F(p, f) {"portcullis_logd_" p, offsetof(struct top_health, f)}
	    F("records_total", logd_records),	  F("write_errors_total", logd_write_errors),
	    F("malformed_total", logd_malformed), F("unsealed_records", logd_unsealed),
	    F("clients", logd_clients),		  F("file_bytes", logd_file_bytes),
#undef F
	};
	const char *p = text, *end = text + len;
	bool any = false;

	h->logd_checkpoint_age = -1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *sp;
		char name[80], num[40];
		size_t nl_len, vl;

		if (*p == '#' || !(sp = memchr(p, ' ', (size_t)(le - p)))) {
			p = le + 1;
			continue;
		}
		nl_len = (size_t)(sp - p);
		vl = (size_t)(le - sp - 1);
		if (nl_len < sizeof(name) && vl && vl < sizeof(num)) {
			memcpy(name, p, nl_len);
			name[nl_len] = '\0';
			memcpy(num, sp + 1, vl);
			num[vl] = '\0';
			any = true;
			if (strcmp(name, "portcullis_logd_last_checkpoint_age_seconds") == 0)
				h->logd_checkpoint_age = strtod(num, NULL);
			for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
				if (strcmp(name, rows[i].name) == 0)
					*(uint64_t *)((char *)h + rows[i].off) =
					    strtoull(num, NULL, 10);
		}
		p = le + 1;
	}
	if (!any)
		return PC_EPARSE;
	h->logd_up = true;
	return 0;
}
