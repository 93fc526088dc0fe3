/* checker: tc qdiscs and filters (with their actions) on the sandbox ports
 * and the bridge, read over rtnetlink; and the bpf() queries for programs
 * tc and netlink do not show (tcx links, netfilter BPF links). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <linux/tc_act/tc_skbedit.h>

#include "checker/checker_int.h"

static void parse_act(struct ck_tcfilter *f, const struct nlattr *nest)
{
	const struct nlattr *a, *opts = NULL;
	struct ck_tcact *act;

	if (f->n_acts == CK_TC_ACTS) {
		f->acts_trunc = true;
		return;
	}
	act = &f->acts[f->n_acts++];
	memset(act, 0, sizeof(*act));
	act->mirred_ifindex = -1;
	mnl_attr_for_each_nested(a, nest)
	{
		if (mnl_attr_get_type(a) == TCA_ACT_KIND &&
		    mnl_attr_validate(a, MNL_TYPE_STRING) == 0)
			pc_strlcpy(act->kind, mnl_attr_get_str(a), sizeof(act->kind));
		else if (mnl_attr_get_type(a) == TCA_ACT_OPTIONS &&
			 mnl_attr_validate(a, MNL_TYPE_NESTED) == 0)
			opts = a;
	}
	if (!opts)
		return;
	mnl_attr_for_each_nested(a, opts)
	{
		uint16_t t = mnl_attr_get_type(a);

		if (strcmp(act->kind, "mirred") == 0 && t == TCA_MIRRED_PARMS &&
		    mnl_attr_get_payload_len(a) >= sizeof(struct tc_mirred)) {
			struct tc_mirred m;

			memcpy(&m, mnl_attr_get_payload(a), sizeof(m));
			act->mirred_eaction = m.eaction;
			act->mirred_ifindex = (int)m.ifindex;
		} else if (strcmp(act->kind, "skbedit") == 0 && t == TCA_SKBEDIT_MARK &&
			   mnl_attr_validate(a, MNL_TYPE_U32) == 0) {
			act->has_mark = true;
			act->mark = mnl_attr_get_u32(a);
			if (!act->mark_mask)
				act->mark_mask = 0xffffffffu;
		} else if (strcmp(act->kind, "skbedit") == 0 && t == TCA_SKBEDIT_PTYPE &&
			   mnl_attr_validate(a, MNL_TYPE_U16) == 0) {
			act->has_ptype = true;
			act->ptype = mnl_attr_get_u16(a);
		} else if (strcmp(act->kind, "skbedit") == 0 && t == TCA_SKBEDIT_MASK &&
			   mnl_attr_validate(a, MNL_TYPE_U32) == 0) {
			act->mark_mask = mnl_attr_get_u32(a);
		}
	}
}

static void parse_acts(struct ck_tcfilter *f, const struct nlattr *list)
{
	const struct nlattr *a;

	mnl_attr_for_each_nested(a, list)
	{
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) == 0)
			parse_act(f, a);
	}
}

/* The nested attribute that holds a classifier's actions. */
static int act_attr(const char *kind)
{
	if (strcmp(kind, "u32") == 0)
		return TCA_U32_ACT;
	if (strcmp(kind, "bpf") == 0)
		return TCA_BPF_ACT;
	if (strcmp(kind, "flower") == 0)
		return TCA_FLOWER_ACT;
	if (strcmp(kind, "matchall") == 0)
		return TCA_MATCHALL_ACT;
	if (strcmp(kind, "basic") == 0)
		return TCA_BASIC_ACT;
	return -1;
}

