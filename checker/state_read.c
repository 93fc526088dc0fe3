/* checker: the rest of the live state — sysctls that change packet paths,
 * listening sockets (sock_diag), iptables-legacy tables — and the canonical
 * snapshot of links, addresses, routes, rules, tc and sysctls. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "checker/internal.h"

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
	free(st->filters);
	free(st->sysctls);
	free(st->listeners);
	memset(st, 0, sizeof(*st));
}

const char *ck_sysctl_get(const struct ck_state *st, const char *key)
{
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
	static const char *v4[] = {"forwarding",   "rp_filter",	     "proxy_arp",
				   "accept_local", "route_localnet", NULL};
	static const char *v6[] = {"forwarding", "force_forwarding", "disable_ipv6", NULL};
	int rc = sysctl_add(st, "net.ipv4.ip_forward", NULL, NULL);

	for (int i = 0; v4[i] && rc == 0; i++) {
		rc = sysctl_add(st, "net.ipv4.conf", "all", v4[i]);
		if (rc == 0)
			rc = sysctl_add(st, "net.ipv4.conf", br, v4[i]);
	}
	for (int i = 0; v6[i] && rc == 0; i++) {
		rc = sysctl_add(st, "net.ipv6.conf", "all", v6[i]);
		if (rc == 0)
			rc = sysctl_add(st, "net.ipv6.conf", br, v6[i]);
	}
	if (rc == 0)
		rc = sysctl_add(st, "net.bridge.bridge-nf-call-iptables", NULL, NULL);
	if (rc == 0)
		rc = sysctl_add(st, "net.bridge.bridge-nf-call-ip6tables", NULL, NULL);
	if (rc == 0)
		rc = sysctl_add(st, "net.bridge.bridge-nf-call-arptables", NULL, NULL);
	if (rc < 0)
		return pc_err_set(err, rc, "sysctls: out of memory");
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

	pc_buf_printf(out, "# portcullis state snapshot v1 (bridge %s)\n", br);
	for (size_t i = 0; i < st->n_links; i++) {
		const struct ck_link *l = &st->links[i];

		pc_buf_printf(out, "link %s kind=%s up=%d master=%s", l->name,
			      l->kind[0] ? l->kind : "-", (l->flags & 1) ? 1 : 0,
			      l->master ? ck_ifname(st, l->master, n1, sizeof(n1)) : "-");
		if (l->brport)
			pc_buf_printf(out,
				      " isolated=%d learning=%d flood=%d hairpin=%d proxyarp=%d",
				      l->isolated, l->learning, l->flood, l->hairpin, l->proxyarp);
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
}
