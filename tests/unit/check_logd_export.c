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

/* ---- display escaping: one list of code points that do not print, for
 * log show and the export (logd/escape.c) ---------------------------------- */

static const char *esc(const char *s, size_t n, enum logesc_form f)
{
	static char out[512];
	struct pc_buf o;

	pc_buf_init_fixed(&o, out, sizeof(out) - 1, 0);
	logesc_put(&o, s, n, f);
	if (o.err)
		ck_abort_msg("escape: buffer error %d", o.err);
	out[o.len] = '\0';
	return out;
}

#define ESC_EQ(in, f, want) ck_assert_str_eq(esc(in, sizeof(in) - 1, f), want)

START_TEST(display_escape_each_class_each_form)
{
	/* C0 (ESC, NUL, newline), DEL */
	ESC_EQ("a\x1b[2Jb", LOGESC_TEXT, "a\\u{001B}[2Jb");
	ESC_EQ("a\x1b[2Jb", LOGESC_SD, "a\\u{001B}[2Jb");
	ESC_EQ("a\x1b[2Jb", LOGESC_JSON, "a\\u001b[2Jb");
	ESC_EQ("a\x1b[2Jb", LOGESC_JSON_LINE, "a\\u001b[2Jb");
	ESC_EQ("\0", LOGESC_TEXT, "\\u{0000}");
	ESC_EQ("\n\t\r", LOGESC_TEXT, "\\u{000A}\\u{0009}\\u{000D}");
	ESC_EQ("\n\t\r", LOGESC_JSON, "\\n\\t\\r"); /* as common/json.c */
	ESC_EQ("\n", LOGESC_JSON_LINE, "\\u000a");
	ESC_EQ("\x7f", LOGESC_TEXT, "\\u{007F}");
	ESC_EQ("\x7f", LOGESC_JSON, "\\u007f");
	/* C1, as UTF-8: U+0080, U+0085 (NEL), U+009B (CSI), U+009F */
	ESC_EQ("\xc2\x80\xc2\x85\xc2\x9b\xc2\x9f", LOGESC_TEXT,
	       "\\u{0080}\\u{0085}\\u{009B}\\u{009F}");
	ESC_EQ("\xc2\x9b", LOGESC_SD, "\\u{009B}");
	ESC_EQ("\xc2\x9b", LOGESC_JSON, "\\u009b");
	ESC_EQ("\xc2\x9b", LOGESC_JSON_LINE, "\\u009b");
	/* bidi controls */
	ESC_EQ("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae", LOGESC_TEXT,
	       "\\u{202A}\\u{202B}\\u{202C}\\u{202D}\\u{202E}");
	ESC_EQ("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", LOGESC_TEXT,
	       "\\u{2066}\\u{2067}\\u{2068}\\u{2069}");
	ESC_EQ("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", LOGESC_TEXT, "\\u{200E}\\u{200F}\\u{061C}");
	ESC_EQ("\xe2\x80\xae", LOGESC_SD, "\\u{202E}");
	ESC_EQ("\xe2\x80\xae", LOGESC_JSON, "\\u202e");
	ESC_EQ("\xe2\x80\xae", LOGESC_JSON_LINE, "\\u202e");
	/* line and paragraph separators */
	ESC_EQ("\xe2\x80\xa8\xe2\x80\xa9", LOGESC_TEXT, "\\u{2028}\\u{2029}");
	ESC_EQ("\xe2\x80\xa8\xe2\x80\xa9", LOGESC_JSON, "\\u2028\\u2029");
	/* their neighbours print, as do letters and emoji */
	ESC_EQ("\xc2\xa0\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa\xd8\x9b", LOGESC_TEXT,
	       "\xc2\xa0\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa\xd8\x9b");
	ESC_EQ("caf\xc3\xa9 \xf0\x9f\x94\x91", LOGESC_JSON, "caf\xc3\xa9 \xf0\x9f\x94\x91");
	/* not UTF-8: stray, overlong, surrogate, past U+10FFFF, cut short */
	ESC_EQ("\xff\x80", LOGESC_TEXT, "\\x{FF}\\x{80}");
	ESC_EQ("\xc0\x9b", LOGESC_TEXT, "\\x{C0}\\x{9B}"); /* an overlong ESC */
	ESC_EQ("\xed\xa0\x80", LOGESC_TEXT, "\\x{ED}\\x{A0}\\x{80}");
	ESC_EQ("\xf4\x90\x80\x80", LOGESC_TEXT, "\\x{F4}\\x{90}\\x{80}\\x{80}");
	ESC_EQ("\xe2\x80", LOGESC_TEXT, "\\x{E2}\\x{80}");
	ESC_EQ("\xff", LOGESC_JSON, "\\ufffd");
	ESC_EQ("\xe2\x80", LOGESC_JSON_LINE, "\\ufffd\\ufffd");
	/* each form's own: a backslash always (so an escape is never a
	 * record's own text), " and ] where the syntax needs them */
	ESC_EQ("\\u{202E}", LOGESC_TEXT, "\\\\u{202E}");
	ESC_EQ("a\"]\\", LOGESC_TEXT, "a\"]\\\\");
	ESC_EQ("a\"]\\", LOGESC_SD, "a\\\"\\]\\\\");
	ESC_EQ("a\"]\\", LOGESC_JSON, "a\\\"]\\\\");
	ESC_EQ("{\"k\":\"\\\\\"}", LOGESC_JSON_LINE, "{\"k\":\"\\\\\"}");
}
END_TEST