static int parse_filter(struct ck_state *st, const struct nlmsghdr *nlh)
{
	const struct tcmsg *t = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a, *opts = NULL;
	struct ck_tcfilter *f;
	int aa;

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*t))
		return PC_EPARSE;
	f = ck_grow(&st->filters, &st->n_filters, &st->cap_filters, sizeof(*f));
	if (!f)
		return PC_ENOMEM;
	f->ifindex = t->tcm_ifindex;
	f->parent = t->tcm_parent;
	f->handle = t->tcm_handle;
	f->prio = TC_H_MAJ(t->tcm_info) >> 16;
	f->proto = (uint16_t)TC_H_MIN(t->tcm_info);
	mnl_attr_for_each(a, nlh, sizeof(*t))
	{
		if (mnl_attr_get_type(a) == TCA_KIND && mnl_attr_validate(a, MNL_TYPE_STRING) == 0)
			pc_strlcpy(f->kind, mnl_attr_get_str(a), sizeof(f->kind));
		else if (mnl_attr_get_type(a) == TCA_OPTIONS &&
			 mnl_attr_validate(a, MNL_TYPE_NESTED) == 0)
			opts = a;
	}
	aa = act_attr(f->kind);
	if (!opts)
		return 0;
	mnl_attr_for_each_nested(a, opts)
	{
		uint16_t ty = mnl_attr_get_type(a);

		if ((int)ty == aa && mnl_attr_validate(a, MNL_TYPE_NESTED) == 0)
			parse_acts(f, a);
		if (strcmp(f->kind, "bpf") == 0) {
			if (ty == TCA_BPF_ID && mnl_attr_validate(a, MNL_TYPE_U32) == 0)
				f->bpf_id = mnl_attr_get_u32(a);
			else if (ty == TCA_BPF_NAME && mnl_attr_validate(a, MNL_TYPE_STRING) == 0)
				pc_strlcpy(f->bpf_name, mnl_attr_get_str(a), sizeof(f->bpf_name));
			else if (ty == TCA_BPF_FLAGS && mnl_attr_validate(a, MNL_TYPE_U32) == 0)
				f->bpf_da = mnl_attr_get_u32(a) & TCA_BPF_FLAG_ACT_DIRECT;
		}
	}
	return 0;
}

/* A qdisc (into st->qdiscs) or a class (into st->classes): the same
 * fields say where each is. */
static int parse_qdisc(struct ck_state *st, const struct nlmsghdr *nlh, bool class)
{
	const struct tcmsg *t = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	struct ck_qdisc *q;

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*t))
		return PC_EPARSE;
	q = class ? ck_grow(&st->classes, &st->n_classes, &st->cap_classes, sizeof(*q))
		  : ck_grow(&st->qdiscs, &st->n_qdiscs, &st->cap_qdiscs, sizeof(*q));
	if (!q)
		return PC_ENOMEM;
	q->ifindex = t->tcm_ifindex;
	q->handle = t->tcm_handle;
	q->parent = t->tcm_parent;
	mnl_attr_for_each(a, nlh, sizeof(*t))
	{
		if (mnl_attr_get_type(a) == TCA_KIND && mnl_attr_validate(a, MNL_TYPE_STRING) == 0)
			pc_strlcpy(q->kind, mnl_attr_get_str(a), sizeof(q->kind));
	}
	return 0;
}

int ck_tc_parse(struct ck_state *st, const void *buf, size_t len, struct pc_err *err)
{
	const struct nlmsghdr *nlh = buf;
	int n = (int)(len > INT32_MAX ? INT32_MAX : len);

	for (; ck_nlmsg_ok(nlh, n); nlh = mnl_nlmsg_next(nlh, &n)) {
		int rc = 0;

		if (nlh->nlmsg_type == RTM_NEWTFILTER)
			rc = parse_filter(st, nlh);
		else if (nlh->nlmsg_type == RTM_NEWQDISC || nlh->nlmsg_type == RTM_NEWTCLASS)
			rc = parse_qdisc(st, nlh, nlh->nlmsg_type == RTM_NEWTCLASS);
		if (rc < 0)
			return pc_err_set(err, rc, "tc: malformed message");
	}
	return 0;
}

