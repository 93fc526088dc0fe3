/* Unit tests of logd's syslog export that need no collector: an oversize
 * record is cut to LOGX_MSG_MAX with its marker (never dropped), a record
 * that fits is sent exactly as logx_format_record writes it, and the spool
 * lets records give way when full but keeps every checkpoint, in order. */
#include "logd/logd_int.h"
#include "tests/unit/unit.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

static const uint8_t hash[MERKLE_HASH] = {0x4b, 0xe1, 0xf0, 0x0d};

START_TEST(oversize_record_is_cut_with_its_marker)
{
	static char reason[7901], msg[LOGX_MSG_MAX + 1];
	static char full[64 * 1024];
	struct logrec r = {.action = LOGREC_EXFIL,
			   .verdict = LOGREC_REFUSED,
			   .sandbox = "agent-big",
			   .reason = reason,
			   .http_path = "/gists"};
	char want[64];
	int n;

	memset(reason, ']', sizeof(reason) - 1);
	logx_set_identity(LOGX_FACILITY, 32473); /* the structured-data form */
	/* its full form is over the limit: logx_format_record refuses it in
	 * a buffer of the limit, and writes it in a bigger one */
	ck_assert_int_lt(
	    logx_format_record(&r, 77, 1764424933123ULL, hash, "gw1", 1, msg, sizeof(msg)), 0);
	n = logx_format_record(&r, 77, 1764424933123ULL, hash, "gw1", 1, full, sizeof(full));
	ck_assert_int_gt(n, LOGX_MSG_MAX);
	snprintf(want, sizeof(want), " truncated=\"%d\" ", n);

	n = logx_format_export(&r, 77, 1764424933123ULL, hash, "gw1", 1, msg, sizeof(msg));
	ck_assert_int_gt(n, 0);
	ck_assert_int_le(n, LOGX_MSG_MAX);
	ck_assert_uint_eq(strlen(msg), (size_t)n);
	ck_assert_ptr_nonnull(strstr(msg, " event.sequence=\"77\" event.hash=\"4be1f00d"));
	ck_assert_ptr_nonnull(strstr(msg, want));
	ck_assert_ptr_nonnull(strstr(msg, "\\]\\]...\" "));
	ck_assert_str_eq(msg + n - 12, " [truncated]");
	/* still one SD element: the value's escapes are whole */
	ck_assert_ptr_nonnull(strstr(msg, "url.path=\"/gists\"] #77 refused exfiltration"));
	logx_set_identity(LOGX_FACILITY, 0);
}
END_TEST

/* Without an enterprise number the MSG is JSON: an oversize record is
 * never cut mid-object, only its values, and says how long it was. */
static int count_key(void *ctx, const char *k, size_t kl, enum logjson_type t, const char *v,
		     size_t vl)
{
	(void)t;
	(void)v;
	(void)vl;
	if (kl == 9 && memcmp(k, "truncated", 9) == 0)
		++*(int *)ctx;
	return 0;
}

START_TEST(oversize_json_record_stays_json)
{
	static char reason[7901], msg[LOGX_MSG_MAX + 1], text[9000];
	struct logrec r = {.action = LOGREC_EXFIL,
			   .verdict = LOGREC_REFUSED,
			   .sandbox = "agent-big",
			   .reason = reason,
			   .message = text,
			   .http_path = "/gists"};
	const char *body;
	int n, found = 0;

	memset(reason, '"', sizeof(reason) - 1);
	memset(text, 'x', sizeof(text) - 1);
	logx_set_identity(LOGX_FACILITY, 0);
	n = logx_format_export(&r, 78, 1764424933123ULL, hash, "gw1", 1, msg, sizeof(msg));
	ck_assert_int_gt(n, 0);
	ck_assert_int_le(n, LOGX_MSG_MAX);
	body = strstr(msg, " exfiltration - {");
	ck_assert_ptr_nonnull(body);
	body += 15;
	ck_assert_int_eq(msg[n - 1], '}');
	ck_assert_int_eq(logjson_each(body, (size_t)(msg + n - body), count_key, &found), 0);
	ck_assert_int_eq(found, 1);
	ck_assert_ptr_nonnull(strstr(body, "\"url.path\":\"/gists\""));
	ck_assert_ptr_nonnull(strstr(body, "\\\"...\""));
}
END_TEST

