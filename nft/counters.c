/* What the kernel counted on our new-flow limit rules: a dump of the inet
 * table's prerouting chain (libmnl + libnftnl), the counter of every rule
 * that updates a meter lim<k> summed per sandbox k, for status, metrics and
 * the engine's summary records (engine/limitlog.c). */
#include "nft/nft_int.h"

#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>

struct lim_sum {
	uint64_t *drops;
	size_t n;
	int err;
};

/* lim<k> or seg<k> (the meters of sandbox k, nft/inet.c) -> k; false for
 * anything else */
static bool meter_index(const char *set, size_t *k)
{
	char *end;
	unsigned long v;

	if (!set || (strncmp(set, "lim", 3) != 0 && strncmp(set, "seg", 3) != 0) || set[3] < '0' ||
	    set[3] > '9')
		return false;
	errno = 0;
	v = strtoul(set + 3, &end, 10);
	if (*end || errno)
		return false;
	*k = v;
	return true;
}

static int rule_cb(const struct nlmsghdr *nlh, void *data)
{
	struct lim_sum *s = data;
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nftnl_expr_iter *it;
	struct nftnl_expr *x;
	bool meter = false;
	size_t k = 0;
	uint64_t pkts = 0;

	if (!r) {
		s->err = PC_ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_rule_nlmsg_parse(nlh, r) < 0) {
		nftnl_rule_free(r);
		return MNL_CB_OK; /* not a rule we can read: not ours to count */
	}
	it = nftnl_expr_iter_create(r);
	while (it && (x = nftnl_expr_iter_next(it))) {
		const char *n = nftnl_expr_get_str(x, NFTNL_EXPR_NAME);

		if (n && strcmp(n, "dynset") == 0)
			meter = meter_index(nftnl_expr_get_str(x, NFTNL_EXPR_DYNSET_SET_NAME), &k);
		else if (n && strcmp(n, "counter") == 0)
			pkts = nftnl_expr_get_u64(x, NFTNL_EXPR_CTR_PACKETS);
	}
	nftnl_expr_iter_destroy(it);
	nftnl_rule_free(r);
	if (meter && k < s->n)
		s->drops[k] += pkts;
	return MNL_CB_OK;
}

/* (nft.h) */
int nft_limit_drops(uint64_t *drops, size_t n, struct pc_err *err)
{
	struct mnl_socket *nl = NULL;
	struct nftnl_rule *q = NULL;
	struct lim_sum s = {.n = n};
	char *buf = NULL;
	uint32_t seq = (uint32_t)time(NULL), portid;
	struct nlmsghdr *nlh;
	ssize_t got;
	int rc = PC_ENOMEM;

	s.drops = calloc(n ? n : 1, sizeof(*s.drops));
	/* zeroed: libmnl 1.0.4 leaves the padding after the table and chain
	 * names unwritten, and the kernel gets the whole request */
	buf = calloc(1, MNL_SOCKET_BUFFER_SIZE);
	q = nftnl_rule_alloc();
	if (!s.drops || !buf || !q) {
		pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		rc = pc_err_set(err, PC_EIO, "netlink: %s", strerror(errno));
		goto out;
	}
	portid = mnl_socket_get_portid(nl);
	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETRULE, NFPROTO_INET, NLM_F_DUMP, seq);
	nftnl_rule_set_str(q, NFTNL_RULE_TABLE, NFT_TABLE);
	nftnl_rule_set_str(q, NFTNL_RULE_CHAIN, "prerouting");
	nftnl_rule_nlmsg_build_payload(nlh, q);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		rc = pc_err_set(err, PC_EIO, "netlink: %s", strerror(errno));
		goto out;
	}
	for (;;) {
		got = mnl_socket_recvfrom(nl, buf, MNL_SOCKET_BUFFER_SIZE);
		if (got <= 0) {
			rc = pc_err_set(err, PC_EIO, "netlink: %s", strerror(errno));
			goto out;
		}
		rc = mnl_cb_run(buf, (size_t)got, seq, portid, rule_cb, &s);
		if (rc == MNL_CB_STOP)
			break;
		if (rc < 0) {
			rc = s.err ? pc_err_set(err, s.err, "out of memory")
				   : pc_err_set(err, PC_EIO, "nft rule dump: %s", strerror(errno));
			goto out;
		}
	}
	memcpy(drops, s.drops, n * sizeof(*drops));
	rc = 0;
out:
	if (nl)
		mnl_socket_close(nl);
	nftnl_rule_free(q);
	free(buf);
	free(s.drops);
	return rc;
}

/* ---- status and metrics ----------------------------------------------------- */

/* The drops of every sandbox of pol, or NULL (the dump failed: the caller
 * shows no numbers rather than wrong ones). Caller frees. */
static uint64_t *limit_drops_of(const struct policy *pol)
{
	size_t n = pol ? policy_sandbox_count(pol) : 0;
	uint64_t *d = calloc(n ? n : 1, sizeof(*d));
	struct pc_err err = {0};

	if (d && nft_limit_drops(d, n, &err) < 0) {
		free(d);
		d = NULL;
	}
	return d;
}

int limits_status_json(const struct policy *pol, char **buf, size_t *len)
{
	uint64_t *d = limit_drops_of(pol);
	size_t n = pol ? policy_sandbox_count(pol) : 0;
	int rc = pc_buf_appendf(buf, len, ",\"limits\":[");

	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(pol, i);
		char dropped[24] = "null";

		if (d)
			snprintf(dropped, sizeof(dropped), "%llu", (unsigned long long)d[i]);
		/* sandbox names are [A-Za-z0-9._-]: nothing to escape */
		rc = pc_buf_appendf(buf, len,
				    "%s{\"sandbox\":\"%s\",\"new_flows_per_second\":%u,"
				    "\"new_flows_burst\":%u,\"dropped\":%s}",
				    i ? "," : "", sb->name, sb->new_flows_per_second,
				    sb->new_flows_burst, dropped);
	}
	free(d);
	return rc ? rc : pc_buf_appendf(buf, len, "]");
}

void limits_metrics(struct pc_prom *b, const struct policy *pol)
{
	uint64_t *d = limit_drops_of(pol);

	if (!d)
		return; /* no numbers rather than wrong ones */
	pc_prom_family(b, "portcullis_engine_new_flow_limit_dropped_total", "counter",
		       "New flows of a sandbox over its new-flow limit, dropped by the kernel "
		       "before the queue (since the tables were last installed).");
	for (size_t i = 0; i < policy_sandbox_count(pol); i++) {
		char l[POLICY_NAME_MAX + 16];

		snprintf(l, sizeof(l), "sandbox=\"%s\"", policy_sandbox_at(pol, i)->name);
		pc_prom_u64(b, "portcullis_engine_new_flow_limit_dropped_total", l, d[i]);
	}
	free(d);
}