/* One tc dump (qdiscs, classes or filters of ifindex at parent) into st. */
static int tc_dump(struct ck_state *st, uint16_t type, int ifindex, uint32_t parent,
		   struct pc_err *err)
{
	struct tcmsg t = {.tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex, .tcm_parent = parent};
	struct pc_buf b = {0};
	int rc = ck_rtnl_dump(type, &t, sizeof(t), &b, err);

	if (rc == 0)
		rc = ck_tc_parse(st, b.p, b.len, err);
	pc_buf_free(&b);
	return rc;
}

/* The filters a packet meets at (ifindex, parent): a qdisc's, a class's or
 * a clsact hook's. They are said to be there whatever the messages say: a
 * hook bound to a shared block (`clsact ingress_block N`) answers with the
 * block's filters, under TCM_IFINDEX_MAGIC_BLOCK and the block's index,
 * which matched no device, so a filter added to the block (`tc filter add
 * block N`) was judged nowhere. */
static int dump_filters(struct ck_state *st, int ifindex, uint32_t parent, struct pc_err *err)
{
	size_t before = st->n_filters;
	int rc = tc_dump(st, RTM_GETTFILTER, ifindex, parent, err);

	for (size_t i = before; rc == 0 && i < st->n_filters; i++) {
		st->filters[i].ifindex = ifindex;
		st->filters[i].parent = parent;
	}
	return rc;
}

/* The filters under each of one device's qdiscs st->qdiscs[from..to), and
 * under each class of its classful ones: a filter attached to a class
 * (`tc filter add dev D parent 1:10`) is in the class's own block, which a
 * dump of its qdisc's handle does not list. */
static int link_filters(struct ck_state *st, int ifindex, size_t from, size_t to,
			struct pc_err *err)
{
	bool classful = false;

