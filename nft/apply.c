/* Talking to nf_tables: one netlink batch per change (tables replaced
 * atomically, port set refreshed, tables removed), and the queue-expression
 * probe that never commits anything. */
#include "nft/nft_int.h"

#include <netinet/in.h> /* before the linux/ headers (libc-compat) */
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

/* Room kept free for the message being built: libnftnl's builders do not
 * check bounds, so one message (a chain, a rule, a set's elements) must fit
 * in this — the same bound libnftnl's own batch pages gave. */
#define BATCH_MSG_ROOM (1u << 20)
#define BATCH_SNDBUF   (16 << 20)

/* The batch is one growing buffer, zeroed before anything is written to
 * it: libmnl 1.0.4 leaves the alignment padding after an attribute
 * unwritten, and the kernel must never be handed uninitialised memory. */
struct batch {
	char *buf;
	size_t len, cap;
	uint32_t seq0, seq;
	/* what each message was, to name the one the kernel refused */
	char (*what)[96];
	size_t nwhat, capwhat, nrules;
	int err;
};

/* Make room for one more message of up to BATCH_MSG_ROOM bytes. */
static int batch_room(struct batch *bt)
{
	size_t cap;
	char *nb;

	if (bt->cap - bt->len >= BATCH_MSG_ROOM)
		return 0;
	cap = bt->cap ? bt->cap * 2 : 2 * BATCH_MSG_ROOM;
	nb = realloc(bt->buf, cap);
	if (!nb)
		return PC_ENOMEM;
	memset(nb + bt->cap, 0, cap - bt->cap);
	bt->buf = nb;
	bt->cap = cap;
	return 0;
}

/* The message being built (at the end of what is done). */
static char *batch_tail(struct batch *bt)
{
	return bt->buf + bt->len;
}

/* The message started by batch_msg is complete: it joins the batch. */
static void batch_next(struct batch *bt)
{
	if (!bt->err)
		bt->len += NLMSG_ALIGN(((struct nlmsghdr *)batch_tail(bt))->nlmsg_len);
}

static int batch_init(struct batch *bt)
{
	memset(bt, 0, sizeof(*bt));
	if (batch_room(bt) < 0)
		return PC_ENOMEM;
	bt->seq0 = bt->seq = (uint32_t)pc_now_mono_ms();
	nftnl_batch_begin(batch_tail(bt), bt->seq++);
	batch_next(bt);
	return 0;
}

static void batch_free(struct batch *bt)
{
	free(bt->buf);
	free(bt->what);
}

/* Start a message; returns its header (NULL after a failure). */
static struct nlmsghdr *batch_msg(struct batch *bt, uint16_t type, uint16_t family, uint16_t flags,
				  const char *what)
{
	if (bt->err)
		return NULL;
	if (bt->nwhat == bt->capwhat) {
		size_t cap = bt->capwhat ? bt->capwhat * 2 : 64;
		char(*nw)[96] = realloc(bt->what, cap * sizeof(*nw));

		if (!nw) {
			bt->err = PC_ENOMEM;
			return NULL;
		}
		bt->what = nw;
		bt->capwhat = cap;
	}
	if (batch_room(bt) < 0) {
		bt->err = PC_ENOMEM;
		return NULL;
	}
	pc_strlcpy(bt->what[bt->nwhat++], what, sizeof(bt->what[0]));
	return nftnl_nlmsg_build_hdr(batch_tail(bt), type, family, flags | NLM_F_ACK, bt->seq++);
}

static void batch_table(struct batch *bt, uint16_t type, uint16_t family, uint16_t flags)
{
	struct nlmsghdr *nlh = batch_msg(bt, type, family, flags,
					 type == NFT_MSG_DELTABLE ? "delete table" : "add table");

	if (!nlh)
		return;
	mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, NFT_TABLE);
	batch_next(bt);
}

/* The elements of s, in as many messages as they take. A netlink
 * attribute's length is 16 bits: in one message, a set's element list
 * past 64 KiB wrapped that length, and the kernel took the first few
 * hundred elements and silently dropped the rest (at 1,000 sandboxes the
 * bridge's pair sets held fewer than a quarter of their elements: the
 * check found the tables not identical, and the engine kept the guard
 * closed). libnftnl's iterator fills each message up to a page. */