/* Every code point, in every form: the ones on the list escaped, every
 * other one as it is (or, ASCII, as the form's syntax needs), and never a
 * byte that does not print in the output. */
START_TEST(display_escape_every_code_point)
{
	static const enum logesc_form forms[] = {LOGESC_TEXT, LOGESC_SD, LOGESC_JSON,
						 LOGESC_JSON_LINE};
	unsigned listed = 0;

	for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
		char u[4];
		size_t n;

		if (cp >= 0xd800 && cp <= 0xdfff)
			continue;
		if (cp < 0x80)
			u[0] = (char)cp, n = 1;
		else if (cp < 0x800)
			u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
		else if (cp < 0x10000)
			u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 0x3f)),
			u[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
		else
			u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 0x3f)),
			u[2] = (char)(0x80 | (cp >> 6 & 0x3f)), u[3] = (char)(0x80 | (cp & 0x3f)),
			n = 4;
		listed += logesc_nonprinting(cp);
		for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
			const char *o = esc(u, n, forms[f]);
			bool special = cp == '\\' || cp == '"' || cp == ']', ok;

			/* (one assertion only when it fails: Check's cost a
			 * message each, a million of them) */
			if (logesc_nonprinting(cp))
				ok = o[0] == '\\' && o[1] && strchr("untr", o[1]);
			else
				ok = special || (strlen(o) == n && !memcmp(o, u, n));
			for (const unsigned char *p = (const unsigned char *)o; *p; p++)
				if (*p < 0x20 || *p == 0x7f ||
				    (*p >= 0x80 && logesc_nonprinting(cp)))
					ok = false;
			if (!ok)
				ck_abort_msg("U+%04X form %zu: %s", cp, f, o);
		}
	}
	/* C0 32, DEL, C1 32, the bidi controls 12, U+2028/9 */
	ck_assert_uint_eq(listed, 32 + 1 + 32 + 12 + 2);
}
END_TEST

/* A piece is put whole: a fixed buffer that fills ends before an escape
 * or a character it cannot hold, never in it. */
START_TEST(display_escape_never_cuts_an_escape)
{
	static const char in[] = "ab\xe2\x80\xae"
				 "cd\xf0\x9f\x94\x91";

	for (size_t size = 0; size < 24; size++) {
		char out[24];
		struct pc_buf o;

		memset(out, 'X', sizeof(out));
		pc_buf_init_fixed(&o, out, size, 0);
		logesc_put(&o, in, sizeof(in) - 1, LOGESC_TEXT);
		ck_assert_uint_le(o.len, size);
		out[o.len] = '\0';
		ck_assert_msg(!strncmp("ab\\u{202E}cd\xf0\x9f\x94\x91", out, strlen(out)),
			      "size %zu: %s", size, out);
		ck_assert_msg(strlen(out) == 0 || strlen(out) == 1 || strlen(out) == 2 ||
				  strlen(out) == 10 || strlen(out) == 11 || strlen(out) == 12 ||
				  strlen(out) == 16,
			      "size %zu: cut inside a piece: %s", size, out);
	}
}
END_TEST

/* A run of plain text is put in one piece (logesc_put's fast path), yet
 * the result is what a code point at a time gives: a string escaped whole
 * equals its code points escaped one by one, in every form, into a
 * growing buffer and into fixed buffers of every size up to its length
 * (where the fixed buffer fills, both keep the same pieces). */
