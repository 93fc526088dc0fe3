/* ctnetlink over libmnl: list the conntrack entries carrying our mark and
 * delete the ones a new policy no longer allows (reload), or just count
 * them (housekeeping). */
#include "engine/engine_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>

struct ct_list {
	struct ct_tuple *t;
	size_t n, cap;
	int err;
};

static int nest_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(a);

	if (type <= CTA_MAX)
		tb[type] = a;
	return MNL_CB_OK;
}

static void parse_nest(const struct nlattr *nest, const struct nlattr **tb, size_t n)
{
	memset(tb, 0, n * sizeof(*tb));
	mnl_attr_parse_nested(nest, nest_cb, tb);
}

static bool tuple_parse(const struct nlattr *orig, uint8_t family, struct ct_tuple *t)
{
	const struct nlattr *tt[CTA_MAX + 1], *ip[CTA_MAX + 1], *pr[CTA_MAX + 1];
	size_t alen = family == AF_INET ? 4 : 16;
	int s = family == AF_INET ? CTA_IP_V4_SRC : CTA_IP_V6_SRC;
	int d = family == AF_INET ? CTA_IP_V4_DST : CTA_IP_V6_DST;

	parse_nest(orig, tt, CTA_MAX + 1);
	if (!tt[CTA_TUPLE_IP] || !tt[CTA_TUPLE_PROTO])
		return false;
	parse_nest(tt[CTA_TUPLE_IP], ip, CTA_MAX + 1);
	parse_nest(tt[CTA_TUPLE_PROTO], pr, CTA_MAX + 1);
	if (!ip[s] || !ip[d] || mnl_attr_get_payload_len(ip[s]) != alen ||
	    mnl_attr_get_payload_len(ip[d]) != alen || !pr[CTA_PROTO_NUM])
		return false;
	t->family = family;
	t->src.family = t->dst.family = family;
	memcpy(t->src.a, mnl_attr_get_payload(ip[s]), alen);
	memcpy(t->dst.a, mnl_attr_get_payload(ip[d]), alen);
	t->proto = mnl_attr_get_u8(pr[CTA_PROTO_NUM]);
	if (pr[CTA_PROTO_SRC_PORT])
		t->sport = ntohs(mnl_attr_get_u16(pr[CTA_PROTO_SRC_PORT]));
	if (pr[CTA_PROTO_DST_PORT])
		t->dport = ntohs(mnl_attr_get_u16(pr[CTA_PROTO_DST_PORT]));
	return true;
}

static int ct_cb(const struct nlmsghdr *nlh, void *data)
{
	struct ct_list *l = data;
	const struct nfgenmsg *nfg = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *tb[CTA_MAX + 1];
	struct ct_tuple t;

	memset(tb, 0, sizeof(tb));
	memset(&t, 0, sizeof(t));
	if (mnl_attr_parse(nlh, sizeof(*nfg), nest_cb, tb) < 0 || !tb[CTA_TUPLE_ORIG])
		return MNL_CB_OK;
	if (nfg->nfgen_family != AF_INET && nfg->nfgen_family != AF_INET6)
		return MNL_CB_OK;
	if (!tuple_parse(tb[CTA_TUPLE_ORIG], nfg->nfgen_family, &t))
		return MNL_CB_OK;
	if (tb[CTA_MARK])
		t.mark = ntohl(mnl_attr_get_u32(tb[CTA_MARK]));
	if (tb[CTA_ID])
		t.id = ntohl(mnl_attr_get_u32(tb[CTA_ID]));
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct ct_tuple *nt = realloc(l->t, cap * sizeof(*nt));

		if (!nt) {
			l->err = PC_ENOMEM;
			return MNL_CB_ERROR;
		}
		l->t = nt;
		l->cap = cap;
	}
	l->t[l->n++] = t;
	return MNL_CB_OK;
}

static struct nlmsghdr *ct_msg(char *buf, uint16_t type, uint16_t flags, uint8_t family,
			       uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;

	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = family;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = 0;
	return nlh;
}

static int ct_open(struct mnl_socket **out, struct pc_err *err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);

	if (!nl)
		return pc_err_errno(err, PC_EIO, "ctnetlink socket");
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(nl);
		return pc_err_errno(err, PC_EIO, "ctnetlink bind");
	}
	*out = nl;
	return 0;
}

