/* logd's metrics in Prometheus text format: the reply to "metrics" on
 * <run_dir>/logd-control.sock, from what the server thread publishes after
 * each round (docs/operations.md, "Metrics"). */
#include "logd/logd_int.h"

#include <stdlib.h>
#include <string.h>

char *logd_metrics(void *ctx, const char *req)
{
	struct logd_live *l = ctx;
	struct pc_prom b = {0};
	uint64_t cp = atomic_load(&l->last_cp_ms), now = pc_now_real_ms();

	if (strcmp(req, "metrics") != 0)
		return strdup("unknown request (metrics)\n");
	pc_prom_one_u64(&b, "portcullis_logd_records_total", "counter",
			"Records written to the log and acknowledged to their sender.",
			atomic_load(&l->records));
	pc_prom_one_u64(&b, "portcullis_logd_malformed_total", "counter",
			"Malformed messages rejected (each ended its sender's session).",
			atomic_load(&l->malformed));
	pc_prom_one_u64(&b, "portcullis_logd_refused_connections_total", "counter",
			"Connections refused: not root, the engine's or the vault's user.",
			atomic_load(&l->refused));
	pc_prom_one_u64(&b, "portcullis_logd_write_errors_total", "counter",
			"Batches that could not be written (their records were not "
			"acknowledged, so their actions were refused).",
			atomic_load(&l->write_errors));
	pc_prom_one_u64(&b, "portcullis_logd_clients", "gauge", "Connected clients, now.",
			atomic_load(&l->clients));
	pc_prom_one_u64(&b, "portcullis_logd_next_seq", "gauge",
			"The sequence number the next record will get.", atomic_load(&l->next_seq));
	pc_prom_one_u64(&b, "portcullis_logd_tree_size", "gauge",
			"Records in the current log file's Merkle tree.",
			atomic_load(&l->tree_size));
	pc_prom_one_u64(&b, "portcullis_logd_unsealed_records", "gauge",
			"Records not yet covered by a signed checkpoint.",
			atomic_load(&l->unsealed));
	pc_prom_one_u64(&b, "portcullis_logd_file_bytes", "gauge", "Size of the current log file.",
			atomic_load(&l->file_bytes));
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
	return pc_prom_take(&b);
}