START_TEST(display_escape_runs_as_pieces)
{
	/* whole code points or bytes that are not UTF-8 and cannot join
	 * their neighbours into a character */
	static const char *pieces[] = {"a",
				       "Z",
				       "0",
				       " ",
				       "\"",
				       "\\",
				       "]",
				       "[",
				       "\n",
				       "\t",
				       "\r",
				       "\x01",
				       "\x7f",
				       "\xc2\x85",
				       "\xe2\x80\x8f",
				       "\xe2\x80\xa8",
				       "\xc3\xa9",
				       "\xf0\x9f\x98\x80",
				       "\xff",
				       "\xc0\xaf",
				       "{",
				       "abcdefghij"};
	const size_t np = sizeof(pieces) / sizeof(pieces[0]);
	uint32_t x = 2463534242u;

	for (int round = 0; round < 300; round++) {
		char s[256];
		size_t at[64], n = 0, k = 0;

		for (int i = 0; i < 24; i++) {
			const char *p;

			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			p = pieces[x % np];
			at[k++] = n;
			memcpy(s + n, p, strlen(p));
			n += strlen(p);
		}
		at[k] = n;
		for (int f = LOGESC_TEXT; f <= LOGESC_JSON_LINE; f++)
			for (size_t size = 0; size <= 6 * n + 2; size += size < 40 ? 1 : 7) {
				char whole[2048], each[2048];
				struct pc_buf w, e;

				if (size == 6 * n + 2 || size >= sizeof(whole)) {
					pc_buf_init(&w, 0, 0); /* growing */
					pc_buf_init(&e, 0, 0);
				} else {
					pc_buf_init_fixed(&w, whole, size, 0);
					pc_buf_init_fixed(&e, each, size, 0);
				}
				logesc_put(&w, s, n, (enum logesc_form)f);
				for (size_t i = 0; i < k; i++)
					logesc_put(&e, s + at[i], at[i + 1] - at[i],
						   (enum logesc_form)f);
				ck_assert_uint_eq(w.len, e.len);
				ck_assert_int_eq(w.err, e.err);
				ck_assert_msg(!memcmp(w.p, e.p, w.len), "form %d, size %zu", f,
					      size);
				if (w.p != whole) {
					pc_buf_free(&w);
					pc_buf_free(&e);
				}
				if (size >= sizeof(whole))
					break;
			}
	}
}
END_TEST

static bool has_raw_control(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) ||
		    (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xae || p[2] == 0xa8)))
			return true;
	return false;
}

/* The same escapes through log show's human form (from a record line, the
 * JSON's own escapes decoded first) and through each syslog form. */
START_TEST(display_escape_in_show_and_export)
{
	static const char line[] =
	    "{\"event.sequence\":9,\"@timestamp\":\"2026-12-01T10:00:00.000Z\","
	    "\"event.type\":[\"connection\",\"allowed\"],\"event.action\":\"connect\","
	    "\"event.reason\":\"r\\u001b]0;t\\u0007\","
	    "\"destination.domain\":\"a\\u001b[2J\xc2\x9b\xe2\x80\xaegnp.exe\\\\x\\ud83d\\udd11\","
	    "\"destination.port\":443}";
	struct logrec r = {.action = LOGREC_CONNECT,
			   .verdict = LOGREC_ALLOWED,
			   .sandbox = "agent\xe2\x80\xa8"
				      "1",
			   .domain = "a\x1b[2J\xc2\x9b\xe2\x80\xaegnp.exe",
			   .reason = "r\x1b]0;t\x07",
			   .message = "m\xc2\x85"};
	static char msg[LOGX_MSG_MAX + 1];
	char out[2048];
	int n;

	ck_assert_int_gt(logrec_human(line, sizeof(line) - 1, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "#9 2026-12-01 10:00:00Z - allowed CONNECT "
			      "a\\u{001B}[2J\\u{009B}\\u{202E}gnp.exe\\\\x\xf0\x9f\x94\x91:443 "
			      "(r\\u{001B}]0;t\\u{0007})");

	logx_set_identity(LOGX_FACILITY, 32473);
	n = logx_format_record(&r, 9, 1764424933123ULL, hash, "gw1", 1, msg, sizeof(msg));
	ck_assert_int_gt(n, 0);
	ck_assert_msg(!has_raw_control(msg), "%s", msg);
	ck_assert_ptr_nonnull(
	    strstr(msg, "destination.domain=\"a\\u{001B}[2J\\u{009B}\\u{202E}gnp.exe\""));
	ck_assert_ptr_nonnull(strstr(msg, "portcullis.sandbox=\"agent\\u{2028}1\""));
	ck_assert_ptr_nonnull(strstr(msg, "] #9 allowed connect a\\u{001B}[2J\\u{009B}\\u{202E}"
					  "gnp.exe (r\\u{001B}]0;t\\u{0007}): m\\u{0085}"));

	logx_set_identity(LOGX_FACILITY, 0);
	n = logx_format_record(&r, 9, 1764424933123ULL, hash, "gw1", 1, msg, sizeof(msg));
	ck_assert_int_gt(n, 0);
	ck_assert_msg(!has_raw_control(msg), "%s", msg);
	ck_assert_ptr_nonnull(
	    strstr(msg, "\"destination.domain\":\"a\\u001b[2J\\u009b\\u202egnp.exe\""));
	ck_assert_ptr_nonnull(strstr(msg, "\"message\":\"m\\u0085\""));
	ck_assert_int_eq(logjson_each(strchr(msg, '{'), strlen(strchr(msg, '{')), NULL, NULL), 0);
}
END_TEST

PC_UNIT_SUITE("logd_export", "core", 30, oversize_record_is_cut_with_its_marker,
	      oversize_json_record_stays_json, oversize_message_is_cut_at_a_character,
	      record_that_fits_is_sent_as_formatted, full_spool_drops_records_never_checkpoints,
	      checkpoint_queue_keeps_the_last_of_each_tree, spool_grows_by_chunks_and_bounds_bytes,
	      display_escape_each_class_each_form, display_escape_every_code_point,
	      display_escape_never_cuts_an_escape, display_escape_runs_as_pieces,
	      display_escape_in_show_and_export)
