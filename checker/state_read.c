/* checker: the rest of the live state — sysctls that change packet paths,
 * listening sockets (sock_diag), iptables-legacy tables — and the canonical
 * snapshot of links, addresses, routes, rules, tc and sysctls. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <linux/netfilter_bridge/ebtables.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checker/checker_int.h"

void ck_state_free(struct ck_state *st)
{
	if (!st)
		return;
	ck_ruleset_free(&st->nft);
	free(st->links);
	free(st->addrs);
	free(st->routes);
	free(st->iprules);
	free(st->qdiscs);
	free(st->classes);
	free(st->filters);
	free(st->sysctls);
	free(st->sysctl_ix);
	free(st->listeners);
	free(st->nfq);
	free(st->xdevs);
	free(st->pkts);
	memset(st, 0, sizeof(*st));
}

static int sysctl_key_cmp(const void *x, const void *y)
{
	return strcmp((*(const struct ck_sysctl *const *)x)->key,
		      (*(const struct ck_sysctl *const *)y)->key);
}

/* Equal keys in reading order, so that a lookup finds what a scan did. */
static int sysctl_ix_cmp(const void *x, const void *y)
{
	const struct ck_sysctl *a = *(const struct ck_sysctl *const *)x;
	const struct ck_sysctl *b = *(const struct ck_sysctl *const *)y;
	int c = strcmp(a->key, b->key);

	return c ? c : (a > b) - (a < b);
}

/* The obligations ask a port's sysctls several times each: a scan of the
 * eleven per link made the check quadratic in bridge ports. */
const char *ck_sysctl_get(const struct ck_state *st, const char *key)
{
	if (st->sysctl_ix && st->n_sysctl_ix == st->n_sysctls) {
		struct ck_sysctl k, *kp = &k;
		const struct ck_sysctl *const *hit;

		if (pc_strlcpy(k.key, key, sizeof(k.key)) >= sizeof(k.key))
			return NULL;
		hit = bsearch(&kp, st->sysctl_ix, st->n_sysctl_ix, sizeof(*st->sysctl_ix),
			      sysctl_key_cmp);
		while (hit && hit > st->sysctl_ix && sysctl_key_cmp(hit - 1, &kp) == 0)
			hit--;
		return hit ? (*hit)->val : NULL;
	}
	for (size_t i = 0; i < st->n_sysctls; i++)
		if (strcmp(st->sysctls[i].key, key) == 0)
			return st->sysctls[i].val;
	return NULL;
}

/* key "net.ipv4.conf.IF.forwarding" with IF substituted; path built from
 * the parts so that interface names with dots stay one component. */
static int sysctl_add(struct ck_state *st, const char *pre, const char *ifname, const char *post)
{
	struct ck_sysctl *s;
	char path[256], *buf = NULL, pdots[128];
	size_t len = 0;

	s = ck_grow(&st->sysctls, &st->n_sysctls, &st->cap_sysctls, sizeof(*s));
	if (!s)
		return PC_ENOMEM;
	snprintf(s->key, sizeof(s->key), "%s%s%s%s%s", pre, ifname ? "." : "", ifname ? ifname : "",
		 post ? "." : "", post ? post : "");
	pc_strlcpy(pdots, pre, sizeof(pdots));
	for (char *p = pdots; *p; p++)
		if (*p == '.')
			*p = '/';
	snprintf(path, sizeof(path), "/proc/sys/%s%s%s%s%s", pdots, ifname ? "/" : "",
		 ifname ? ifname : "", post ? "/" : "", post ? post : "");
	if (pc_file_read(path, 64, &buf, &len, NULL) == 0) {
		buf[strcspn(buf, "\n")] = 0;
		pc_strlcpy(s->val, buf, sizeof(s->val));
		free(buf);
	}
	return 0;
}

