/* Sandboxes cut off while containment is in doubt (issue 18, point 2):
 * from the moment another program changes nftables until a containment
 * check requested after that change proves the guard again, every port of
 * the sandbox bridge is down. docs/engine.md, "Cut off until proven". */
#include "engine/engine_int.h"

#include <errno.h>
#include <net/if.h>
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

#define CUTOFF_LOG_MS 2000
/* How long after a lift the bridge's one carrier event may still come:
 * the kernel's link watch delays it by up to a second, more on a busy
 * machine. */
#define CUTOFF_CARRIER_MS 3000

/* A port's IFF_UP: 1 up, 0 down, <0 gone or unreadable. Plain interface
 * ioctls: the engine keeps CAP_NET_ADMIN, which is all SIOCSIFFLAGS needs. */
static int port_up(int s, const char *name)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	pc_strlcpy(ifr.ifr_name, name, sizeof(ifr.ifr_name));
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return PC_EIO;
	return (ifr.ifr_flags & IFF_UP) != 0;
}

static int port_set(int s, const char *name, bool up)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	pc_strlcpy(ifr.ifr_name, name, sizeof(ifr.ifr_name));
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return PC_EIO;
	if (up)
		ifr.ifr_flags |= IFF_UP;
	else
		ifr.ifr_flags &= ~IFF_UP;
	return ioctl(s, SIOCSIFFLAGS, &ifr) < 0 ? PC_EIO : 0;
}

static bool downed_has(const struct engine_cutoff *c, uint32_t ifindex)
{
	for (size_t i = 0; i < c->n_downed; i++)
		if (c->downed[i].ifindex == ifindex)
			return true;
	return false;
}

/* One record with logd from the control thread (best effort, as the
 * policy and check records: the journal has it either way). */
static void cutoff_record(struct engine *e, bool cut, const char *msg)
{
	struct policy *pol = engine_policy_get(e);
	struct logrec r = {.action = LOGREC_CHECK};
	struct pc_err err = {0};

	r.verdict = cut ? LOGREC_REFUSED : LOGREC_ALLOWED;
	r.policy = pol ? policy_hash(pol) : NULL;
	r.reason = cut ? "sandboxes cut off until containment is proven again"
		       : "sandboxes' service resumed: containment proven again";
	r.message = msg;
	if (e->ctl_lc && logc_send_sync(e->ctl_lc, &r, CUTOFF_LOG_MS, &err) < 0)
		pc_log(PC_LOG_WARN, "cut-off record not logged: %s", err.msg);
	policy_unref(pol);
}

void cutoff_enforce(struct engine *e)
{
	struct engine_cutoff *c = &e->cut;
	size_t failed = 0;
	int s;

	if (!c->active)
		return;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		c->failures++;
		pc_log(PC_LOG_ERR, "cut-off: socket: %s (sandbox ports left as they are)",
		       strerror(errno));
		return;
	}
	pthread_rwlock_rdlock(&e->ports.lock);
	for (size_t i = 0; i < e->ports.n; i++) {
		const struct nft_port *p = &e->ports.ports[i];
		int up = port_up(s, p->name);

		if (up <= 0)
			continue; /* down already (ours or the admin's), or gone */
		if (port_set(s, p->name, false) < 0) {
			failed++;
			pc_log(PC_LOG_ERR, "cut-off: taking port %s down: %s", p->name,
			       strerror(errno));
			continue;
		}
		if (downed_has(c, p->ifindex))
			continue;
		if (c->n_downed == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 16;
			struct nft_port *n = realloc(c->downed, cap * sizeof(*n));

			if (!n) {
				/* down it stays: fail closed, but not brought back up
				 * by itself (said so) */
				pc_log(PC_LOG_ERR,
				       "cut-off: out of memory: port %s stays down after the "
				       "cut-off ends (ip link set %s up)",
				       p->name, p->name);
				continue;
			}
			c->downed = n;
			c->cap = cap;
		}
		c->downed[c->n_downed++] = *p;
	}
	pthread_rwlock_unlock(&e->ports.lock);
	close(s);
	c->failures += failed;
}

