/* What goes wrong beside the log itself and must not pass in silence: a
 * checkpoint sidecar that could not be written is counted for the metrics
 * (portcullis_logd_sidecar_write_errors_total) and said in the journal with
 * the file and the reason, at most once a minute while it keeps failing. */
#include "logd/logd_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define REPEAT_MS 60000 /* the same failure again: said once a minute */

static _Atomic uint64_t sidecar_errors;
static pthread_mutex_t said_mu = PTHREAD_MUTEX_INITIALIZER;
static char said[600];	   /* guarded by said_mu: the last failure logged ... */
static uint64_t said_ms;   /* ... and when */
static uint64_t held_back; /* failures since, not logged */

void logd_sidecar_failed(const char *sidecar, int errnum, const struct pc_err *err)
{
	char why[600];
	uint64_t n = atomic_fetch_add(&sidecar_errors, 1) + 1, now = pc_now_mono_ms();

	if (err && err->msg[0])
		pc_strlcpy(why, err->msg, sizeof(why));
	else
		snprintf(why, sizeof(why), "writing %s: %s", sidecar, strerror(errnum));
	pthread_mutex_lock(&said_mu);
	if (strcmp(why, said) != 0 || now - said_ms >= REPEAT_MS || !said_ms) {
		pc_log(
		    PC_LOG_WARN,
		    "checkpoint sidecar %s not written: %s (%llu sidecar write errors so far%s); "
		    "the log and its checkpoints are written, but the sidecar is stale: "
		    "truncation of the log after it cannot be told from it",
		    sidecar, why, (unsigned long long)n, held_back ? ", some held back" : "");
		pc_strlcpy(said, why, sizeof(said));
		said_ms = now ? now : 1;
		held_back = 0;
	} else {
		held_back++;
	}
	pthread_mutex_unlock(&said_mu);
}

uint64_t logd_sidecar_errors(void)
{
	return atomic_load(&sidecar_errors);
}
