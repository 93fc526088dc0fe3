/* `portcullis top`'s counting, with no I/O and no clock of its own: the
 * verdicts per sandbox per second over a sliding window, the most refused
 * destinations, and the frame they make as text or JSON. The log is read
 * as hostile-ish input (a sandbox chooses the names it looks up): every
 * table has a fixed size, whatever the stream holds. */
#include "cli/cli_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void top_agg_init(struct top_agg *a)
{
	memset(a, 0, sizeof(*a));
}

static void sb_count(struct top_sandbox *s, uint64_t sec, bool allowed, bool in_window)
{
	size_t i = sec % TOP_WINDOW_S;

	if (allowed)
		s->allowed++;
	else
		s->refused++;
	if (sec > s->last_sec)
		s->last_sec = sec;
	if (!in_window)
		return;
	/* in-window seconds differ modulo the window: a slot holding another
	 * second holds one that has left it */
	if (s->sec[i] != sec) {
		s->sec[i] = sec;
		s->win_allowed[i] = s->win_refused[i] = 0;
	}
	if (allowed && s->win_allowed[i] < UINT32_MAX)
		s->win_allowed[i]++;
	else if (!allowed && s->win_refused[i] < UINT32_MAX)
		s->win_refused[i]++;
}

/* The row of name: found, made, an idle one taken over (its totals go to
 * the others' row), or NULL when every row has counted in the window. */
static struct top_sandbox *sb_find(struct top_agg *a, const char *name, uint64_t now_sec)
{
	struct top_sandbox *idle = NULL;

	for (size_t i = 0; i < a->n_sb; i++) {
		if (strcmp(a->sb[i].name, name) == 0)
			return &a->sb[i];
		if (!idle || a->sb[i].last_sec < idle->last_sec)
			idle = &a->sb[i];
	}
	if (a->n_sb < TOP_SANDBOXES_MAX)
		idle = &a->sb[a->n_sb++];
	else if (idle->last_sec + TOP_WINDOW_S > now_sec)
		return NULL;
	else {
		a->others.allowed += idle->allowed;
		a->others.refused += idle->refused;
	}
	memset(idle, 0, sizeof(*idle));
	pc_strlcpy(idle->name, name, sizeof(idle->name));
	return idle;
}

/* Space-Saving (Metwally et al.): a destination not in a full table takes
 * the place of the least counted one, inheriting its count as its error. */
static void dest_count(struct top_agg *a, const char *key, const char *sandbox)
{
	struct top_dest *min = NULL, *d;

	for (size_t i = 0; i < a->n_dest; i++) {
		d = &a->dest[i];
		if (strcmp(d->key, key) == 0) {
			d->count++;
			pc_strlcpy(d->sandbox, sandbox, sizeof(d->sandbox));
			return;
		}
		if (!min || d->count < min->count)
			min = d;
	}
	if (a->n_dest < TOP_DEST_MAX) {
		d = &a->dest[a->n_dest++];
		memset(d, 0, sizeof(*d));
	} else {
		d = min;
		d->error = d->count;
	}
	d->count++;
	pc_strlcpy(d->key, key, sizeof(d->key));
	pc_strlcpy(d->sandbox, sandbox, sizeof(d->sandbox));
}

void top_agg_add(struct top_agg *a, const struct logrec_brief *r, uint64_t now_ms)
{
	uint64_t t = r->time_ms && r->time_ms < now_ms ? r->time_ms : now_ms;
	uint64_t sec = t / 1000, now_sec = now_ms / 1000;
	struct top_sandbox *s;
	char key[TOP_DEST_KEY], full[sizeof(r->verb) + sizeof(r->target) + 2];

	a->records++;
	if (r->seq > a->last_seq)
		a->last_seq = r->seq;
	if (!a->first_ms || t < a->first_ms)
		a->first_ms = t;
	if (r->verdict != LOGREC_ALLOWED && r->verdict != LOGREC_REFUSED)
		return; /* not a decision: learned addresses, policy loads, checks ... */
	a->verdicts++;
	s = sb_find(a, r->sandbox, now_sec);
	sb_count(s ? s : &a->others, sec, r->verdict == LOGREC_ALLOWED,
		 sec + TOP_WINDOW_S > now_sec);
	if (r->verdict != LOGREC_REFUSED)
		return;
	a->refused++;
	snprintf(full, sizeof(full), "%s %s", r->verb, r->target);
	pc_strlcpy(key, full, sizeof(key)); /* cut: the table's keys have a bound */
	dest_count(a, key, r->sandbox);
}

void top_agg_line(struct top_agg *a, const char *line, size_t len, uint64_t now_ms)
{
	struct logrec_brief r;

	a->lines++;
	if (logrec_brief(line, len, &r) < 0) {
		/* a checkpoint is no record; anything else is not understood */
		if (!(len > 14 && memcmp(line, "{\"checkpoint\":", 14) == 0))
			a->not_understood++;
		return;
	}
	top_agg_add(a, &r, now_ms);
}