	for (size_t i = from; i < to; i++) {
		/* copies: a dump's messages are parsed into st, which may move */
		bool clsact = strcmp(st->qdiscs[i].kind, "clsact") == 0;
		bool ingress = strcmp(st->qdiscs[i].kind, "ingress") == 0;
		uint32_t handle = st->qdiscs[i].handle;
		int rc = 0;

		if (clsact || ingress) {
			rc = dump_filters(st, ifindex, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS),
					  err);
			if (rc == 0 && clsact)
				rc = dump_filters(st, ifindex,
						  TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), err);
		} else if (handle) {
			rc = dump_filters(st, ifindex, handle, err);
		}
		if (rc < 0)
			return rc;
		/* Which kinds have classes is the kernel's to say: every
		 * qdisc but the three that never do is asked (a veth's
		 * noqueue, the default, costs nothing at 1,000 ports). */
		classful |= !clsact && !ingress && strcmp(st->qdiscs[i].kind, "noqueue") != 0;
	}
	if (classful) {
		size_t c0 = st->n_classes;
		int rc = tc_dump(st, RTM_GETTCLASS, ifindex, 0, err);

		for (size_t i = c0; rc == 0 && i < st->n_classes; i++)
			if (st->classes[i].ifindex == ifindex && TC_H_MIN(st->classes[i].handle))
				rc = dump_filters(st, ifindex, st->classes[i].handle, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* By device, each device's in the kernel's order: as the sysctl index,
 * pointers into the dump, equal devices by their place in it. */
static int qd_ix_cmp(const void *x, const void *y)
{
	const struct ck_qdisc *a = *(const struct ck_qdisc *const *)x;
	const struct ck_qdisc *b = *(const struct ck_qdisc *const *)y;

	if (a->ifindex != b->ifindex)
		return a->ifindex < b->ifindex ? -1 : 1;
	return (a > b) - (a < b);
}

/* One dump of every device's qdiscs, not one per device: without strict
 * checking the kernel answers a qdisc dump with every device's qdiscs
 * whatever tcm_ifindex says, so a dump per link was quadratic (at 1,000
 * bridge ports, half of `portcullis check`); and each link finds its own
 * in the dump sorted by device, not by a scan of all of them.
 * Kept in link order, each device's in the kernel's order; a device that
 * appeared after the link dump is not in the model, as before. */
int ck_tc_read(struct ck_state *st, struct pc_err *err)
{
	struct ck_state all = {0};
	const struct ck_qdisc **ix = NULL;
	int rc = tc_dump(&all, RTM_GETQDISC, 0, 0, err);

	if (rc == 0 && all.n_qdiscs) {
		ix = malloc(all.n_qdiscs * sizeof(*ix));
		if (!ix) {
			rc = pc_err_set(err, PC_ENOMEM, "tc: out of memory");
		} else {
			for (size_t i = 0; i < all.n_qdiscs; i++)
				ix[i] = &all.qdiscs[i];
			qsort(ix, all.n_qdiscs, sizeof(*ix), qd_ix_cmp);
		}
	}
	for (size_t l = 0; rc == 0 && l < st->n_links; l++) {
		int ifindex = st->links[l].ifindex;
		size_t before = st->n_qdiscs, lo = 0, hi = all.n_qdiscs;

		while (lo < hi) { /* the first of ifindex's, or where it would be */
			size_t mid = lo + (hi - lo) / 2;

			if (ix[mid]->ifindex < ifindex)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t i = lo; rc == 0 && i < all.n_qdiscs; i++) {
			struct ck_qdisc *q;

			if (ix[i]->ifindex != ifindex)
				break;
			q = ck_grow(&st->qdiscs, &st->n_qdiscs, &st->cap_qdiscs, sizeof(*q));
			if (!q)
				rc = pc_err_set(err, PC_ENOMEM, "tc: out of memory");
			else
				*q = *ix[i];
		}
		if (rc == 0)
			rc = link_filters(st, ifindex, before, st->n_qdiscs, err);
	}
	free(ix);
	ck_state_free(&all);
	return rc;
}

static long bpf_sys(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/* Number of programs attached at (ifindex, type), -1 when unknown. */
static int tcx_count(int ifindex, enum bpf_attach_type type)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.query.target_fd = (uint32_t)ifindex; /* union with target_ifindex */
	attr.query.attach_type = type;
	if (bpf_sys(BPF_PROG_QUERY, &attr) < 0)
		return errno == EINVAL || errno == ENOENT ? 0 : -1;
	return (int)attr.query.prog_cnt;
}

void ck_bpf_probe(struct ck_state *st)
{
	union bpf_attr attr;
	uint32_t id = 0;
	int n = 0;

	for (size_t i = 0; i < st->n_links; i++) {
		/* tcx attach types are 46/47 in kernels >= 6.6 (enum bpf_attach_type) */
		st->links[i].tcx_ingress =
		    tcx_count(st->links[i].ifindex, (enum bpf_attach_type)46);
		st->links[i].tcx_egress = tcx_count(st->links[i].ifindex, (enum bpf_attach_type)47);
	}
	/* netfilter BPF links are invisible to nftables dumps */
	for (;;) {
		int fd;
		struct bpf_link_info info;

		memset(&attr, 0, sizeof(attr));
		attr.start_id = id;
		if (bpf_sys(BPF_LINK_GET_NEXT_ID, &attr) < 0) {
			if (errno != ENOENT)
				n = -1;
			break;
		}
		id = attr.next_id;
		memset(&attr, 0, sizeof(attr));
		attr.link_id = id;
		fd = (int)bpf_sys(BPF_LINK_GET_FD_BY_ID, &attr);
		if (fd < 0)
			continue; /* went away */
		memset(&info, 0, sizeof(info));
		memset(&attr, 0, sizeof(attr));
		attr.info.bpf_fd = (uint32_t)fd;
		attr.info.info_len = sizeof(info);
		attr.info.info = (uint64_t)(uintptr_t)&info;
		if (bpf_sys(BPF_OBJ_GET_INFO_BY_FD, &attr) == 0 && info.type == 10 /* NETFILTER */)
			n++;
		close(fd);
	}
	st->nf_bpf_links = n;
}
