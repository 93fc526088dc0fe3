/* `portcullis status`'s human summary (cli/control.c, cli_status_text) of
 * the engine's status JSON (docs/engine.md), read by top_health_engine:
 * a dozen lines an admin reads first, not the ~70 lines of indented JSON
 * it printed before (that stays `status --json`). */
#include "cli/cli_int.h"
#include "unit.h"

#include <string.h>

/* docs/engine.md's example, two queues, two sandboxes. */
static const char proven[] =
    "{\"ok\":true,\"version\":\"0.1.0\",\"pid\":4242,\"uptime_s\":3723,"
    "\"policy\":\"sha256:9f86d081884c7d65\",\"queue_path\":\"compat\","
    "\"queues\":[{\"num\":100,\"queued\":17,\"accepted\":11,\"refused\":6,"
    "\"kernel_dropped\":1,\"user_dropped\":0,\"enobufs\":0},"
    "{\"num\":101,\"queued\":3,\"accepted\":2,\"refused\":1,"
    "\"kernel_dropped\":0,\"user_dropped\":2,\"enobufs\":0}],"
    "\"flows\":3,\"held\":0,\"log\":{\"sent\":13,\"failed\":0},"
    "\"dnsguard\":{\"queries_allowed\":3,\"queries_refused\":5,\"queries_malformed\":0,"
    "\"answers_released\":3,\"answers_dropped\":0,\"learned_entries\":4,"
    "\"learned_evicted\":2,\"ech_stripped\":0,\"pending_queries\":0,"
    "\"pending_evicted\":0},"
    "\"limits\":[{\"sandbox\":\"agent-1\",\"new_flows_per_second\":1000,"
    "\"new_flows_burst\":2000,\"dropped\":0},{\"sandbox\":\"agent-2\","
    "\"new_flows_per_second\":20,\"new_flows_burst\":40,\"dropped\":7}],"
    "\"quotas\":{\"held_flows_per_queue\":4096,\"dns_tcp_streams_per_queue\":256,"
    "\"sandboxes\":[{\"sandbox\":\"agent-1\",\"held_flows_max\":2048,"
    "\"dns_tcp_streams_max\":128,\"held_flows_refused\":1,"
    "\"dns_tcp_streams_refused\":0},{\"sandbox\":\"agent-2\",\"held_flows_max\":2048,"
    "\"dns_tcp_streams_max\":128,\"held_flows_refused\":2,"
    "\"dns_tcp_streams_refused\":3}]},"
    "\"check\":{\"result\":\"proven\",\"runs\":3,\"running\":false,"
    "\"time\":\"2026-11-29T14:02:13.123Z\",\"trigger\":\"reload\",\"findings\":0},"
    "\"cutoff\":{\"active\":false,\"count\":1},"
    "\"rules\":[{\"rule\":\"agent-1/allow[0]\",\"file\":\"/etc/portcullis/rules.d/agent-1.yaml\","
    "\"line\":4,\"hits\":12}]}";

static const char cut_off[] =
    "{\"ok\":true,\"version\":\"0.1.0\",\"pid\":7,\"uptime_s\":42,"
    "\"policy\":\"sha256:00\",\"queue_path\":\"native\",\"queues\":[],"
    "\"flows\":0,\"held\":1,\"log\":{\"sent\":0,\"failed\":2},"
    "\"dnsguard\":{\"queries_allowed\":0},\"limits\":[],"
    "\"check\":{\"result\":\"exit found\",\"runs\":1,\"running\":true,"
    "\"time\":\"2026-11-29T14:02:13.123Z\",\"trigger\":\"nftables\",\"findings\":2,"
    "\"first\":\"second exit: table netdev tap chain in rule handle 2: dup\"},"
    "\"cutoff\":{\"active\":true,\"count\":2,\"since\":\"2026-11-29T14:02:12.000Z\","
    "\"ports_down\":3,\"after\":\"nft (pid 99) changed another table\"},\"rules\":[]}";