void top_sandbox_rates(const struct top_sandbox *s, uint64_t now_ms, double *allowed,
		       double *refused)
{
	uint64_t now_sec = now_ms / 1000, na = 0, nr = 0;
	/* the window's whole seconds and the part of the current one */
	double span = (double)(TOP_WINDOW_S - 1) + (double)(now_ms % 1000) / 1000.0;

	for (size_t i = 0; i < TOP_WINDOW_S; i++) {
		if (s->sec[i] > now_sec || s->sec[i] + TOP_WINDOW_S <= now_sec)
			continue;
		na += s->win_allowed[i];
		nr += s->win_refused[i];
	}
	*allowed = (double)na / span;
	*refused = (double)nr / span;
}

struct sb_row {
	const struct top_sandbox *s;
	double allowed, refused;
};

static bool row_before(const struct sb_row *x, const struct sb_row *y, enum top_sort sort)
{
	double kx = sort == TOP_SORT_REFUSED ? x->refused : x->allowed + x->refused;
	double ky = sort == TOP_SORT_REFUSED ? y->refused : y->allowed + y->refused;

	if (sort != TOP_SORT_NAME && kx != ky)
		return kx > ky;
	if (sort != TOP_SORT_NAME && x->s->allowed + x->s->refused != y->s->allowed + y->s->refused)
		return x->s->allowed + x->s->refused > y->s->allowed + y->s->refused;
	return strcmp(x->s->name, y->s->name) < 0;
}

static size_t sb_rows(const struct top_agg *a, enum top_sort sort, uint64_t now_ms,
		      struct sb_row *rows)
{
	size_t n = 0;

	for (size_t i = 0; i <= a->n_sb; i++) {
		const struct top_sandbox *s = i < a->n_sb ? &a->sb[i] : &a->others;
		struct sb_row r = {.s = s};
		size_t j;

		if (!s->allowed && !s->refused)
			continue;
		top_sandbox_rates(s, now_ms, &r.allowed, &r.refused);
		/* insertion: at most TOP_SANDBOXES_MAX + 1 rows */
		for (j = n; j > 0 && row_before(&r, &rows[j - 1], sort); j--)
			rows[j] = rows[j - 1];
		rows[j] = r;
		n++;
	}
	return n;
}

size_t top_agg_sandboxes(const struct top_agg *a, enum top_sort sort, uint64_t now_ms,
			 const struct top_sandbox **out, size_t max)
{
	struct sb_row rows[TOP_SANDBOXES_MAX + 1];
	size_t n = sb_rows(a, sort, now_ms, rows);

	for (size_t i = 0; i < n && i < max; i++)
		out[i] = rows[i].s;
	return n < max ? n : max;
}

size_t top_agg_dests(const struct top_agg *a, const struct top_dest **out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < a->n_dest; i++) {
		const struct top_dest *d = &a->dest[i];
		size_t j;

		if (n == max && (!max || d->count <= out[n - 1]->count))
			continue;
		if (n < max)
			n++;
		for (j = n - 1; j > 0 && (out[j - 1]->count < d->count ||
					  (out[j - 1]->count == d->count &&
					   strcmp(out[j - 1]->key, d->key) > 0));
		     j--)
			out[j] = out[j - 1];
		out[j] = d;
	}
	return n;
}

/* ---- the frame ---------------------------------------------------------- */

/* One line, cut at width columns (the text is display text: one byte, one
 * column). */