static void batch_elems(struct batch *bt, const struct nftnl_set *s, uint16_t family,
			uint16_t flags, const char *what)
{
	struct nftnl_set_elems_iter *it = nftnl_set_elems_iter_create(s);
	int more = 0;

	if (!it) {
		bt->err = bt->err ? bt->err : PC_ENOMEM;
		return;
	}
	do {
		struct nlmsghdr *nlh = batch_msg(bt, NFT_MSG_NEWSETELEM, family, flags, what);

		if (!nlh)
			break;
		more = nftnl_set_elems_nlmsg_build_payload_iter(nlh, it);
		batch_next(bt);
	} while (more > 0);
	nftnl_set_elems_iter_destroy(it);
}

static bool set_empty(const struct nftnl_set *s)
{
	struct nftnl_set_elems_iter *it = nftnl_set_elems_iter_create(s);
	bool empty = !it || !nftnl_set_elems_iter_cur(it);

	nftnl_set_elems_iter_destroy(it);
	return empty;
}

static void batch_obj(struct batch *bt, const struct nft_obj *o)
{
	char what[96], name[64] = "";
	struct nlmsghdr *nlh;

	switch (o->kind) {
	case NFT_TABLE_OBJ:
		batch_table(bt, NFT_MSG_NEWTABLE, o->family, NLM_F_CREATE | NLM_F_EXCL);
		return;
	case NFT_CHAIN_OBJ:
		snprintf(what, sizeof(what), "%s chain %s",
			 o->family == NFPROTO_BRIDGE ? "bridge" : "inet",
			 nftnl_chain_get_str(o->u.chain, NFTNL_CHAIN_NAME));
		nlh = batch_msg(bt, NFT_MSG_NEWCHAIN, o->family, NLM_F_CREATE | NLM_F_EXCL, what);
		if (nlh)
			nftnl_chain_nlmsg_build_payload(nlh, o->u.chain);
		batch_next(bt);
		return;
	case NFT_SET_OBJ:
		pc_strlcpy(name, nftnl_set_get_str(o->u.set, NFTNL_SET_NAME), sizeof(name));
		snprintf(what, sizeof(what), "set %s", name);
		nlh = batch_msg(bt, NFT_MSG_NEWSET, o->family, NLM_F_CREATE | NLM_F_EXCL, what);
		if (nlh)
			nftnl_set_nlmsg_build_payload(nlh, o->u.set);
		batch_next(bt);
		if (set_empty(o->u.set))
			return;
		snprintf(what, sizeof(what), "elements of set %s", name);
		batch_elems(bt, o->u.set, o->family, NLM_F_CREATE | NLM_F_EXCL, what);
		return;
	case NFT_RULE_OBJ:
		snprintf(what, sizeof(what), "rule %zu (%s chain %s)", ++bt->nrules,
			 o->family == NFPROTO_BRIDGE ? "bridge" : "inet",
			 nftnl_rule_get_str(o->u.rule, NFTNL_RULE_CHAIN));
		nlh = batch_msg(bt, NFT_MSG_NEWRULE, o->family, NLM_F_CREATE | NLM_F_APPEND, what);
		if (nlh)
			nftnl_rule_nlmsg_build_payload(nlh, o->u.rule);
		batch_next(bt);
		return;
	}
}

static int nl_open(struct mnl_socket **out, struct pc_err *err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	int one = 1, sz = BATCH_SNDBUF;

	if (!nl)
		return pc_err_errno(err, PC_EIO, "netlink socket");
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(nl);
		return pc_err_errno(err, PC_EIO, "netlink bind");
	}
	/* Short acks, with the kernel's explanation of an error. */
	mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(nl, NETLINK_EXT_ACK, &one, sizeof(one));
	/* A whole table goes in one message; FORCE needs CAP_NET_ADMIN, which
	 * we have whenever we talk to nf_tables at all. */
	setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz));
	setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
	*out = nl;
	return 0;
}

/* Read every ack queued for the batch (nfnetlink handles a batch inside
 * sendmsg, so they are all there when it returns). Returns 0 when no
 * message failed; else the first failure, named, in err. failed_seq gets
 * the sequence number of the first failure (or 0). */