int ck_sysctl_read(struct ck_state *st, const char *br, struct pc_err *err)
{
	/* Per interface, for "all" and every link: a sandbox-facing device's own
	 * IP stack (a port's, a device stacked on it) is a way in when these
	 * let it forward, take source routes or router advertisements. */
	static const char *v4[] = {
	    "forwarding",     "rp_filter",	     "proxy_arp", "accept_local",
	    "route_localnet", "accept_source_route", NULL};
	static const char *v6[] = {"forwarding", "force_forwarding",	"disable_ipv6",
				   "accept_ra",	 "accept_source_route", NULL};
	int rc = sysctl_add(st, "net.ipv4.ip_forward", NULL, NULL);
	/* the kernel routes MPLS (mpls_router) or no link has the key: one
	 * look, not a failed open per link (1,000 of them at 1,000 ports) */
	bool mpls = access("/proc/sys/net/mpls/conf", F_OK) == 0;

	(void)br; /* the bridge is one of the links */
	for (size_t k = 0; k <= st->n_links && rc == 0; k++) {
		const char *ifn = k == 0 ? "all" : st->links[k - 1].name;

		if (!ifn[0] || strchr(ifn, '/'))
			continue;
		for (int i = 0; v4[i] && rc == 0; i++)
			rc = sysctl_add(st, "net.ipv4.conf", ifn, v4[i]);
		for (int i = 0; v6[i] && rc == 0; i++)
			rc = sysctl_add(st, "net.ipv6.conf", ifn, v6[i]);
		if (rc == 0 && k > 0 && mpls)
			rc = sysctl_add(st, "net.mpls.conf", ifn, "input");
	}
	if (rc == 0)
		rc = sysctl_add(st, "net.bridge.bridge-nf-call-iptables", NULL, NULL);
	if (rc == 0)
		rc = sysctl_add(st, "net.bridge.bridge-nf-call-ip6tables", NULL, NULL);
	if (rc == 0)
		rc = sysctl_add(st, "net.bridge.bridge-nf-call-arptables", NULL, NULL);
	if (rc < 0)
		return pc_err_set(err, rc, "sysctls: out of memory");
	/* the snapshot keeps reading order; the index is for lookups */
	free(st->sysctl_ix);
	st->n_sysctl_ix = 0;
	st->sysctl_ix = malloc((st->n_sysctls ? st->n_sysctls : 1) * sizeof(*st->sysctl_ix));
	if (!st->sysctl_ix)
		return pc_err_set(err, PC_ENOMEM, "sysctls: out of memory");
	for (size_t i = 0; i < st->n_sysctls; i++)
		st->sysctl_ix[i] = &st->sysctls[i];
	if (st->n_sysctls)
		qsort(st->sysctl_ix, st->n_sysctls, sizeof(*st->sysctl_ix), sysctl_ix_cmp);
	st->n_sysctl_ix = st->n_sysctls;
	return 0;
}

void ck_legacy_read(struct ck_state *st)
{
	static const struct {
		const char *file, *fam;
	} f[] = {{"/proc/net/ip_tables_names", "ip"},
		 {"/proc/net/ip6_tables_names", "ip6"},
		 {"/proc/net/arp_tables_names", "arp"}};
	size_t off = 0;

	st->legacy[0] = 0;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		char *buf = NULL, *save = NULL;
		size_t len = 0;

		if (pc_file_read(f[i].file, 4096, &buf, &len, NULL) < 0)
			continue;
		for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
			int n = snprintf(st->legacy + off, sizeof(st->legacy) - off, "%s%s:%s",
					 off ? " " : "", f[i].fam, t);

			if (n > 0 && off + (size_t)n < sizeof(st->legacy))
				off += (size_t)n;
		}
		free(buf);
	}
}