static void line_put(struct pc_buf *out, size_t width, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void line_put(struct pc_buf *out, size_t width, const char *fmt, ...)
{
	char l[1024];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(l, sizeof(l), fmt, ap);
	va_end(ap);
	n = strlen(l);
	if (width && n > width)
		n = width;
	while (n && l[n - 1] == ' ')
		n--;
	pc_buf_put(out, l, n);
	pc_buf_putc(out, '\n');
}

static const char *sort_name[TOP_SORT_N] = {"total", "refused", "name"};

static const char *age_text(uint64_t s, char *buf, size_t len)
{
	if (s < 3600)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	return buf;
}

/* Per second since prev, of a counter; 0 without a previous sample. */
static double per_s(uint64_t now_v, uint64_t prev_v, const struct top_health *h,
		    const struct top_health *prev)
{
	if (!prev || h->at_ms <= prev->at_ms || now_v < prev_v)
		return 0;
	return (double)(now_v - prev_v) * 1000.0 / (double)(h->at_ms - prev->at_ms);
}

void top_render(struct pc_buf *out, const struct top_agg *a, const struct top_health *h,
		const struct top_health *prev, enum top_sort sort, uint64_t now_ms, size_t width,
		size_t rows)
{
	struct sb_row sbr[TOP_SANDBOXES_MAX + 1];
	const struct top_dest *d[TOP_DEST_MAX];
	size_t n_sb = sb_rows(a, sort, now_ms, sbr), max_sb = n_sb, max_d = 10, n_d;
	char ts[40], since[40], up[24];
	const struct top_health *p = prev && prev->engine_up && h->engine_up ? prev : NULL;

	if (rows) {
		/* 12 lines of headings and health; sandboxes first, then destinations */
		size_t room = rows > 12 ? rows - 12 : 2;

		max_d = room / 2 > 1 ? room / 2 : 1;
		if (max_sb > room - max_d)
			max_sb = room - max_d;
		if (n_sb < max_sb)
			max_d = room - n_sb;
	}
	n_d = top_agg_dests(a, d, max_d < TOP_DEST_MAX ? max_d : TOP_DEST_MAX);
	pc_time_rfc3339(now_ms, ts, sizeof(ts));
	if (h->engine_up)
		line_put(out, width,
			 "portcullis top  %.8sZ  engine up %s  policy %.23s  check %s%s", ts + 11,
			 age_text(h->uptime_s, up, sizeof(up)), h->policy, h->check,
			 h->check_findings ? " (findings)" : "");
	else
		line_put(out, width, "portcullis top  %.8sZ  engine: not answering: %s", ts + 11,
			 h->engine_error);
	line_put(out, width, "%s", "");
	line_put(out, width, "%-32s %10s %10s %12s %12s   (last %d s, sorted by %s)", "SANDBOX",
		 "ALLOWED/s", "REFUSED/s", "ALLOWED", "REFUSED", TOP_WINDOW_S, sort_name[sort]);
	for (size_t i = 0; i < n_sb && i < max_sb; i++) {
		const struct top_sandbox *s = sbr[i].s;

		line_put(out, width, "%-32.32s %10.1f %10.1f %12llu %12llu",
			 s == &a->others ? "(other sandboxes)"
			 : s->name[0]	 ? s->name
					 : "(no sandbox)",
			 sbr[i].allowed, sbr[i].refused, (unsigned long long)s->allowed,
			 (unsigned long long)s->refused);
	}
	if (n_sb > max_sb)
		line_put(out, width, "  ... %zu more", n_sb - max_sb);
	if (!n_sb)
		line_put(out, width, "  (no verdict read yet)");
	line_put(out, width, "%s", "");
	pc_time_rfc3339(a->first_ms ? a->first_ms : now_ms, since, sizeof(since));
	line_put(out, width, "%-8s %-60s %s   (since %.8sZ)", "REFUSED", "DESTINATION",
		 "LAST SANDBOX", since + 11);
	for (size_t i = 0; i < n_d; i++)
		/* "~": the count may include up to error refusals of others */
		line_put(out, width, "%7llu%s %-60.60s %s", (unsigned long long)d[i]->count,
			 d[i]->error ? "~" : " ", d[i]->key, d[i]->sandbox);
	if (!n_d)
		line_put(out, width, "  (none)");
	line_put(out, width, "%s", "");
	if (h->engine_up) {
		char kd[48] = "", ud[48] = "";

		/* a rate needs two samples: none in a single frame */
		if (p) {
			snprintf(kd, sizeof(kd), " (%.1f/s)",
				 per_s(h->kernel_dropped, p->kernel_dropped, h, p));
			snprintf(ud, sizeof(ud), " (%.1f/s)",
				 per_s(h->user_dropped, p->user_dropped, h, p));
		}
		line_put(out, width,
			 "queue   flows %llu  held %llu  queued %llu  kernel drops %llu%s  "
			 "user drops %llu%s  enobufs %llu",
			 (unsigned long long)h->flows, (unsigned long long)h->held,
			 (unsigned long long)h->queued, (unsigned long long)h->kernel_dropped, kd,
			 (unsigned long long)h->user_dropped, ud, (unsigned long long)h->enobufs);
		line_put(out, width, "engine  records sent %llu  not taken by logd %llu",
			 (unsigned long long)h->log_sent, (unsigned long long)h->log_failed);
	} else {
		line_put(out, width, "queue   unknown (engine not answering)");
		line_put(out, width, "engine  -");
	}
	if (h->logd_up) {
		char cp[40] = "none yet";

		if (h->logd_checkpoint_age >= 0)
			snprintf(cp, sizeof(cp), "%.1f s ago", h->logd_checkpoint_age);
		line_put(
		    out, width,
		    "log     records %llu  write errors %llu  malformed %llu  unsealed %llu  "
		    "checkpoint %s  clients %llu",
		    (unsigned long long)h->logd_records, (unsigned long long)h->logd_write_errors,
		    (unsigned long long)h->logd_malformed, (unsigned long long)h->logd_unsealed, cp,
		    (unsigned long long)h->logd_clients);
	} else {
		line_put(out, width, "log     logd not answering: %s", h->logd_error);
	}
	line_put(out, width, "read    %llu records, %llu verdicts, %llu lines not understood",
		 (unsigned long long)a->records, (unsigned long long)a->verdicts,
		 (unsigned long long)a->not_understood);
}

static void json_f(struct pc_json *j, const char *key, double v)
{
	char n[40];

	snprintf(n, sizeof(n), "%.2f", v);
	pc_json_key(j, key);
	pc_json_raw(j, n);
}

void top_render_json(struct pc_buf *out, const struct top_agg *a, const struct top_health *h,
		     uint64_t now_ms)
{
	struct sb_row sbr[TOP_SANDBOXES_MAX + 1];
	const struct top_dest *d[TOP_DEST_MAX];
	size_t n_sb = sb_rows(a, TOP_SORT_TOTAL, now_ms, sbr);
	size_t n_d = top_agg_dests(a, d, TOP_DEST_MAX);
	struct pc_json j;
	char ts[40];

	pc_json_init(&j, out);
	pc_json_obj(&j);
	pc_json_kstr(&j, "time", pc_time_rfc3339(now_ms, ts, sizeof(ts)));
	pc_json_ku64(&j, "window_s", TOP_WINDOW_S);
	pc_json_key(&j, "sandboxes");
	pc_json_arr(&j);
	for (size_t i = 0; i < n_sb; i++) {
		pc_json_obj(&j);
		pc_json_kstr(&j, "name", sbr[i].s->name);
		pc_json_key(&j, "others");
		pc_json_bool(&j, sbr[i].s == &a->others);
		json_f(&j, "allowed_per_s", sbr[i].allowed);
		json_f(&j, "refused_per_s", sbr[i].refused);
		pc_json_ku64(&j, "allowed", sbr[i].s->allowed);
		pc_json_ku64(&j, "refused", sbr[i].s->refused);
		pc_json_obj_end(&j);
	}
	pc_json_arr_end(&j);
	pc_json_kstr(&j, "refused_since", pc_time_rfc3339(a->first_ms, ts, sizeof(ts)));
	pc_json_key(&j, "refused_destinations");
	pc_json_arr(&j);
	for (size_t i = 0; i < n_d; i++) {
		pc_json_obj(&j);
		pc_json_kstr(&j, "destination", d[i]->key);
		pc_json_ku64(&j, "count", d[i]->count);
		pc_json_ku64(&j, "error", d[i]->error);
		pc_json_kstr(&j, "sandbox", d[i]->sandbox);
		pc_json_obj_end(&j);
	}
	pc_json_arr_end(&j);
	pc_json_key(&j, "engine");
	pc_json_obj(&j);
	pc_json_key(&j, "up");
	pc_json_bool(&j, h->engine_up);
	if (!h->engine_up) {
		pc_json_kstr(&j, "error", h->engine_error);
	} else {
		pc_json_kstr(&j, "policy", h->policy);
		pc_json_kstr(&j, "check", h->check);
		pc_json_ku64(&j, "flows", h->flows);
		pc_json_ku64(&j, "held", h->held);
		pc_json_ku64(&j, "queued", h->queued);
		pc_json_ku64(&j, "kernel_dropped", h->kernel_dropped);
		pc_json_ku64(&j, "user_dropped", h->user_dropped);
		pc_json_ku64(&j, "enobufs", h->enobufs);
		pc_json_ku64(&j, "log_sent", h->log_sent);
		pc_json_ku64(&j, "log_failed", h->log_failed);
	}
	pc_json_obj_end(&j);
	pc_json_key(&j, "logd");
	pc_json_obj(&j);
	pc_json_key(&j, "up");
	pc_json_bool(&j, h->logd_up);
	if (!h->logd_up) {
		pc_json_kstr(&j, "error", h->logd_error);
	} else {
		pc_json_ku64(&j, "records", h->logd_records);
		pc_json_ku64(&j, "write_errors", h->logd_write_errors);
		pc_json_ku64(&j, "malformed", h->logd_malformed);
		pc_json_ku64(&j, "unsealed", h->logd_unsealed);
		pc_json_ku64(&j, "clients", h->logd_clients);
		if (h->logd_checkpoint_age >= 0)
			json_f(&j, "checkpoint_age_s", h->logd_checkpoint_age);
	}
	pc_json_obj_end(&j);
	pc_json_key(&j, "read");
	pc_json_obj(&j);
	pc_json_ku64(&j, "records", a->records);
	pc_json_ku64(&j, "verdicts", a->verdicts);
	pc_json_ku64(&j, "not_understood", a->not_understood);
	pc_json_obj_end(&j);
	pc_json_obj_end(&j);
}