START_TEST(oversize_message_is_cut_at_a_character)
{
	/* a long message of 3-byte characters, whose cut must not split one */
	static char text[8000], msg[LOGX_MSG_MAX + 1];
	struct logrec r = {.action = LOGREC_EXFIL, .verdict = LOGREC_REFUSED, .message = text};
	static char reason[4000];
	int n;

	for (size_t i = 0; i + 3 < sizeof(text); i += 3)
		memcpy(text + i, "\xe2\x82\xac", 3);
	memset(reason, '"', sizeof(reason) - 1);
	r.reason = reason;
	logx_set_identity(LOGX_FACILITY, 32473); /* the structured-data form: MSG is cut */
	n = logx_format_export(&r, 5, 1764424933123ULL, hash, "gw1", 1, msg, sizeof(msg));
	logx_set_identity(LOGX_FACILITY, 0);
	ck_assert_int_gt(n, 0);
	ck_assert_int_le(n, LOGX_MSG_MAX);
	ck_assert_str_eq(msg + n - 12, " [truncated]");
	/* what precedes the marker is a whole euro sign */
	ck_assert_int_eq(memcmp(msg + n - 15, "\xe2\x82\xac", 3), 0);
}
END_TEST

START_TEST(record_that_fits_is_sent_as_formatted)
{
	char a[LOGX_MSG_MAX + 1], b[LOGX_MSG_MAX + 1];
	struct logrec r = {.action = LOGREC_CONNECT,
			   .verdict = LOGREC_REFUSED,
			   .sandbox = "agent-1",
			   .reason = "not on the allow list",
			   .domain = "paste.example"};
	int na, nb;

	r.dst.addr.family = AF_INET;
	inet_pton(AF_INET, "203.0.113.12", r.dst.addr.a);
	r.dst.port = 443;
	na = logx_format_record(&r, 9, 1764424933123ULL, hash, "gw1", 1, a, sizeof(a));
	nb = logx_format_export(&r, 9, 1764424933123ULL, hash, "gw1", 1, b, sizeof(b));
	ck_assert_int_gt(na, 0);
	ck_assert_int_eq(na, nb);
	ck_assert_int_eq(memcmp(a, b, (size_t)na), 0);
	ck_assert_ptr_null(strstr(b, "truncated"));
}
END_TEST

static int pop_all(struct logx_spool *s, char out[][32], uint64_t *seqs, int max)
{
	int n = 0;

	while (n < max && logx_spool_next_len(s) >= 0) {
		int len = logx_spool_pop(s, out[n], 31, &seqs[n]);

		ck_assert_int_gt(len, 0);
		out[n][len] = '\0';
		n++;
	}
	return n;
}