void cutoff_begin(struct engine *e, const char *why)
{
	struct engine_cutoff *c = &e->cut;
	char msg[400];

	c->seq++;
	if (!c->active) {
		c->active = true;
		c->since_ms = pc_now_real_ms();
		c->since_mono = pc_now_mono_ms();
		c->count++;
		pc_strlcpy(c->why, why, sizeof(c->why));
		cutoff_enforce(e);
		snprintf(msg, sizeof(msg),
			 "bridge %s: sandboxes cut off (%zu port%s down) after %s, until a "
			 "containment check proves the guard again",
			 e->cfg.bridge, c->n_downed, c->n_downed == 1 ? "" : "s", why);
		pc_log(PC_LOG_ERR, "%s", msg);
		cutoff_record(e, true, msg);
	} else {
		pc_strlcpy(c->why, why, sizeof(c->why));
		cutoff_enforce(e); /* a port attached meanwhile */
		pc_log(PC_LOG_WARN, "bridge %s: sandboxes stay cut off: %s", e->cfg.bridge, why);
	}
	if (e->chk.fd < 0)
		pc_log(PC_LOG_ERR, "cut-off: no check helper to prove containment again: the "
				   "sandboxes stay cut off until portcullisd is restarted");
}

/* Bring up what the cut-off took down (the same device: name and ifindex). */
static void ports_restore(struct engine *e)
{
	struct engine_cutoff *c = &e->cut;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	for (size_t i = 0; i < c->n_downed; i++) {
		const struct nft_port *p = &c->downed[i];

		if (if_nametoindex(p->name) != p->ifindex)
			continue; /* gone, or another device now */
		if (s < 0 || port_set(s, p->name, true) < 0)
			pc_log(PC_LOG_ERR, "cut-off ended, but port %s could not be brought up: %s",
			       p->name, strerror(errno));
	}
	if (s >= 0)
		close(s);
	if (c->n_downed)
		c->br_lift_ms = pc_now_mono_ms() + CUTOFF_CARRIER_MS;
	c->n_downed = 0;
}

void cutoff_check_done(struct engine *e, int result)
{
	struct engine_cutoff *c = &e->cut;
	char msg[400];

	if (result == CHECKER_PROVEN || result == CHECKRUN_ERROR)
		c->confirming = false; /* a loss not confirmed (cutoff_on_loss) */
	if (result == CHECKER_PROVEN)
		c->armed = true;
	if (!c->active)
		return;
	if (result != CHECKER_PROVEN) {
		pc_log(PC_LOG_ERR,
		       "bridge %s: sandboxes stay cut off: containment %s (portcullis check "
		       "names why; they resume once a check proves it)",
		       e->cfg.bridge, checkrun_result_name(result));
		return;
	}
	if (e->chk.cut_seq != c->seq)
		return; /* the check began before the last change: one more follows */
	snprintf(msg, sizeof(msg),
		 "bridge %s: service resumed after %llu ms cut off (%zu port%s up again): "
		 "containment proven after %s",
		 e->cfg.bridge, (unsigned long long)(pc_now_mono_ms() - c->since_mono), c->n_downed,
		 c->n_downed == 1 ? "" : "s", c->why);
	ports_restore(e);
	c->active = false;
	pc_log(PC_LOG_NOTICE, "%s", msg);
	cutoff_record(e, false, msg);
}

/* Containment lost: something the engine was not told of as a foreign
 * change (a device stacked on the bridge in another namespace, a sysctl,
 * an iptables-legacy table) opened a way out while the sandboxes were
 * being served. The check that found it is the evidence; waiting for
 * someone to read the journal is not fail closed. Only once a check has
 * proven containment since the engine started: a gateway that never did
 * is not served on the engine's say-so either (docs/engine.md), and
 * cutting it off at each check would make every check a cut-off. Only a
 * check of a link event or of the interval: one of a port set being built
 * (a thousand VMs starting) may meet a port half made. */
void cutoff_on_loss(struct engine *e)
{
	struct engine_cutoff *c = &e->cut;
	char why[sizeof(c->why)];
	bool watched = strcmp(e->chk.done_trigger, "links") == 0 ||
		       strcmp(e->chk.done_trigger, "periodic") == 0;

	/* (called with a check's decoded answer that is not proven: proven
	 * and failed checks end a confirmation in cutoff_check_done) */
	if (c->active || !watched) {
		c->confirming = false;
		return;
	}
	if (!c->confirming) {
		if (!c->armed)
			return;
		/* Once more before the cut: a state in the making (a port
		 * half made) fails one check and passes the next. A way out
		 * stays one. */
		c->confirming = true;
		checkrun_request(e, e->chk.done_trigger);
		return;
	}
	c->confirming = false;
	snprintf(why, sizeof(why), "containment lost (%s): %.120s",
		 checkrun_result_name(e->chk.result), e->chk.first);
	cutoff_begin(e, why);
	checkrun_request(e, "cutoff"); /* only one asked for after the cut may lift it */
}