static int diag_dump(struct ck_state *st, uint8_t family, uint8_t proto, struct pc_err *err)
{
	union {
		struct nlmsghdr h; /* aligns the request */
		char b[128];
	} q;
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(q.b);
	struct inet_diag_req_v2 *req;
	struct pc_buf b = {0};
	const struct nlmsghdr *m;
	int n, rc;

	nlh->nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req = mnl_nlmsg_put_extra_header(nlh, sizeof(*req));
	req->sdiag_family = family;
	req->sdiag_protocol = proto;
	/* TCP: listening (10); UDP: unconnected bound sockets (close, 7) */
	req->idiag_states = proto == IPPROTO_TCP ? 1u << 10 : 1u << 7;
	rc = ck_nl_dump(NETLINK_SOCK_DIAG, "sock_diag", nlh, &b, err);
	if (rc < 0)
		goto out;
	m = (const struct nlmsghdr *)b.p;
	n = (int)b.len;
	for (; ck_nlmsg_ok(m, n); m = mnl_nlmsg_next(m, &n)) {
		const struct inet_diag_msg *d = mnl_nlmsg_get_payload(m);
		struct ck_listener *l;

		if (m->nlmsg_len < NLMSG_HDRLEN + sizeof(*d))
			continue;
		l = ck_grow(&st->listeners, &st->n_listeners, &st->cap_listeners, sizeof(*l));
		if (!l) {
			rc = pc_err_set(err, PC_ENOMEM, "sock_diag");
			goto out;
		}
		l->family = d->idiag_family;
		l->proto = proto;
		memcpy(l->a, d->id.idiag_src, family == AF_INET ? 4 : 16);
		l->port = ntohs(d->id.idiag_sport);
	}
out:
	pc_buf_free(&b);
	return rc;
}

int ck_listeners_read(struct ck_state *st, struct pc_err *err)
{
	static const uint8_t fam[] = {AF_INET, AF_INET6};
	static const uint8_t proto[] = {IPPROTO_TCP, IPPROTO_UDP};

	for (int f = 0; f < 2; f++)
		for (int p = 0; p < 2; p++) {
			int rc = diag_dump(st, fam[f], proto[p], err);

			if (rc < 0)
				return rc;
		}
	st->listeners_read = true;
	return 0;
}