static char *summary(const char *json)
{
	static char out[4096];
	struct top_health h;
	struct pc_buf b = {0};

	memset(&h, 0, sizeof(h));
	ck_assert_int_eq(top_health_engine(json, strlen(json), &h), 0);
	cli_status_text(&b, &h);
	ck_assert_int_eq(b.err, 0);
	pc_strlcpy(out, pc_buf_str(&b), sizeof(out));
	pc_buf_free(&b);
	return out;
}

static size_t lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

START_TEST(proven_engine_in_a_dozen_lines)
{
	const char *s = summary(proven);

	ck_assert_uint_le(lines(s), 12);
	ck_assert_ptr_null(strchr(s, '{')); /* words, not JSON */
	ck_assert_ptr_nonnull(strstr(s, "engine       portcullisd 0.1.0, pid 4242, up 1h02m\n"));
	ck_assert_ptr_nonnull(strstr(s, "policy       sha256:9f86d081884c7d65\n"));
	ck_assert_ptr_nonnull(
	    strstr(s, "containment  proven (check 3 at 2026-11-29T14:02:13.123Z, after reload)\n"));
	ck_assert_ptr_nonnull(strstr(s, "cut off      no (1 time since start)\n"));
	/* the queues added up */
	ck_assert_ptr_nonnull(strstr(s,
				     "queues       2 (compat): 20 packets, 13 accepted, 7 refused; "
				     "dropped 1 in the kernel, 2 by the engine, 0 ENOBUFS\n"));
	ck_assert_ptr_nonnull(strstr(s, "flows        3 allowed, 0 held for their ClientHello\n"));
	ck_assert_ptr_nonnull(strstr(s, "dns          3 queries allowed, 5 refused, 0 malformed; "
					"4 addresses learned, 2 evicted\n"));
	ck_assert_ptr_nonnull(strstr(s, "log          13 records sent, 0 not taken by logd\n"));
	ck_assert_ptr_nonnull(
	    strstr(s, "limits       2 sandboxes; 7 new flows dropped over a limit; "
		      "refused over a share: 3 held flows, 3 DNS-over-TCP streams\n"));
	ck_assert_ptr_nonnull(strstr(s, "rules        1 entry hit, 12 hits in all\n"));
	ck_assert_ptr_nonnull(strstr(s, "portcullis status --json"));
}
END_TEST

START_TEST(exit_found_and_cut_off_say_so)
{
	const char *s = summary(cut_off);

	ck_assert_ptr_nonnull(
	    strstr(s, "containment  exit found (check 1 at 2026-11-29T14:02:13.123Z, "
		      "after nftables); a check is running\n"));
	ck_assert_ptr_nonnull(strstr(s,
				     "2 findings, the first: second exit: table netdev tap chain "
				     "in rule handle 2: dup\n"));
	ck_assert_ptr_nonnull(strstr(s, "cut off      YES since 2026-11-29T14:02:12.000Z, 3 ports "
					"down, after nft (pid 99) changed another table\n"));
	ck_assert_ptr_nonnull(strstr(s, "engine       portcullisd 0.1.0, pid 7, up 42s\n"));
	ck_assert_ptr_nonnull(strstr(s, "log          0 records sent, 2 not taken by logd\n"));
}
END_TEST

/* The engine's bytes: a control character in a string is not passed to
 * the terminal. */
START_TEST(control_characters_are_not_printed)
{
	static const char js[] =
	    "{\"policy\":\"sha256:\\u001b[2J\",\"check\":{\"result\":\"pro\\nven\","
	    "\"findings\":1,\"first\":\"a\\u0007b\"}}";
	const char *s = summary(js);

	ck_assert_ptr_null(strchr(s, '\033'));
	ck_assert_ptr_null(strchr(s, '\007'));
	ck_assert_ptr_nonnull(strstr(s, "containment  pro?nven\n"));
}
END_TEST

PC_UNIT_SUITE("cli_status", "summary", 0, proven_engine_in_a_dozen_lines,
	      exit_found_and_cut_off_say_so, control_characters_are_not_printed)