void cutoff_shutdown(struct engine *e)
{
	if (e->cut.active && e->cfg.engine.remove_on_exit) {
		/* the tables go too: nothing of the guard is left behind */
		ports_restore(e);
		e->cut.active = false;
	} else if (e->cut.active) {
		pc_log(PC_LOG_WARN,
		       "bridge %s: stopping while the sandboxes are cut off: %zu port%s stay down "
		       "(ip link set PORT up once portcullis check proves the guard)",
		       e->cfg.bridge, e->cut.n_downed, e->cut.n_downed == 1 ? "" : "s");
	}
	free(e->cut.downed);
	e->cut.downed = NULL;
	e->cut.n_downed = e->cut.cap = 0;
}

/* ---- routing and link events (issue 31) ----------------------------------
 * The blackhole that holds without the ruleset is made of routing rules
 * and two tables the checker reads in full (checker/routing.c): a change
 * there by another program is the routing twin of a foreign nftables batch
 * and cuts the sandboxes off the same way; and while they are cut off,
 * every route, rule and link event may be the one that undoes what the
 * last check found, so each is checked again. */

/* Is this rule one the engine adds (engine/routing.c), attribute for
 * attribute? *prio: its priority. */
static bool rule_ours(const struct nlmsghdr *nlh, const char *br, uint32_t *prio)
{
	static const uint32_t marks[NFT_ROUTE_N_MARKS] = NFT_ROUTE_MARKS;
	const struct fib_rule_hdr *h = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	uint32_t table = h->table, mark = 0, mask = 0;
	bool iif = false, other = false;

	*prio = 0;
	mnl_attr_for_each(a, nlh, sizeof(*h))
	{
		bool u32 = mnl_attr_validate(a, MNL_TYPE_U32) == 0;

		switch (mnl_attr_get_type(a)) {
		case FRA_PRIORITY:
			*prio = u32 ? mnl_attr_get_u32(a) : UINT32_MAX;
			break;
		case FRA_TABLE:
			table = u32 ? mnl_attr_get_u32(a) : 0;
			break;
		case FRA_FWMARK:
			mark = u32 ? mnl_attr_get_u32(a) : 0;
			break;
		case FRA_FWMASK:
			mask = u32 ? mnl_attr_get_u32(a) : 0;
			break;
		case FRA_IIFNAME:
			iif = mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0 &&
			      strcmp(mnl_attr_get_str(a), br) == 0;
			break;
		case FRA_PROTOCOL: /* who added it */
			break;
		case FRA_SUPPRESS_PREFIXLEN: /* in every dump and event; -1: not set */
		case FRA_SUPPRESS_IFGROUP:
			other = other || !u32 || mnl_attr_get_u32(a) != UINT32_MAX;
			break;
		default:
			other = true;
			break;
		}
	}
	if (other || !iif || h->action != FR_ACT_TO_TBL || h->src_len || h->dst_len || h->tos ||
	    (h->flags & FIB_RULE_INVERT))
		return false;
	if (*prio == NFT_ROUTE_PRIO_DROP)
		return table == NFT_ROUTE_TABLE && !mark && !mask;
	for (uint32_t i = 0; i < NFT_ROUTE_N_MARKS; i++)
		if (*prio == NFT_ROUTE_PRIO_MARK + i)
			return table == RT_TABLE_MAIN && mark == marks[i] && mask == marks[i];
	return false;
}

