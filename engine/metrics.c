/* The engine's metrics in Prometheus text format (`metrics` on engine.sock):
 * verdicts by outcome and reason, queue counters and drops, flows, the DNS
 * guard's counters, log records, the containment check. The reasons of the
 * records are free text; their event.code is the label. */
#include "engine/engine_int.h"
#include "checker/checker.h"

#include <stdio.h>
#include <string.h>

/* The reason label is the record's event.code (logd/reason.c: one table
 * for records and metrics), plus "unrecorded": decided allowed, then
 * refused because logd did not take the record (or the flow could not be
 * registered) — no record, no connection. */
#define REASON_UNRECORDED (MET_REASONS - 1)
_Static_assert(LOGREC_REASON_CODES <= REASON_UNRECORDED, "MET_REASONS too small for the codes");

static const char *reason_label(int i)
{
	return i == REASON_UNRECORDED ? "unrecorded" : logrec_reason_code_at(i);
}

int metrics_reason(const char *reason)
{
	return logrec_reason_index(reason);
}

const char *metrics_reason_label(const char *reason)
{
	return reason_label(metrics_reason(reason));
}

void metrics_count_verdict(struct qthread *t, const struct decision *d)
{
	bool refused, decided_allowed;
	int a, r;

	if (d->rec.action == LOGREC_CONNECT)
		a = 0;
	else if (d->rec.action == LOGREC_DNS_QUERY)
		a = 1;
	else
		return;
	if (d->rec.verdict != LOGREC_ALLOWED && d->rec.verdict != LOGREC_REFUSED)
		return;
	decided_allowed = d->rec.verdict == LOGREC_ALLOWED;
	refused = d->v == VK_DROP || d->v == VK_REJECT;
	r = decided_allowed && refused ? REASON_UNRECORDED : logrec_event_code_index(&d->rec);
	atomic_fetch_add(&t->st.verdicts[a][refused ? 1 : 0][r], 1);
}

/* ---- the text ------------------------------------------------------------- */

static void queue_family(struct pc_prom *b, struct engine *e, const char *name, const char *help,
			 int which)
{
	pc_prom_family(b, name, "counter", help);
	for (size_t i = 0; i < e->nq; i++) {
		struct qthread *t = &e->q[i];
		uint64_t v = 0, kd = 0, ud = 0;
		char l[32];

		switch (which) {
		case 0:
			v = atomic_load(&t->st.queued);
			break;
		case 1:
		case 2:
			queue_kernel_stats(e->nfq_proc_fd, t->num, &kd, &ud);
			v = which == 1 ? kd : ud;
			break;
		default:
			v = atomic_load(&t->st.enobufs);
			break;
		}
		snprintf(l, sizeof(l), "queue=\"%u\"", t->num);
		pc_prom_u64(b, name, l, v);
	}
}

static void verdicts(struct pc_prom *b, struct engine *e)
{
	static const char *actions[2] = {"connect", "dns-query"};
	static const char *outcomes[2] = {"allowed", "refused"};

	pc_prom_family(b, "portcullis_engine_verdicts_total", "counter",
		       "Flows and DNS queries judged, by action, outcome and reason (a reason "
		       "appears once it has been counted).");
	for (int a = 0; a < 2; a++)
		for (int o = 0; o < 2; o++)
			for (int r = 0; r < MET_REASONS; r++) {
				uint64_t v = 0;
				char l[128];

				for (size_t i = 0; i < e->nq; i++)
					v += atomic_load(&e->q[i].st.verdicts[a][o][r]);
				if (!v)
					continue;
				snprintf(l, sizeof(l), "action=\"%s\",outcome=\"%s\",reason=\"%s\"",
					 actions[a], outcomes[o], reason_label(r));
				pc_prom_u64(b, "portcullis_engine_verdicts_total", l, v);
			}
	pc_prom_family(b, "portcullis_engine_packets_total", "counter",
		       "Queued packets given a verdict, by verdict.");
	{
		uint64_t acc = 0, ref = 0;

		for (size_t i = 0; i < e->nq; i++) {
			acc += atomic_load(&e->q[i].st.accepted);
			ref += atomic_load(&e->q[i].st.refused);
		}
		pc_prom_u64(b, "portcullis_engine_packets_total", "verdict=\"accepted\"", acc);
		pc_prom_u64(b, "portcullis_engine_packets_total", "verdict=\"refused\"", ref);
	}
}