static void addr_fmt(uint8_t family, const uint8_t *a, char *buf, size_t len)
{
	if (!inet_ntop(family, a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

void ck_state_canon(const struct ck_state *st, const char *br, struct pc_buf *out)
{
	char a[64], g[64], n1[32];

	pc_buf_printf(out, "# portcullis state snapshot v2 (bridge %s)\n", br);
	for (size_t i = 0; i < st->n_links; i++) {
		const struct ck_link *l = &st->links[i];

		pc_buf_printf(out, "link %s kind=%s up=%d master=%s", l->name,
			      l->kind[0] ? l->kind : "-", (l->flags & 1) ? 1 : 0,
			      l->master ? ck_ifname(st, l->master, n1, sizeof(n1)) : "-");
		if (l->link)
			pc_buf_printf(out, " link=%d%s", l->link, l->link_netns ? "@other-ns" : "");
		if (l->brport)
			pc_buf_printf(out,
				      " isolated=%d learning=%d flood=%d hairpin=%d proxyarp=%d "
				      "state=%d locked=%d neigh_suppress=%d",
				      l->isolated, l->learning, l->flood, l->hairpin, l->proxyarp,
				      l->stp_state, l->locked, l->neigh_suppress);
		if (l->br_nf_ipt >= 0)
			pc_buf_printf(
			    out, " nf_call_iptables=%d nf_call_ip6tables=%d nf_call_arptables=%d",
			    l->br_nf_ipt, l->br_nf_ip6t, l->br_nf_arpt);
		pc_buf_printf(out, " xdp=%u\n", l->xdp_attached);
	}
	for (size_t i = 0; i < st->n_addrs; i++) {
		const struct ck_ifaddr *x = &st->addrs[i];

		addr_fmt(x->family, x->a, a, sizeof(a));
		pc_buf_printf(out, "addr %s %s/%u scope %u\n",
			      ck_ifname(st, x->ifindex, n1, sizeof(n1)), a, x->prefixlen, x->scope);
	}
	for (size_t i = 0; i < st->n_routes; i++) {
		const struct ck_route *r = &st->routes[i];

		addr_fmt(r->family, r->dst, a, sizeof(a));
		addr_fmt(r->family, r->gw, g, sizeof(g));
		pc_buf_printf(out, "route table %u type %u %s/%u via %s dev %s metric %u\n",
			      r->table, r->type, a, r->dst_len, r->has_gw ? g : "-",
			      r->oif ? ck_ifname(st, r->oif, n1, sizeof(n1)) : "-", r->prio);
	}
	for (size_t i = 0; i < st->n_iprules; i++) {
		const struct ck_iprule *r = &st->iprules[i];

		pc_buf_printf(
		    out, "rule %s prio %u action %u table %u iif %s oif %s fwmark 0x%x/0x%x\n",
		    r->family == 10 ? "ipv6" : "ipv4", r->prio, r->action, r->table,
		    r->iif[0] ? r->iif : "-", r->oif[0] ? r->oif : "-", r->fwmark, r->fwmask);
	}
	for (size_t i = 0; i < st->n_qdiscs; i++)
		pc_buf_printf(out, "qdisc %s %s handle %x parent %x\n",
			      ck_ifname(st, st->qdiscs[i].ifindex, n1, sizeof(n1)),
			      st->qdiscs[i].kind, st->qdiscs[i].handle, st->qdiscs[i].parent);
	for (size_t i = 0; i < st->n_classes; i++)
		pc_buf_printf(out, "class %s %s handle %x parent %x\n",
			      ck_ifname(st, st->classes[i].ifindex, n1, sizeof(n1)),
			      st->classes[i].kind, st->classes[i].handle, st->classes[i].parent);
	for (size_t i = 0; i < st->n_filters; i++) {
		const struct ck_tcfilter *f = &st->filters[i];

		pc_buf_printf(out, "filter %s parent %x prio %u kind %s",
			      ck_ifname(st, f->ifindex, n1, sizeof(n1)), f->parent, f->prio,
			      f->kind);
		for (size_t k = 0; k < f->n_acts; k++)
			pc_buf_printf(out, " action %s", f->acts[k].kind);
		pc_buf_printf(out, "\n");
	}
	for (size_t i = 0; i < st->n_sysctls; i++)
		pc_buf_printf(out, "sysctl %s = %s\n", st->sysctls[i].key,
			      st->sysctls[i].val[0] ? st->sysctls[i].val : "(absent)");
	pc_buf_printf(out, "legacy %s\n", st->legacy[0] ? st->legacy : "-");
	pc_buf_printf(out, "ebtables %s%s%s\n", st->ebt[0] ? st->ebt : "-",
		      st->ebt_unreadable[0] ? " unreadable: " : "", st->ebt_unreadable);
}

/* ---- ebtables-legacy ---------------------------------------------------- */

/* One table: its rules and chain policies, from EBT_SO_GET_INFO and
 * EBT_SO_GET_ENTRIES. 1 when it has something (appended to st->ebt), 0
 * empty or absent, -1 unreadable. */
static int ebt_table(struct ck_state *st, int fd, const char *name)
{
	struct ebt_replace r;
	socklen_t len = sizeof(r);
	char *ent = NULL, what[160];
	size_t off = 0, wl = 0;
	int rc = 0;

	memset(&r, 0, sizeof(r));
	pc_strlcpy(r.name, name, sizeof(r.name));
	if (getsockopt(fd, IPPROTO_IP, EBT_SO_GET_INFO, &r, &len) < 0)
		return errno == ENOENT || errno == ENOPROTOOPT ? 0 : -1;
	if (r.entries_size > (1u << 24))
		return -1;
	ent = malloc(r.entries_size ? r.entries_size : 1);
	if (!ent)
		return -1;
	r.entries = ent;
	r.num_counters = 0;
	r.counters = NULL;
	len = sizeof(r);
	if (getsockopt(fd, IPPROTO_IP, EBT_SO_GET_ENTRIES, &r, &len) < 0) {
		free(ent);
		return -1;
	}
	what[0] = 0;
	if (r.nentries)
		wl += (size_t)snprintf(what, sizeof(what), "%u rule(s)", r.nentries);
	while (off + sizeof(uint32_t) <= r.entries_size) {
		uint32_t dist;

		memcpy(&dist, ent + off, sizeof(dist));
		if (dist == 0) { /* a chain header: struct ebt_entries */
			struct ebt_entries c;

			if (off + sizeof(c) > r.entries_size)
				break;
			memcpy(&c, ent + off, sizeof(c));
			if (c.policy != EBT_ACCEPT && wl < sizeof(what))
				wl += (size_t)snprintf(what + wl, sizeof(what) - wl,
						       "%schain %.32s policy %s", wl ? ", " : "",
						       c.name,
						       c.policy == EBT_DROP	? "DROP"
						       : c.policy == EBT_RETURN ? "RETURN"
										: "?");
			off += sizeof(c);
		} else { /* a rule: struct ebt_entry, next_offset from its start */
			struct ebt_entry e;

			if (off + sizeof(e) > r.entries_size)
				break;
			memcpy(&e, ent + off, sizeof(e));
			if (e.next_offset < sizeof(e))
				break;
			off += e.next_offset;
		}
	}
	free(ent);
	if (what[0]) {
		size_t l = strlen(st->ebt);

		snprintf(st->ebt + l, sizeof(st->ebt) - l, "%s%s: %s", l ? "; " : "", name, what);
		rc = 1;
	}
	return rc;
}

void ck_ebt_read(struct ck_state *st)
{
	static const char *tables[] = {"filter", "nat", "broute"};
	/* any inet socket reaches the ebtables getsockopts (no CAP_NET_RAW:
	 * the engine's check helper has none); they ask for CAP_NET_ADMIN */
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	st->ebt[0] = st->ebt_unreadable[0] = 0;
	if (fd < 0) {
		snprintf(st->ebt_unreadable, sizeof(st->ebt_unreadable),
			 "no socket to ask the kernel (%s)", strerror(errno));
		return;
	}
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (ebt_table(st, fd, tables[i]) < 0) {
			size_t l = strlen(st->ebt_unreadable);

			snprintf(st->ebt_unreadable + l, sizeof(st->ebt_unreadable) - l,
				 "%s%s (%s)", l ? ", " : "", tables[i], strerror(errno));
		}
	close(fd);
}

static int socket_owner(unsigned long ino);

/* One read of /proc/net/packet into st->pkts, adding the sockets (by inode)
 * not listed yet. PC_ENOENT: af_packet is not loaded, so no packet socket
 * exists. */
static int packet_read_once(struct ck_state *st)
{
	struct ck_state one = {0};
	char *buf = NULL;
	size_t len = 0;
	int rc = pc_file_read("/proc/net/packet", 1 << 22, &buf, &len, NULL);

	if (rc < 0)
		return rc;
	ck_packet_parse(&one, buf);
	free(buf);
	for (size_t i = 0; i < one.n_pkts; i++) {
		size_t j = 0;
		struct ck_pkt *k;

		while (j < st->n_pkts && st->pkts[j].inode != one.pkts[i].inode)
			j++;
		if (j < st->n_pkts)
			continue;
		k = ck_grow(&st->pkts, &st->n_pkts, &st->cap_pkts, sizeof(*k));
		if (!k) {
			free(one.pkts);
			return PC_ENOMEM;
		}
		*k = one.pkts[i];
	}
	free(one.pkts);
	return 0;
}

/* Packet sockets that receive, with their holders: a capture on a
 * sandbox-facing device reads the sandbox's frames, and its holder may send
 * them anywhere (docs/checker.md, "Packet sockets").
 *
 * /proc/net/packet is a seq_file read a page (about 50 sockets) per
 * read(), each page restarting the walk of the socket list at a line
 * count: a socket closed meanwhile earlier in the list shifts the lines,
 * and the next page skips one, which may be the capture this check is
 * for. No read is a snapshot, so the sockets of PACKET_READS reads are
 * taken together: a socket open throughout is missed only if every read
 * skipped it (tests/unit/check_checker_pkt.c measures both). A list that
 * cannot be read is a doubt (st->pkt_unreadable), never an empty list. */
#define PACKET_READS 3

void ck_packet_read(struct ck_state *st)
{
	int rc = 0;

	st->pkt_unreadable[0] = 0;
	for (int i = 0; i < PACKET_READS && rc == 0; i++)
		rc = packet_read_once(st);
	if (rc == PC_ENOENT && st->n_pkts == 0)
		rc = 0; /* no af_packet in this kernel: no packet sockets */
	if (rc < 0)
		snprintf(st->pkt_unreadable, sizeof(st->pkt_unreadable),
			 "/proc/net/packet could not be read (%s)", pc_strerror(rc));
	for (size_t j = 0; j < st->n_pkts; j++) {
		struct ck_pkt *k = &st->pkts[j];
		char p[64], *c = NULL;
		size_t cl = 0;

		if (!k->proto)
			continue; /* receives nothing: never looked up */
		k->pid = socket_owner(k->inode);
		snprintf(p, sizeof(p), "/proc/%d/comm", k->pid);
		if (k->pid > 0 && pc_file_read(p, 64, &c, &cl, NULL) == 0) {
			pc_strlcpy(k->comm, c, sizeof(k->comm));
			k->comm[strcspn(k->comm, "\n")] = 0;
			free(c);
		}
	}
}

/* ---- nfnetlink_queue bindings --------------------------------------------- */

/* The socket inode of netlink portid on bus proto (/proc/net/netlink),
 * read once. */
static unsigned long netlink_inode_once(uint32_t portid, int proto)
{
	char *buf = NULL, *save = NULL;
	size_t len = 0;
	unsigned long ino = 0;

	if (pc_file_read("/proc/net/netlink", 1 << 22, &buf, &len, NULL) < 0)
		return 0;
	for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
		unsigned long long sk;
		int eth;
		long long pid;
		unsigned long f[6], inode;

		if (sscanf(t, "%llx %d %lld %lx %lu %lu %lu %lu %lu %lu", &sk, &eth, &pid, &f[0],
			   &f[1], &f[2], &f[3], &f[4], &f[5], &inode) == 10 &&
		    eth == proto && (uint32_t)pid == portid) {
			ino = inode;
			break;
		}
	}
	free(buf);
	return ino;
}

/* The same, read again while not found. /proc/net/netlink is a seq_file
 * read a page per read(), each restarting the walk of the socket table at
 * a line count: a socket closed meanwhile earlier in the walk shifts the
 * lines, and the next page skips one. A socket bound to a queue is there
 * (nfnetlink_queue just named its port), so a miss is such a read, seen
 * in sandbox runs while the launcher opened and closed netlink sockets in
 * the same namespace. Reading again can only find more: a binder still
 * not found stays a finding. */
static unsigned long netlink_inode(uint32_t portid, int proto)
{
	unsigned long ino = 0;

	for (int i = 0; i < 5 && !ino; i++)
		ino = netlink_inode_once(portid, proto);
	return ino;
}

/* Does process pid hold socket inode ino? 1 yes, 0 no, -1 its fds are
 * unreadable. */
static int pid_has_socket(int pid, unsigned long ino)
{
	char dir[64], want[64];
	struct dirent *d;
	DIR *dp;
	int found = 0, denied = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	snprintf(want, sizeof(want), "socket:[%lu]", ino);
	dp = opendir(dir);
	if (!dp)
		return -1;
	while ((d = readdir(dp)) && !found) {
		char p[384], tgt[64];
		ssize_t n;

		if (d->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, d->d_name);
		n = readlink(p, tgt, sizeof(tgt) - 1);
		if (n > 0) {
			tgt[n] = 0;
			found = strcmp(tgt, want) == 0;
		} else if (errno == EACCES || errno == EPERM) {
			denied = 1; /* the directory lists, its links do not resolve */
		}
	}
	closedir(dp);
	return found ? 1 : denied ? -1 : 0;
}

/* A process named portcullisd in this network namespace, or 0. */
static int find_engine(void)
{
	struct stat self;
	struct dirent *d;
	DIR *dp;
	int pid = 0;

	if (stat("/proc/self/ns/net", &self) < 0 || !(dp = opendir("/proc")))
		return 0;
	while ((d = readdir(dp)) && !pid) {
		char p[64], comm[32] = "";
		char *buf = NULL;
		size_t len = 0;
		struct stat ns;
		int id = atoi(d->d_name);

		if (id <= 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%d/comm", id);
		if (pc_file_read(p, 64, &buf, &len, NULL) < 0)
			continue;
		pc_strlcpy(comm, buf, sizeof(comm));
		free(buf);
		comm[strcspn(comm, "\n")] = 0;
		snprintf(p, sizeof(p), "/proc/%d/ns/net", id);
		if (strcmp(comm, "portcullisd") == 0 && stat(p, &ns) == 0 &&
		    ns.st_ino == self.st_ino && ns.st_dev == self.st_dev)
			pid = id;
	}
	closedir(dp);
	return pid;
}

/* Which process holds socket inode ino (any readable /proc/N/fd), or 0. */
static int socket_owner(unsigned long ino)
{
	struct dirent *d;
	DIR *dp = opendir("/proc");
	int pid = 0;

	if (!dp)
		return 0;
	while ((d = readdir(dp)) && !pid) {
		int id = atoi(d->d_name);

		if (id > 0 && pid_has_socket(id, ino) == 1)
			pid = id;
	}
	closedir(dp);
	return pid;
}

void ck_nfq_read(struct ck_state *st, int engine_pid)
{
	char *buf = NULL, *save = NULL;
	size_t len = 0;

	st->engine_is_caller = engine_pid > 0;
	st->engine_pid = engine_pid > 0 ? engine_pid : find_engine();
	st->engine_fds_read = false;
	if (pc_file_read("/proc/net/netfilter/nfnetlink_queue", 1 << 20, &buf, &len, NULL) < 0)
		return;
	for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
		unsigned q;
		long long portid;
		struct ck_nfq *b;

		if (sscanf(t, "%u %lld", &q, &portid) != 2)
			continue;
		b = ck_grow(&st->nfq, &st->n_nfq, &st->cap_nfq, sizeof(*b));
		if (!b)
			break;
		b->queue = q;
		b->portid = (uint32_t)portid;
		b->inode = netlink_inode(b->portid, NETLINK_NETFILTER);
		if (!b->inode)
			continue;
		if (st->engine_pid > 0) {
			int has = pid_has_socket(st->engine_pid, b->inode);

			if (has >= 0)
				st->engine_fds_read = true;
			if (has == 1) {
				b->pid = st->engine_pid;
				continue;
			}
			if (has < 0)
				continue; /* nothing to compare with: a scan would not help */
		}
		b->pid = socket_owner(b->inode);
	}
	free(buf);
}

/* ---- which process holds each tap ------------------------------------------ */

static struct ck_link *tun_by_name(struct ck_state *st, const char *name)
{
	for (size_t i = 0; i < st->n_links; i++)
		if (strcmp(st->links[i].kind, "tun") == 0 && strcmp(st->links[i].name, name) == 0)
			return &st->links[i];
	return NULL;
}

/* The tun fds of process pid: their fdinfo names the device ("iff:"). */
static void tun_scan_pid(struct ck_state *st, int pid)
{
	char dir[64];
	struct dirent *d;
	DIR *dp;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	dp = opendir(dir);
	if (!dp)
		return;
	while ((d = readdir(dp))) {
		char p[384], tgt[32], *buf = NULL, *iff;
		size_t len = 0;
		ssize_t n;
		struct ck_link *l;

		if (d->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, d->d_name);
		n = readlink(p, tgt, sizeof(tgt) - 1);
		if (n <= 0)
			continue;
		tgt[n] = 0;
		if (strcmp(tgt, "/dev/net/tun") != 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%d/fdinfo/%s", pid, d->d_name);
		if (pc_file_read(p, 4096, &buf, &len, NULL) < 0)
			continue;
		iff = strstr(buf, "iff:");
		if (iff) {
			iff += 4;
			iff += strspn(iff, " \t");
			iff[strcspn(iff, "\n")] = 0;
			l = tun_by_name(st, iff);
			if (l && !l->tun_owner)
				l->tun_owner = pid;
		}
		free(buf);
	}
	closedir(dp);
}

void ck_tun_owners(struct ck_state *st)
{
	struct dirent *d;
	DIR *dp;
	size_t ntun = 0;

	for (size_t i = 0; i < st->n_links; i++)
		ntun += strcmp(st->links[i].kind, "tun") == 0;
	if (ntun < 2 || !(dp = opendir("/proc")))
		return;
	while ((d = readdir(dp))) {
		int id = atoi(d->d_name);

		if (id > 0)
			tun_scan_pid(st, id);
	}
	closedir(dp);
}