static void ev_note(struct cutoff_events *ev, bool foreign, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ev_note(struct cutoff_events *ev, bool foreign, const char *fmt, ...)
{
	va_list ap;

	if ((foreign && !ev->foreign) || !ev->change) {
		va_start(ap, fmt);
		vsnprintf(ev->what, sizeof(ev->what), fmt, ap);
		va_end(ap);
	}
	ev->change = true;
	ev->foreign = ev->foreign || foreign;
}

static void route_event(struct cutoff_events *ev, const struct nlmsghdr *nlh)
{
	const struct rtmsg *rt = mnl_nlmsg_get_payload(nlh);
	const char *v = rt->rtm_family == AF_INET6 ? "IPv6" : "IPv4";
	bool add = nlh->nlmsg_type == RTM_NEWROUTE;
	uint8_t dst[16] = {0};
	uint32_t table = rt->rtm_table, oif = 0;
	const struct nlattr *a;

	mnl_attr_for_each(a, nlh, sizeof(*rt))
	{
		size_t alen = mnl_attr_get_payload_len(a);

		if (mnl_attr_get_type(a) == RTA_TABLE && alen == 4)
			table = mnl_attr_get_u32(a);
		else if (mnl_attr_get_type(a) == RTA_OIF && alen == 4)
			oif = mnl_attr_get_u32(a);
		else if (mnl_attr_get_type(a) == RTA_DST && alen <= sizeof(dst))
			memcpy(dst, mnl_attr_get_payload(a), alen);
	}
	if (!add && oif && downed_has(&ev->e->cut, oif))
		return; /* a port the cut-off took down loses its routes */
	if (table == NFT_ROUTE_TABLE) {
		if (rt->rtm_type == RTN_BLACKHOLE && !rt->rtm_dst_len && !rt->rtm_src_len &&
		    !rt->rtm_tos) {
			/* ours, as routing_ensure adds it; removed, it puts it back */
			if (!add)
				ev_note(ev, false, "the %s blackhole default of the engine removed",
					v);
			return;
		}
		ev->rules = ev->rules || !add;
		ev_note(ev, add, "another program %s a %s route %s the blackhole table %u",
			add ? "added" : "removed", v, add ? "to" : "from", NFT_ROUTE_TABLE);
		return;
	}
	if (table == RT_TABLE_LOCAL && add &&
	    checker_route_forwards(rt->rtm_family, rt->rtm_type, dst, rt->rtm_dst_len)) {
		ev_note(ev, true, "another program added a forwarding %s route to table local", v);
		return;
	}
	ev_note(ev, false, "%s route %s (table %u)", v, add ? "added" : "removed", table);
}

static void rule_event(struct cutoff_events *ev, const struct nlmsghdr *nlh)
{
	const struct fib_rule_hdr *h = mnl_nlmsg_get_payload(nlh);
	const char *v = h->family == AF_INET6 ? "IPv6" : "IPv4";
	bool add = nlh->nlmsg_type == RTM_NEWRULE;
	uint32_t prio;

	if (rule_ours(nlh, ev->e->cfg.bridge, &prio)) {
		if (!add) /* routing_ensure puts it back; the check after it reads it */
			ev_note(ev, false, "%s routing rule %u of the engine removed", v, prio);
		return;
	}
	ev->rules = true;
	/* a rule after our found-all never sees bridge traffic while it holds */
	ev_note(ev, add && prio <= NFT_ROUTE_PRIO_DROP, "another program %s %s routing rule %u",
		add ? "added" : "removed", v, prio);
}

static bool is_port(struct engine *e, uint32_t ifindex)
{
	bool found = false;

	pthread_rwlock_rdlock(&e->ports.lock);
	for (size_t i = 0; i < e->ports.n && !found; i++)
		found = e->ports.ports[i].ifindex == ifindex;
	pthread_rwlock_unlock(&e->ports.lock);
	return found;
}

/* What a link message says of the device, read once. The name is the
 * message's own (IFLA_IFNAME): a device removed, or moved to another
 * namespace, has no name here any more for if_indextoname to find, or
 * another device took its index. */
struct link_msg {
	uint32_t lower; /* IFLA_LINK, 0 if none */
	bool other_ns;	/* IFLA_LINK_NETNSID: the lower is in another namespace */
	char kind[16];	/* IFLA_INFO_KIND, "" if none */
	char name[IF_NAMESIZE];
};

static void link_msg_read(const struct nlmsghdr *nlh, struct link_msg *m)
{
	const struct nlattr *a, *k;

	memset(m, 0, sizeof(*m));
	mnl_attr_for_each(a, nlh, sizeof(struct ifinfomsg))
	{
		switch (mnl_attr_get_type(a)) {
		case IFLA_LINK:
			if (mnl_attr_validate(a, MNL_TYPE_U32) == 0)
				m->lower = mnl_attr_get_u32(a);
			break;
		case IFLA_LINK_NETNSID:
			m->other_ns = true;
			break;
		case IFLA_IFNAME:
			snprintf(m->name, sizeof(m->name), "%.*s",
				 (int)strnlen(mnl_attr_get_payload(a), mnl_attr_get_payload_len(a)),
				 (const char *)mnl_attr_get_payload(a));
			break;
		case IFLA_LINKINFO:
			mnl_attr_for_each_nested(k, a)
			{
				if (mnl_attr_get_type(k) == IFLA_INFO_KIND &&
				    mnl_attr_validate(k, MNL_TYPE_STRING) == 0)
					snprintf(m->kind, sizeof(m->kind), "%.*s",
						 (int)strnlen(mnl_attr_get_payload(k),
							      mnl_attr_get_payload_len(k)),
						 (const char *)mnl_attr_get_payload(k));
			}
			break;
		default:
			break;
		}
	}
}

/* A device of this namespace by index, for a note: its name, or
 * "ifindex N" when it has none here (gone since). */
#define IFINDEX_NAME_LEN 24 /* "ifindex 4294967295" and its NUL */
static void ifindex_name(unsigned ifindex, char out[IFINDEX_NAME_LEN])
{
	char name[IF_NAMESIZE];

	if (if_indextoname(ifindex, name))
		snprintf(out, IFINDEX_NAME_LEN, "%s", name);
	else
		snprintf(out, IFINDEX_NAME_LEN, "ifindex %u", ifindex);
}

/* A device stacked on the sandbox bridge or on one of its ports, in this
 * namespace: a VLAN, macvlan, macvtap or ipvlan takes the frames meant
 * for it before they reach the bridge's guarded path (the checker's
 * "stacked on" findings). A veth's link is its peer, not a lower
 * device. */
static bool link_stacked(struct engine *e, const struct ifinfomsg *ifi, const struct link_msg *m)
{
	if (!m->lower || m->other_ns || (uint32_t)ifi->ifi_index == m->lower ||
	    strcmp(m->kind, "veth") == 0 || (uint32_t)ifi->ifi_index == e->br_ifindex ||
	    is_port(e, (uint32_t)ifi->ifi_index))
		return false;
	return m->lower == e->br_ifindex || is_port(e, m->lower);
}

static void link_event(struct cutoff_events *ev, const struct nlmsghdr *nlh)
{
	const struct engine_cutoff *c = &ev->e->cut;
	const bool is_link = nlh->nlmsg_type == RTM_NEWLINK || nlh->nlmsg_type == RTM_DELLINK;
	/* a link message long enough to hold its ifinfomsg */
	const bool whole = is_link && nlh->nlmsg_len >= NLMSG_HDRLEN + sizeof(struct ifinfomsg);
	struct link_msg m = {0};

	if (whole && nlh->nlmsg_type == RTM_NEWLINK) {
		const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);

		if (ifi->ifi_index > 0 && downed_has(c, (uint32_t)ifi->ifi_index) &&
		    !(ifi->ifi_flags & IFF_UP))
			return; /* a port the cut-off took down, down */
	} else if (nlh->nlmsg_type == RTM_DELADDR &&
		   nlh->nlmsg_len >= NLMSG_HDRLEN + sizeof(struct ifaddrmsg)) {
		const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);

		if (downed_has(c, ifa->ifa_index))
			return; /* ... and its (link-local) address with it */
	}
	if (whole) {
		const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
		bool add = nlh->nlmsg_type == RTM_NEWLINK;
		char lname[IFINDEX_NAME_LEN];

		link_msg_read(nlh, &m);
		if (ifi->ifi_family != AF_BRIDGE && link_stacked(ev->e, ifi, &m)) {
			/* the engine makes no such device: another program's,
			 * and a way out from the moment it exists (added: cut
			 * off now; removed, or moved to another namespace,
			 * where it stays one: checked) */
			ifindex_name(m.lower, lname);
			ev->links = true;
			ev_note(ev, add, "another program %s a %s device (%s) stacked on %s",
				add ? "added or changed" : "removed", m.kind[0] ? m.kind : "?",
				m.name[0] ? m.name : "?", lname);
			return;
		}
		if (ifi->ifi_family != AF_BRIDGE && ifi->ifi_index > 0 &&
		    (uint32_t)ifi->ifi_index == ev->e->br_ifindex) {
			struct engine_cutoff *cw = &ev->e->cut;

			/* A device stacked on the bridge straight into another
			 * namespace, or removed there, leaves one event here:
			 * the bridge's, its flags as they were (the kernel
			 * telling of its lower's new upper). Its carrier coming
			 * and going as ports do (a cut-off's end among them)
			 * changes the flags, and is no such device: checking
			 * each would follow every lifted cut-off with a check. */
			if (cw->br_flags != ifi->ifi_flags) {
				cw->br_lift_ms = 0; /* its carrier, seen as it went */
			} else if (cw->br_lift_ms && pc_now_mono_ms() < cw->br_lift_ms) {
				/* A cut-off's ports came up again before the
				 * kernel told of the carrier they had taken away
				 * (it delays those, up to a second): both come
				 * as this one event, the flags as before. Once,
				 * and only soon after the lift: checking it would
				 * follow every lifted cut-off with a check. */
				cw->br_lift_ms = 0;
			} else {
				ev->links = true;
			}
			cw->br_flags = ifi->ifi_flags;
		}
	}
	if (is_link) {
		const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);

		ev_note(ev, false, "link %s (ifindex %d%s) %s", m.name[0] ? m.name : "?",
			whole ? ifi->ifi_index : 0,
			whole && ifi->ifi_family == AF_BRIDGE ? ", bridge port" : "",
			nlh->nlmsg_type == RTM_NEWLINK ? "changed" : "removed");
		return;
	}
	ev_note(ev, false, "an address %s",
		nlh->nlmsg_type == RTM_NEWADDR ? "added" : "changed or removed");
}

