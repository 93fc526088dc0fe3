/* The new-flow limit's drops in the signed log. The kernel drops what a
 * sandbox sends over its new-flow limit before the queue (docs/engine.md,
 * "New-flow limit"), so the engine never sees those packets and writes no
 * verdict record for each (a flood would flood the log). Their account is
 * kept here instead: the control thread reads the limit rules' counters
 * every housekeeping round and before the tables are replaced, and writes
 * one refused connect record per sandbox whose count grew — how many, over
 * what time — so the log, not only the metrics, says that a sandbox's flows
 * were refused and how many. */
#include "engine/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logd/logd.h"
#include "nft/nft.h"

#define LIMITLOG_WAIT_MS 2000 /* logd's acknowledgement of one summary */

static void summary_record(const struct policy *pol, size_t k, uint64_t n, uint64_t secs,
			   struct logrec *r, char *msg, size_t msg_len)
{
	const struct policy_sandbox *sb = policy_sandbox_at(pol, k);

	memset(r, 0, sizeof(*r));
	r->action = LOGREC_CONNECT;
	r->verdict = LOGREC_REFUSED;
	r->sandbox = sb->name;
	r->policy = policy_hash(pol);
	r->reason = "over the sandbox's new-flow limit: dropped by the kernel before the queue";
	snprintf(msg, msg_len,
		 "%llu packets (new flows, and segments of held flows and DNS over TCP) over "
		 "the limit of %u new flows/s, burst %u, dropped in the last %llu s; each "
		 "refused, none judged or recorded one by one",
		 (unsigned long long)n, sb->new_flows_per_second, sb->new_flows_burst,
		 (unsigned long long)secs);
	r->message = msg;
}

void limitlog_tick(struct engine *e)
{
	struct engine_limitlog *l = &e->limlog;
	struct policy *pol = engine_policy_get(e);
	size_t n = pol ? policy_sandbox_count(pol) : 0, sent = 0;
	bool failed = false;
	uint64_t *now = NULL, secs, t = pc_now_mono_ms();
	struct pc_err err = {0};
	struct logrec r;
	char msg[400];

	/* no baseline yet (before the first install), or the tables in force
	 * are not this policy's (cannot be: a reload installs, then swaps) */
	if (!pol || !l->logged || l->n != n || !e->ctl_lc || n == 0)
		goto out;
	now = calloc(n, sizeof(*now));
	if (!now || nft_limit_drops(pol, now, n, &err) < 0)
		goto out; /* no numbers this time: they are logged at the next */
	secs = (t - l->since_ms + 500) / 1000;
	for (size_t k = 0; k < n; k++) {
		/* fewer than logged: the counters restarted (tables replaced
		 * without tables_new: another program's doing); count from 0 */
		uint64_t d = now[k] >= l->logged[k] ? now[k] - l->logged[k] : now[k];

		if (d == 0)
			continue;
		summary_record(pol, k, d, secs, &r, msg, sizeof(msg));
		if (logc_send(e->ctl_lc, &r, &err) < 0) {
			failed = true;
			break;
		}
		sent++;
	}
	if (sent == 0 || logc_flush(e->ctl_lc, LIMITLOG_WAIT_MS, &err) < 0 || failed) {
		if (sent || failed)
			pc_log(PC_LOG_WARN,
			       "new-flow limit summary not logged (kept for the next): %s",
			       err.msg);
		goto out;
	}
	/* only what logd acknowledged counts as logged: a summary that did not
	 * reach the file is written again, with what came since, next time */
	memcpy(l->logged, now, n * sizeof(*now));
	l->since_ms = t;
out:
	free(now);
	policy_unref(pol);
}

void limitlog_tables_new(struct engine *e, const struct policy *pol)
{
	struct engine_limitlog *l = &e->limlog;
	size_t n = pol ? policy_sandbox_count(pol) : 0;
	uint64_t *z = calloc(n ? n : 1, sizeof(*z));

	if (!z)
		return; /* keep the old baseline: tick sees a mismatch and waits */
	free(l->logged);
	l->logged = z;
	l->n = n;
	l->since_ms = pc_now_mono_ms();
}

void limitlog_free(struct engine *e)
{
	free(e->limlog.logged);
	e->limlog.logged = NULL;
	e->limlog.n = 0;
}