static int read_acks(struct mnl_socket *nl, struct batch *bt, uint32_t *failed_seq, int *errno_out,
		     struct pc_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE * 4];
	int rc = 0;
	ssize_t n;

	*failed_seq = 0;
	while ((n = recv(mnl_socket_get_fd(nl), buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
		int len = (int)n;

		for (; mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
			const struct nlmsgerr *e;
			char ext[256] = "";
			size_t idx;

			if (nlh->nlmsg_type != NLMSG_ERROR)
				continue;
			e = mnl_nlmsg_get_payload(nlh);
			if (e->error == 0 || *failed_seq)
				continue;
			/* extended ack: the kernel's own message follows the
			 * (capped) copy of our request header */
			if (nlh->nlmsg_flags & NLM_F_ACK_TLVS) {
				const char *p = (const char *)e + sizeof(*e);
				const char *end = (const char *)nlh + nlh->nlmsg_len;

				while (p + sizeof(struct nlattr) <= end) {
					const struct nlattr *a = (const struct nlattr *)p;

					if (a->nla_len < sizeof(*a) || p + a->nla_len > end)
						break;
					if (mnl_attr_get_type(a) == NLMSGERR_ATTR_MSG &&
					    a->nla_len > sizeof(*a))
						snprintf(ext, sizeof(ext), "%.*s",
							 (int)(a->nla_len - sizeof(*a)),
							 (const char *)mnl_attr_get_payload(a));
					p += MNL_ALIGN(a->nla_len);
				}
			}
			*failed_seq = e->msg.nlmsg_seq;
			*errno_out = -e->error;
			idx = e->msg.nlmsg_seq - bt->seq0 - 1;
			rc = pc_err_set(err,
					-e->error == EOPNOTSUPP || -e->error == ENOENT ? PC_EUNSUPP
										       : PC_EIO,
					"nf_tables refused %s: %s%s%s",
					idx < bt->nwhat ? bt->what[idx] : "a message",
					strerror(-e->error), ext[0] ? ": " : "", ext);
		}
	}
	return rc;
}

/* Send the batch (with or without BATCH_END) and check every ack. */
static int batch_send(struct batch *bt, bool commit, struct pc_err *err)
{
	struct mnl_socket *nl = NULL;
	uint32_t failed;
	int e = 0, rc;

	if (commit && !bt->err) {
		if (batch_room(bt) < 0)
			bt->err = PC_ENOMEM;
		else {
			nftnl_batch_end(batch_tail(bt), bt->seq++);
			batch_next(bt);
		}
	}
	if (bt->err)
		return pc_err_set(err, bt->err, "nf_tables batch: out of memory");
	rc = nl_open(&nl, err);
	if (rc)
		return rc;
	if (mnl_socket_sendto(nl, bt->buf, bt->len) < 0) {
		rc = pc_err_errno(err, errno == EPERM ? PC_EPERM : PC_EIO,
				  "sending nf_tables batch");
		goto out;
	}
	rc = read_acks(nl, bt, &failed, &e, err);
out:
	mnl_socket_close(nl);
	return rc;
}

/* Delete both of our tables if they exist (add, a no-op when present,
 * then delete), then create rs's objects (NULL: none), whose first is the
 * new table: one transaction, so packets see the old table or the new one,
 * never none. */
static int replace_tables(const struct nft_ruleset *rs, struct pc_err *err)
{
	struct batch bt;
	int rc;

	if (batch_init(&bt) < 0)
		return pc_err_set(err, PC_ENOMEM, "nf_tables batch: out of memory");
	for (int f = 0; f < 2; f++) {
		uint16_t fam = f ? NFPROTO_BRIDGE : NFPROTO_INET;

		batch_table(&bt, NFT_MSG_NEWTABLE, fam, NLM_F_CREATE);
		batch_table(&bt, NFT_MSG_DELTABLE, fam, 0);
	}
	for (size_t i = 0; rs && i < nft_ruleset_count(rs); i++)
		batch_obj(&bt, nft_ruleset_at(rs, i));
	rc = batch_send(&bt, true, err);
	batch_free(&bt);
	return rc;
}

int nft_apply(const struct nft_ruleset *rs, struct pc_err *err)
{
	return replace_tables(rs, err);
}

int nft_remove(struct pc_err *err)
{
	return replace_tables(NULL, err);
}

int nft_ports_update(const struct nft_port *ports, size_t n, struct pc_err *err)
{
	struct nftnl_set *s = nftset_ports(ports, n);
	struct nlmsghdr *nlh;
	struct batch bt;
	int rc;

	if (!s)
		return pc_err_set(err, PC_ENOMEM, "port set: out of memory");
	if (batch_init(&bt) < 0) {
		nftnl_set_free(s);
		return pc_err_set(err, PC_ENOMEM, "nf_tables batch: out of memory");
	}
	/* DELSETELEM without an element list flushes the set. */
	nlh = batch_msg(&bt, NFT_MSG_DELSETELEM, NFPROTO_BRIDGE, 0, "flush of set ports");
	if (nlh) {
		mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, NFT_TABLE);
		mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, NFT_SET_PORTS);
	}
	batch_next(&bt);
	if (!set_empty(s))
		batch_elems(&bt, s, NFPROTO_BRIDGE, NLM_F_CREATE, "elements of set ports");
	rc = batch_send(&bt, true, err);
	batch_free(&bt);
	nftnl_set_free(s);
	return rc;
}