/* A tc object added or changed: the engine makes none, so it is another
 * program's, and a filter's action (mirred, skbedit, a BPF program) acts
 * before every nftables hook: cut off, as for a foreign nftables batch,
 * until a check asked for after it proves the guard. Removals only count
 * as changes: the guard never relies on tc. */
static void tc_event(struct cutoff_events *ev, const struct nlmsghdr *nlh)
{
	static const struct pc_name what[] = {
	    {RTM_NEWQDISC, "qdisc"},   {RTM_DELQDISC, "qdisc"},	   {RTM_NEWTCLASS, "class"},
	    {RTM_DELTCLASS, "class"},  {RTM_NEWTFILTER, "filter"}, {RTM_DELTFILTER, "filter"},
	    {RTM_NEWACTION, "action"}, {RTM_DELACTION, "action"},  {RTM_NEWCHAIN, "chain"},
	    {RTM_DELCHAIN, "chain"}};
	bool add = nlh->nlmsg_type == RTM_NEWQDISC || nlh->nlmsg_type == RTM_NEWTCLASS ||
		   nlh->nlmsg_type == RTM_NEWTFILTER || nlh->nlmsg_type == RTM_NEWACTION ||
		   nlh->nlmsg_type == RTM_NEWCHAIN;
	char name[IFINDEX_NAME_LEN] = "a shared block";

	if (nlh->nlmsg_type != RTM_NEWACTION && nlh->nlmsg_type != RTM_DELACTION &&
	    nlh->nlmsg_len >= NLMSG_HDRLEN + sizeof(struct tcmsg)) {
		const struct tcmsg *t = mnl_nlmsg_get_payload(nlh);

		if (t->tcm_ifindex > 0)
			ifindex_name((unsigned)t->tcm_ifindex, name);
	} else if (nlh->nlmsg_type == RTM_NEWACTION || nlh->nlmsg_type == RTM_DELACTION) {
		pc_strlcpy(name, "no device", sizeof(name));
	}
	ev_note(ev, add, "another program %s a tc %s (%s)", add ? "added or changed" : "removed",
		PC_NAME_OF(what, nlh->nlmsg_type, "object"), name);
}

