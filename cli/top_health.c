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

/* A number, a boolean or a string at a path the view or the status
 * summary shows. */
static void jfield(struct jwalk *w, const char *path, const char *v, size_t vl, bool str)
{
	struct top_health *h = w->h;
	enum { SET, SUM, COUNT }; /* the value; added up over an array; its items counted */
	static const struct {
		const char *path;
		size_t off;
		int how;
	} nums[] = {
#define F(p, f, s) {p, offsetof(struct top_health, f), s}
	    F("uptime_s", uptime_s, SET),
	    F("flows", flows, SET),
	    F("held", held, SET),
	    F("queues.queued", queued, SUM),
	    F("queues.kernel_dropped", kernel_dropped, SUM),
	    F("queues.user_dropped", user_dropped, SUM),
	    F("queues.enobufs", enobufs, SUM),
	    F("log.sent", log_sent, SET),
	    F("log.failed", log_failed, SET),
	    F("check.findings", check_findings, SET),
	    F("pid", st.pid, SET),
	    F("queues.num", st.queues, COUNT),
	    F("queues.accepted", st.accepted, SUM),
	    F("queues.refused", st.refused, SUM),
	    F("dnsguard.queries_allowed", st.dns_allowed, SET),
	    F("dnsguard.queries_refused", st.dns_refused, SET),
	    F("dnsguard.queries_malformed", st.dns_malformed, SET),
	    F("dnsguard.learned_entries", st.learned, SET),
	    F("dnsguard.learned_evicted", st.evicted, SET),
	    F("check.runs", st.check_runs, SET),
	    F("cutoff.count", st.cutoff_count, SET),
	    F("cutoff.ports_down", st.cutoff_ports_down, SET),
	    F("limits.sandbox", st.limits, COUNT),
	    F("limits.dropped", st.limit_dropped, SUM),
	    F("quotas.sandboxes.held_flows_refused", st.quota_held_refused, SUM),
	    F("quotas.sandboxes.dns_tcp_streams_refused", st.quota_dnstcp_refused, SUM),
	    F("rules.rule", st.rules_hit, COUNT),
	    F("rules.hits", st.rule_hits, SUM),
#undef F
	};
	static const struct {
		const char *path;
		size_t off, len;
	} strs[] = {
#define S(p, f) {p, offsetof(struct top_health, f), sizeof(((struct top_health *)0)->f)}
	    S("policy", policy),
	    S("check.result", check),
	    S("version", st.version),
	    S("queue_path", st.queue_path),
	    S("check.time", st.check_time),
	    S("check.trigger", st.check_trigger),
	    S("check.first", st.check_first),
	    S("cutoff.since", st.cutoff_since),
	    S("cutoff.after", st.cutoff_after),
#undef S
	};
	char text[200];
	size_t n = 0;

	/* display text: no escape decoded, nothing that moves a cursor */
	for (size_t i = 0; i < vl && n + 1 < sizeof(text); i++)
		text[n++] = (unsigned char)v[i] < 0x20 || v[i] == 0x7f || v[i] == '\\' ? '?' : v[i];
	text[n] = '\0';
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		uint64_t *dst = (uint64_t *)((char *)h + nums[i].off);
		uint64_t x;

		if (!path_is(path, nums[i].path))
			continue;
		if (nums[i].how == COUNT) {
			(*dst)++;
			return;
		}
		if (str || text[0] < '0' || text[0] > '9')
			return;
		x = strtoull(text, NULL, 10);
		*dst = nums[i].how == SUM ? *dst + x : x;
		return;
	}
	if (str) {
		for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
			if (path_is(path, strs[i].path))
				pc_strlcpy((char *)h + strs[i].off, text, strs[i].len);
		return;
	}
	if (path_is(path, "check.running"))
		h->st.check_running = strcmp(text, "true") == 0;
	else if (path_is(path, "cutoff.active"))
		h->st.cutoff_active = strcmp(text, "true") == 0;
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
	memset(&h->st, 0, sizeof(h->st));
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