START_TEST(full_spool_drops_records_never_checkpoints)
{
	struct logx_spool *s;
	struct logx_spool_loss loss;
	char out[64][32];
	uint64_t seqs[64];
	int n;

	ck_assert_int_eq(logx_spool_new(4, 1 << 20, 16, &s), 0);
	/* 30 records with a checkpoint after every 5th: the spool holds 4
	 * records, and all 6 checkpoints */
	for (uint64_t i = 1; i <= 30; i++) {
		char m[32];

		snprintf(m, sizeof(m), "r%llu", (unsigned long long)i);
		logx_spool_push(s, i, 0, 0, m, (uint32_t)strlen(m));
		if (i % 5 == 0) {
			snprintf(m, sizeof(m), "cp%llu", (unsigned long long)i);
			logx_spool_push(s, 0, 0, i, m, (uint32_t)strlen(m));
		}
	}
	ck_assert_uint_eq(logx_spool_count(s), 10);
	ck_assert(logx_spool_take_loss(s, &loss));
	ck_assert_uint_eq(loss.dropped, 26);
	ck_assert_uint_eq(loss.dropped_first, 1);
	ck_assert_uint_eq(loss.dropped_last, 26);
	ck_assert_uint_eq(loss.cps_superseded + loss.cps_dropped, 0);
	ck_assert(!logx_spool_take_loss(s, &loss));
	n = pop_all(s, out, seqs, 64);
	ck_assert_int_eq(n, 10);
	/* in the order pushed */
	{
		const char *want[] = {"cp5", "cp10", "cp15", "cp20", "cp25",
				      "r27", "r28",  "r29",  "r30",  "cp30"};

		for (int i = 0; i < n; i++)
			ck_assert_str_eq(out[i], want[i]);
	}
	ck_assert_uint_eq(seqs[0], 0);
	ck_assert_uint_eq(seqs[5], 27);
	logx_spool_free(s);
}
END_TEST

START_TEST(checkpoint_queue_keeps_the_last_of_each_tree)
{
	struct logx_spool *s;
	struct logx_spool_loss loss;
	char out[64][32];
	uint64_t seqs[64];
	int n;

	/* room for 3 checkpoints: tree 0 (sizes 10, 20, 30), then tree 1
	 * (sizes 5, 6): the covered ones of tree 0 give way first */
	ck_assert_int_eq(logx_spool_new(100, 1 << 20, 3, &s), 0);
	logx_spool_push(s, 0, 0, 10, "a10", 3);
	logx_spool_push(s, 0, 0, 20, "a20", 3);
	logx_spool_push(s, 0, 0, 30, "a30", 3);
	logx_spool_push(s, 0, 1, 5, "b5", 2);
	logx_spool_push(s, 0, 1, 6, "b6", 2);
	ck_assert(logx_spool_take_loss(s, &loss));
	ck_assert_uint_eq(loss.cps_superseded, 2);
	ck_assert_uint_eq(loss.cps_dropped, 0);
	n = pop_all(s, out, seqs, 64);
	ck_assert_int_eq(n, 3);
	ck_assert_str_eq(out[0], "a30");
	ck_assert_str_eq(out[1], "b5");
	ck_assert_str_eq(out[2], "b6");
	logx_spool_free(s);
}
END_TEST

START_TEST(spool_grows_by_chunks_and_bounds_bytes)
{
	static char big[LOGX_MSG_MAX];
	struct logx_spool *s;
	struct logx_spool_loss loss;
	uint64_t kept;

	memset(big, 'x', sizeof(big));
	/* 2 chunks of 32 KiB at most: about 3 of the largest messages */
	ck_assert_int_eq(logx_spool_new(1000, 64 * 1024, 4, &s), 0);
	for (uint64_t i = 1; i <= 20; i++)
		logx_spool_push(s, i, 0, 0, big, sizeof(big));
	logx_spool_push(s, 0, 0, 20, "cp", 2);
	kept = logx_spool_count(s);
	ck_assert_uint_ge(kept, 2);
	ck_assert_uint_le(kept, 5);
	ck_assert(logx_spool_take_loss(s, &loss));
	ck_assert_uint_eq(loss.dropped + kept, 21);
	ck_assert_uint_eq(loss.dropped_last + 1, 21 - (kept - 1));
	logx_spool_free(s);
}
END_TEST

PC_UNIT_SUITE("logd_export", "core", 30, oversize_record_is_cut_with_its_marker,
	      oversize_json_record_stays_json, oversize_message_is_cut_at_a_character,
	      record_that_fits_is_sent_as_formatted, full_spool_drops_records_never_checkpoints,
	      checkpoint_queue_keeps_the_last_of_each_tree, spool_grows_by_chunks_and_bounds_bytes)