#define DG(f) offsetof(struct dnsguard_stats, f)
static const struct pc_prom_row dnsguard_rows[] = {
    {"portcullis_dnsguard_queries_total", "counter",
     "DNS queries judged by the DNS guard, by outcome.", "outcome=\"allowed\"",
     DG(queries_allowed)},
    {"portcullis_dnsguard_queries_total", NULL, NULL, "outcome=\"refused\"", DG(queries_refused)},
    {"portcullis_dnsguard_queries_total", NULL, NULL, "outcome=\"malformed\"",
     DG(queries_malformed)},
    {"portcullis_dnsguard_answers_total", "counter",
     "DNS answers from the resolvers, by what happened to them.", "outcome=\"released\"",
     DG(answers_released)},
    {"portcullis_dnsguard_answers_total", NULL, NULL, "outcome=\"dropped\"", DG(answers_dropped)},
    {"portcullis_dnsguard_learned_entries", "gauge",
     "Addresses learned from answers for allowed names, now.", NULL, DG(learned_entries)},
    {"portcullis_dnsguard_learned_evicted_total", "counter",
     "Learned addresses forgotten before their time because of the caps.", NULL,
     DG(learned_evicted)},
    {"portcullis_dnsguard_pending_queries", "gauge", "Allowed queries awaiting their answer, now.",
     NULL, DG(pending_queries)},
    {"portcullis_dnsguard_pending_evicted_total", "counter",
     "Allowed queries forgotten because their sandbox had too many outstanding.", NULL,
     DG(pending_evicted)},
    {"portcullis_dnsguard_ech_stripped_total", "counter",
     "Answers whose ECH configuration was removed.", NULL, DG(ech_stripped)},
};
#undef DG

static void dnsguard(struct pc_prom *b, struct engine *e)
{
	struct dnsguard_stats ds;

	memset(&ds, 0, sizeof(ds));
	dnsguard_stats(e->dg, &ds);
	pc_prom_rows(b, dnsguard_rows, sizeof(dnsguard_rows) / sizeof(dnsguard_rows[0]), &ds,
		     false);
}

static void check(struct pc_prom *b, struct engine *e)
{
	static const int results[] = {CHECKER_PROVEN, CHECKER_EXIT_FOUND, CHECKER_UNPROVEN,
				      CHECKRUN_ERROR};
	static const char *labels[] = {"proven", "exit_found", "unproven", "error"};

	pc_prom_family(b, "portcullis_engine_check_result", "gauge",
		       "The engine's last containment check: 1 for its result, 0 for the "
		       "others (none before the first).");
	for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++) {
		char l[48];

		snprintf(l, sizeof(l), "result=\"%s\"", labels[i]);
		pc_prom_u64(b, "portcullis_engine_check_result", l, e->chk.result == results[i]);
	}
	pc_prom_one_u64(b, "portcullis_engine_check_findings", "gauge",
			"Findings (exits and doubts) of the last containment check.",
			e->chk.findings);
	pc_prom_one_u64(b, "portcullis_engine_checks_total", "counter",
			"Containment checks the engine finished.", e->chk.runs);
	/* the guard taken away by another program and put back (issue 18) */
	pc_prom_family(b, "portcullis_engine_guard_reinstalls_total", "counter",
		       "Times another program removed or changed the engine's nftables tables "
		       "(what=tables) or routing rules (what=routing) and the engine put them "
		       "back (outcome=ok) or failed to (failed: sandbox traffic stays "
		       "blackholed).");
	pc_prom_u64(b, "portcullis_engine_guard_reinstalls_total", "what=\"tables\",outcome=\"ok\"",
		    e->guard.tables_ok);
	pc_prom_u64(b, "portcullis_engine_guard_reinstalls_total",
		    "what=\"tables\",outcome=\"failed\"", e->guard.tables_failed);
	pc_prom_u64(b, "portcullis_engine_guard_reinstalls_total",
		    "what=\"routing\",outcome=\"ok\"", e->guard.routing_ok);
	pc_prom_u64(b, "portcullis_engine_guard_reinstalls_total",
		    "what=\"routing\",outcome=\"failed\"", e->guard.routing_failed);
	pc_prom_one_u64(b, "portcullis_engine_foreign_nftables_changes_total", "counter",
			"nftables changes by other programs to other tables, each followed by a "
			"containment check.",
			e->guard.other);
	cutoff_metrics(b, e);
	if (e->chk.runs) {
		pc_prom_one_f64(b, "portcullis_engine_check_timestamp_seconds", "gauge",
				"When the last containment check read the state (Unix time).",
				(double)e->chk.time_ms / 1000.0);
	}
}

