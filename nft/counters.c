/* What the kernel counted on our new-flow limit rules: a dump of the inet
 * table's sets limsb4 and limsb6 (libmnl + libnftnl), each element of which
 * belongs to one sandbox and counts what the limit rules dropped from its
 * addresses, summed per sandbox, for status, metrics and the engine's
 * summary records (engine/limitlog.c). */
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
#include <libnftnl/set.h>

struct lim_sum {
	const struct policy *pol;
	uint64_t *drops;
	size_t n;
	int err;
};

long nft_prefix_owner(const struct policy *pol, const struct pc_addr *a)
{
	long best = -1;
	int len = -1;

	for (size_t i = 0; pol && i < policy_sandbox_count(pol); i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(pol, i);

		for (size_t k = 0; k < sb->match.n_sources; k++)
			if (sb->match.sources[k].len > len &&
			    pc_prefix_contains(&sb->match.sources[k], a)) {
				best = (long)i;
				len = sb->match.sources[k].len;
			}
	}
	return best;
}

static int elem_expr_cb(struct nftnl_expr *x, void *data)
{
	uint64_t *pkts = data;
	const char *n = nftnl_expr_get_str(x, NFTNL_EXPR_NAME);

	if (n && strcmp(n, "counter") == 0)
		*pkts += nftnl_expr_get_u64(x, NFTNL_EXPR_CTR_PACKETS);
	return 0;
}

/* Each element of limsb4/6 (the first address of a piece; an interval's
 * end carries no count of its own) and its counter. */
static int elems_cb(const struct nlmsghdr *nlh, void *data)
{
	struct lim_sum *s = data;
	struct nftnl_set *set = nftnl_set_alloc();
	struct nftnl_set_elems_iter *it;
	struct nftnl_set_elem *e;

	if (!set) {
		s->err = PC_ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_set_elems_nlmsg_parse(nlh, set) < 0) {
		nftnl_set_free(set);
		return MNL_CB_OK; /* not one we can read: not ours to count */
	}
	it = nftnl_set_elems_iter_create(set);
	while (it && (e = nftnl_set_elems_iter_next(it))) {
		uint32_t klen = 0;
		const void *key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
		uint64_t pkts = 0;
		struct pc_addr a;
		long k;

		if (!key || (klen != 4 && klen != 16) ||
		    (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS) &&
		     (nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS) & NFT_SET_ELEM_INTERVAL_END)))
			continue;
		memset(&a, 0, sizeof(a));
		a.family = klen == 4 ? AF_INET : AF_INET6;
		memcpy(a.a, key, klen);
		nftnl_set_elem_expr_foreach(e, elem_expr_cb, &pkts);
		k = pkts ? nft_prefix_owner(s->pol, &a) : -1;
		if (k >= 0 && (size_t)k < s->n)
			s->drops[k] += pkts;
	}
	nftnl_set_elems_iter_destroy(it);
	nftnl_set_free(set);
	return MNL_CB_OK;
}

/* (nft.h) */
static int dump_set(struct lim_sum *s, const char *name, struct pc_err *err);

int nft_limit_drops(const struct policy *pol, uint64_t *drops, size_t n, struct pc_err *err)
{
	struct lim_sum s = {.pol = pol, .n = n};
	int rc;

	s.drops = calloc(n ? n : 1, sizeof(*s.drops));
	if (!s.drops)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	rc = dump_set(&s, NFT_SET_LIMSB4, err);
	if (rc == 0)
		rc = dump_set(&s, NFT_SET_LIMSB6, err);
	if (rc == 0)
		memcpy(drops, s.drops, n * sizeof(*drops));
	free(s.drops);
	return rc;
}

static int dump_set(struct lim_sum *s, const char *name, struct pc_err *err)
{
	struct mnl_socket *nl = NULL;
	struct nftnl_set *q = NULL;
	char *buf = NULL;
	uint32_t seq = (uint32_t)time(NULL), portid;
	struct nlmsghdr *nlh;
	ssize_t got;
	int rc = PC_ENOMEM;

	/* zeroed: libmnl 1.0.4 leaves the padding after the table and set
	 * names unwritten, and the kernel gets the whole request */
	buf = calloc(1, MNL_SOCKET_BUFFER_SIZE);
	q = nftnl_set_alloc();
	if (!buf || !q) {
		pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		rc = pc_err_set(err, PC_EIO, "netlink: %s", strerror(errno));
		goto out;
	}
	portid = mnl_socket_get_portid(nl);
	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_DUMP, seq);
	nftnl_set_set_str(q, NFTNL_SET_TABLE, NFT_TABLE);
	nftnl_set_set_str(q, NFTNL_SET_NAME, name);
	nftnl_set_elems_nlmsg_build_payload(nlh, q);
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
		rc = mnl_cb_run(buf, (size_t)got, seq, portid, elems_cb, s);
		if (rc == MNL_CB_STOP)
			break;
		if (rc < 0) {
			rc = s->err ? pc_err_set(err, s->err, "out of memory")
				    : pc_err_set(err, PC_EIO, "nft set element dump: %s",
						 strerror(errno));
			goto out;
		}
	}
	rc = 0;
out:
	if (nl)
		mnl_socket_close(nl);
	nftnl_set_free(q);
	free(buf);
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

	if (d && nft_limit_drops(pol, d, n, &err) < 0) {
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