static void event_one(const struct nlmsghdr *nlh, void *ctx)
{
	struct cutoff_events *ev = ctx;

	if (!nlh) {
		/* events lost: anything may have changed; on the routing
		 * monitor, a foreign rule too */
		ev_note(ev, ev->routing, "rtnetlink events were lost (ENOBUFS)");
		return;
	}
	switch (nlh->nlmsg_type) {
	case RTM_NEWROUTE:
	case RTM_DELROUTE:
		if (nlh->nlmsg_len >= NLMSG_HDRLEN + sizeof(struct rtmsg))
			route_event(ev, nlh);
		break;
	case RTM_NEWRULE:
	case RTM_DELRULE:
		if (nlh->nlmsg_len >= NLMSG_HDRLEN + sizeof(struct fib_rule_hdr))
			rule_event(ev, nlh);
		break;
	case RTM_NEWQDISC:
	case RTM_DELQDISC:
	case RTM_NEWTCLASS:
	case RTM_DELTCLASS:
	case RTM_NEWTFILTER:
	case RTM_DELTFILTER:
	case RTM_NEWACTION:
	case RTM_DELACTION:
	case RTM_NEWCHAIN:
	case RTM_DELCHAIN:
		tc_event(ev, nlh);
		break;
	case NLMSG_DONE:
	case NLMSG_NOOP:
		break;
	default:
		link_event(ev, nlh);
		break;
	}
}