int engine_metrics_text(struct engine *e, char **out)
{
	struct pc_prom b = {0};
	struct policy *pol = engine_policy_get(e);
	uint64_t sent = 0, failed = 0;
	size_t held = 0;
	char l[160], h[128];
	char *text;

	pc_prom_family(&b, "portcullis_engine_info", "gauge",
		       "The engine: version, queue path and the policy in force (always 1).");
	snprintf(l, sizeof(l), "version=\"%s\",queue_path=\"%s\",policy=\"%s\"", PC_VERSION,
		 nft_queue_path_name(e->qpath),
		 pc_prom_label(pol ? policy_hash(pol) : "", h, sizeof(h)));
	pc_prom_u64(&b, "portcullis_engine_info", l, 1);
	limits_metrics(&b, pol);
	{
		struct rulehits *rh = engine_hits_get(e);

		rulehits_metrics(&b, rh);
		rulehits_unref(rh);
	}
	quota_metrics(&b, &e->quota, pol);
	policy_unref(pol);
	pc_prom_one_f64(&b, "portcullis_engine_uptime_seconds", "gauge",
			"Seconds since the engine started.",
			(double)(pc_now_mono_ms() - e->start_ms) / 1000.0);
	verdicts(&b, e);
	queue_family(&b, e, "portcullis_engine_queue_packets_total", "Packets the queue delivered.",
		     0);
	queue_family(&b, e, "portcullis_engine_queue_kernel_dropped_total",
		     "Packets the kernel dropped: the queue was full (queue.maxlen).", 1);
	queue_family(&b, e, "portcullis_engine_queue_user_dropped_total",
		     "Packets the kernel dropped: it could not deliver them to the engine.", 2);
	queue_family(&b, e, "portcullis_engine_queue_enobufs_total",
		     "Times the engine's queue socket overflowed (ENOBUFS).", 3);
	for (size_t i = 0; i < e->nq; i++) {
		held += atomic_load(&e->q[i].held_n);
		sent += atomic_load(&e->q[i].st.log_sent);
		failed += atomic_load(&e->q[i].st.log_failed);
	}
	pc_prom_one_u64(&b, "portcullis_engine_flows", "gauge",
			"Allowed flows the engine remembers, now.", flow_registry_count(e->flows));
	pc_prom_one_u64(&b, "portcullis_engine_held_flows", "gauge",
			"TCP flows waiting for their TLS ClientHello, now.", held);
	pc_prom_family(&b, "portcullis_engine_log_records_total", "counter",
		       "Verdict records handed to logd, by outcome (failed: its action was "
		       "refused).");
	pc_prom_u64(&b, "portcullis_engine_log_records_total", "outcome=\"sent\"", sent);
	pc_prom_u64(&b, "portcullis_engine_log_records_total", "outcome=\"failed\"", failed);
	dnsguard(&b, e);
	check(&b, e);
	pc_prom_process(&b);
	text = pc_prom_take(&b);
	if (!text)
		return PC_ENOMEM;
	*out = text;
	return 0;
}
