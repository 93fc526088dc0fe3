/* logd's metrics in Prometheus text format: the reply to "metrics" on
 * <run_dir>/logd-control.sock, from what the server thread publishes after
 * each round (docs/operations.md, "Metrics"). */
#include "logd/logd_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define L(f) offsetof(struct logd_live, f)
static const struct pc_prom_row live_rows[] = {
    {"portcullis_logd_records_total", "counter",
     "Records written to the log and acknowledged to their sender.", NULL, L(records)},
    {"portcullis_logd_malformed_total", "counter",
     "Malformed messages rejected (each ended its sender's session).", NULL, L(malformed)},
    {"portcullis_logd_refused_connections_total", "counter",
     "Connections refused: not root, the engine's or the vault's user.", NULL, L(refused)},
    {"portcullis_logd_write_errors_total", "counter",
     "Batches that could not be written (their records were not acknowledged, so their "
     "actions were refused).",
     NULL, L(write_errors)},
    {"portcullis_logd_clients", "gauge", "Connected clients, now.", NULL, L(clients)},
    {"portcullis_logd_next_seq", "gauge", "The sequence number the next record will get.", NULL,
     L(next_seq)},
    {"portcullis_logd_tree_size", "gauge", "Records in the current log file's Merkle tree.", NULL,
     L(tree_size)},
    {"portcullis_logd_unsealed_records", "gauge", "Records not yet covered by a signed checkpoint.",
     NULL, L(unsealed)},
    {"portcullis_logd_file_bytes", "gauge", "Size of the current log file.", NULL, L(file_bytes)},
    {"portcullis_logd_rotate_failures_total", "counter",
     "Rotations that failed (retried a second later; the records written before stand and "
     "were acknowledged).",
     NULL, L(rotate_failures)},
    {"portcullis_logd_pledges_held", "gauge",
     "DNS query records the engine pledged and has not redeemed, held (docs/logd.md, "
     "\"Pledges\").",
     NULL, L(pledges_held)},
    {"portcullis_logd_pledges_written_total", "counter",
     "Pledged records logd wrote itself: their engine ended first, or it held too many.", NULL,
     L(pledges_written)},
};
#undef L

char *logd_metrics(void *ctx, const char *req)
{
	struct logd_live *l = ctx;
	struct pc_prom b = {0};
	uint64_t cp = atomic_load(&l->last_cp_ms), now = pc_now_real_ms();

	if (strcmp(req, "metrics") != 0)
		return strdup("unknown request (metrics)\n");
	pc_prom_rows(&b, live_rows, sizeof(live_rows) / sizeof(live_rows[0]), l, true);
	pc_prom_one_u64(&b, "portcullis_logd_refused_records_total", "counter",
			"Records refused because their sender may not write that kind (each "
			"ended its sender's session; docs/logd.md, \"Who may write\").",
			atomic_load(&l->refused_records));
	pc_prom_one_u64(&b, "portcullis_logd_sidecar_write_errors_total", "counter",
			"Checkpoint sidecar writes that failed (the sidecar is stale until one "
			"succeeds; the journal says which file and why).",
			logd_sidecar_errors());
	pc_prom_one_f64(&b, "portcullis_logd_start_time_seconds", "gauge",
			"When logd started serving (Unix time).",
			(double)atomic_load(&l->start_ms) / 1000.0);
	if (cp) {
		pc_prom_one_f64(&b, "portcullis_logd_last_checkpoint_timestamp_seconds", "gauge",
				"When logd signed its last checkpoint (Unix time).",
				(double)cp / 1000.0);
		pc_prom_one_f64(&b, "portcullis_logd_last_checkpoint_age_seconds", "gauge",
				"Seconds since logd signed its last checkpoint (while idle it "
				"re-signs one every log.checkpoint.interval_ms).",
				now > cp ? (double)(now - cp) / 1000.0 : 0.0);
	}
	pc_prom_process(&b); /* process_* (issue 18) */
	return pc_prom_take(&b);
}