int cutoff_events_read(struct engine *e, int fd, struct cutoff_events *ev)
{
	uint64_t lost = 0;
	int rc;

	memset(ev, 0, sizeof(*ev));
	ev->e = e;
	ev->routing = fd == e->route_fd;
	rc = links_monitor_read(fd, event_one, ev, &lost);
	if (lost) {
		ev->lost = true;
		/* What the lost events said is read again whole: the caller's
		 * dumps (ports, addresses, our routing) and the check, which
		 * reads links, routes, rules and tables afresh; until it proves,
		 * a loss on the routing monitor keeps the sandboxes cut off. */
		e->cut.overflows += lost;
		pc_log(PC_LOG_WARN,
		       "%s monitor: rtnetlink events lost (ENOBUFS, %llu so far): "
		       "resynchronising from a full dump and checking containment again",
		       ev->routing ? "routing" : "link", (unsigned long long)e->cut.overflows);
	}
	return rc;
}

void cutoff_events_act(struct engine *e, const struct cutoff_events *ev)
{
	struct engine_cutoff *c = &e->cut;

	if (ev->foreign) {
		cutoff_begin(e, ev->what);
		checkrun_request(e, ev->links && !ev->rules ? "links" : "foreignroute");
		return;
	}
	if (c->active && ev->change) {
		c->seq++; /* a check already running may have read the state before it */
		pc_log(PC_LOG_NOTICE, "bridge %s: still cut off; %s: checking containment again",
		       e->cfg.bridge, ev->what);
		checkrun_repeat(e, "cutoff");
		return;
	}
	if (ev->rules || ev->lost) /* a lost event may have been anything */
		checkrun_request(e, ev->lost ? "netlink" : "foreignroute");
	else if (ev->links) /* a way out found cuts off (cutoff_on_loss) */
		checkrun_request(e, "links");
}

int cutoff_status_json(const struct engine *e, char **buf, size_t *len)
{
	const struct engine_cutoff *c = &e->cut;
	char t[40];
	int rc;

	rc = pc_buf_appendf(buf, len,
			    ",\"cutoff\":{\"active\":%s,\"count\":%llu,\"netlink_overflows\":%llu",
			    c->active ? "true" : "false", (unsigned long long)c->count,
			    (unsigned long long)c->overflows);
	if (rc == 0 && c->active) {
		rc = pc_buf_appendf(buf, len, ",\"since\":\"%s\",\"ports_down\":%zu,\"after\":",
				    pc_time_rfc3339(c->since_ms, t, sizeof(t)), c->n_downed);
		rc = rc ? rc : pc_buf_append_json(buf, len, c->why);
	}
	return rc ? rc : pc_buf_appendf(buf, len, "}");
}

void cutoff_metrics(struct pc_prom *b, const struct engine *e)
{
	pc_prom_one_u64(b, "portcullis_engine_sandboxes_cut_off", "gauge",
			"1 while the sandboxes are cut off (their bridge ports down) because "
			"another program changed nftables or the routing the blackhole relies on "
			"and no check has proven containment "
			"since; 0 otherwise.",
			e->cut.active);
	pc_prom_one_u64(b, "portcullis_engine_cutoffs_total", "counter",
			"Times the sandboxes were cut off after another program changed nftables "
			"or the routing the blackhole relies on.",
			e->cut.count);
	pc_prom_one_u64(b, "portcullis_engine_cutoff_failures_total", "counter",
			"Sandbox ports the cut-off could not take down.", e->cut.failures);
	pc_prom_one_u64(b, "portcullis_engine_netlink_overflows_total", "counter",
			"Times the engine's link or routing event socket lost events "
			"(ENOBUFS); each is followed by a full dump and a check.",
			e->cut.overflows);
}