/* One uncommitted try: a throw-away table, chain and a rule holding e. */
static int probe_expr(struct nftnl_expr *e, struct pc_err *err)
{
	char tname[32];
	struct nftnl_table *t = nftnl_table_alloc();
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nlmsghdr *nlh;
	struct batch bt;
	int rc = PC_ENOMEM;

	if (!t || !c || !r || !e || batch_init(&bt) < 0) {
		nftnl_table_free(t);
		nftnl_chain_free(c);
		nftnl_rule_free(r);
		nftnl_expr_free(e);
		return pc_err_set(err, PC_ENOMEM, "queue probe: out of memory");
	}
	snprintf(tname, sizeof(tname), "portcullis_probe_%d", (int)getpid());
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, tname);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, tname);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, "probe");
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, tname);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, "probe");
	nftnl_rule_add_expr(r, e);
	nlh = batch_msg(&bt, NFT_MSG_NEWTABLE, NFPROTO_INET, NLM_F_CREATE | NLM_F_EXCL,
			"probe table");
	if (nlh)
		nftnl_table_nlmsg_build_payload(nlh, t);
	batch_next(&bt);
	nlh = batch_msg(&bt, NFT_MSG_NEWCHAIN, NFPROTO_INET, NLM_F_CREATE, "probe chain");
	if (nlh)
		nftnl_chain_nlmsg_build_payload(nlh, c);
	batch_next(&bt);
	nlh = batch_msg(&bt, NFT_MSG_NEWRULE, NFPROTO_INET, NLM_F_CREATE | NLM_F_APPEND,
			"queue rule");
	if (nlh)
		nftnl_rule_nlmsg_build_payload(nlh, r);
	batch_next(&bt);
	/* No BATCH_END: the kernel checks every message, then aborts. */
	rc = batch_send(&bt, false, err);
	batch_free(&bt);
	nftnl_table_free(t);
	nftnl_chain_free(c);
	nftnl_rule_free(r);
	return rc;
}

int nft_probe_queue(enum nft_queue_path *out, struct pc_err *err)
{
	struct pc_err e1 = {0}, e2 = {0};
	int rc;

	rc = probe_expr(nft_expr_queue_native(0, 1), &e1);
	if (rc == 0) {
		*out = NFT_QUEUE_NATIVE;
		return 0;
	}
	if (rc == PC_EPERM)
		return pc_err_set(err, PC_EPERM, "%s", e1.msg);
	rc = probe_expr(nft_expr_queue_compat(0, 1), &e2);
	if (rc == 0) {
		*out = NFT_QUEUE_COMPAT;
		return 0;
	}
	return pc_err_set(
	    err, PC_EUNSUPP,
	    "the kernel takes neither the nft queue expression (%s) nor the xt NFQUEUE "
	    "target (%s)",
	    e1.msg, e2.msg);
}