int ct_dump_marked(uint32_t value, uint32_t mask, int (*visit)(const struct ct_tuple *t, void *arg),
		   void *arg, struct pc_err *err)
{
	char buf[32768]; /* a dump datagram holds many entries */
	struct mnl_socket *nl;
	struct nlmsghdr *nlh;
	struct ct_list l = {0};
	uint32_t seq = (uint32_t)pc_now_mono_ms();
	ssize_t r;
	int rc;

	rc = ct_open(&nl, err);
	if (rc)
		return rc;
	/* The kernel filters the dump by mark itself. */
	nlh = ct_msg(buf, IPCTNL_MSG_CT_GET, NLM_F_DUMP, AF_UNSPEC, seq);
	mnl_attr_put_u32(nlh, CTA_MARK, htonl(value & mask));
	mnl_attr_put_u32(nlh, CTA_MARK_MASK, htonl(mask));
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		rc = pc_err_errno(err, PC_EIO, "conntrack dump");
		goto out;
	}
	while ((r = mnl_socket_recvfrom(nl, buf, sizeof(buf))) > 0) {
		int cb = mnl_cb_run(buf, (size_t)r, seq, mnl_socket_get_portid(nl), ct_cb, &l);

		if (cb == MNL_CB_STOP)
			break;
		if (cb < 0) {
			rc = l.err ? pc_err_set(err, l.err, "conntrack dump: out of memory")
				   : pc_err_errno(err, PC_EIO, "conntrack dump");
			goto out;
		}
	}
	if (r < 0) {
		rc = pc_err_errno(err, PC_EIO, "conntrack dump");
		goto out;
	}
	/* Visit after the dump: deleting while dumping could skip entries. */
	for (size_t i = 0; i < l.n; i++)
		if ((l.t[i].mark & mask) == (value & mask))
			visit(&l.t[i], arg);
out:
	free(l.t);
	mnl_socket_close(nl);
	return rc;
}

static void put_tuple(struct nlmsghdr *nlh, const struct ct_tuple *t)
{
	struct nlattr *o = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG), *n;
	size_t alen = t->family == AF_INET ? 4 : 16;

	n = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
	mnl_attr_put(nlh, t->family == AF_INET ? CTA_IP_V4_SRC : CTA_IP_V6_SRC, alen, t->src.a);
	mnl_attr_put(nlh, t->family == AF_INET ? CTA_IP_V4_DST : CTA_IP_V6_DST, alen, t->dst.a);
	mnl_attr_nest_end(nlh, n);
	n = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
	mnl_attr_put_u8(nlh, CTA_PROTO_NUM, t->proto);
	if (t->proto == IPPROTO_TCP || t->proto == IPPROTO_UDP || t->proto == IPPROTO_SCTP ||
	    t->proto == IPPROTO_UDPLITE || t->proto == IPPROTO_DCCP) {
		mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, htons(t->sport));
		mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, htons(t->dport));
	}
	mnl_attr_nest_end(nlh, n);
	mnl_attr_nest_end(nlh, o);
}

int ct_delete(const struct ct_tuple *t, struct pc_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl;
	struct nlmsghdr *nlh;
	uint32_t seq = (uint32_t)pc_now_mono_ms();
	ssize_t r;
	int rc;

	if (t->proto != IPPROTO_TCP && t->proto != IPPROTO_UDP)
		return pc_err_set(err, PC_EINVAL, "conntrack delete: protocol %u", t->proto);
	rc = ct_open(&nl, err);
	if (rc)
		return rc;
	/* zeroed: libmnl 1.0.4 leaves the padding after the u8 and u16
	 * attributes unwritten, and the kernel gets the whole message */
	memset(buf, 0, sizeof(buf));
	nlh = ct_msg(buf, IPCTNL_MSG_CT_DELETE, NLM_F_ACK, t->family, seq);
	put_tuple(nlh, t);
	if (t->id)
		mnl_attr_put_u32(nlh, CTA_ID, htonl(t->id));
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		rc = pc_err_errno(err, PC_EIO, "conntrack delete");
		goto out;
	}
	r = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (r < 0) {
		rc = pc_err_errno(err, PC_EIO, "conntrack delete");
		goto out;
	}
	if (mnl_cb_run(buf, (size_t)r, seq, mnl_socket_get_portid(nl), NULL, NULL) < 0 &&
	    errno != ENOENT)
		rc = pc_err_errno(err, PC_EIO, "conntrack delete");
out:
	mnl_socket_close(nl);
	return rc;
}
