/* portcullis.yaml: one table names every key, its type, bounds and place in
 * struct config; the loader walks the YAML against it, so the table is
 * the whole schema (docs/policy.md lists the same keys). */
#include "rules/rules_int.h"

#include <limits.h>
#include <netinet/in.h> /* AF_INET, AF_INET6 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum ctype {
	CT_PATH,    /* absolute, or relative to the configuration's directory */
	CT_OPTPATH, /* a path, or "" for none */
	CT_IFNAME,  /* network interface name */
	CT_USER,    /* system user name */
	CT_UINT,    /* u16/u32/u64 by size, within min..max */
	CT_BOOL,
	CT_REFUSE,    /* refused | nxdomain */
	CT_FACILITY,  /* syslog facility by name: local0..local7, user, daemon */
	CT_QTYPES,    /* list of DNS type names */
	CT_RESOLVERS, /* list of IP addresses */
	CT_IFNAMES,   /* list of network interface names */
	CT_ROUTABLE,  /* list of special-purpose prefixes */
	CT_ENDPOINT,  /* "addr:port" */
	CT_HOSTPORT,  /* "host:port" or "" */
	CT_PREFIX4,   /* an IPv4 prefix */
	CT_PREFIX6,   /* an IPv6 prefix */
};

struct ckey {
	const char *path;
	enum ctype type;
	size_t off, size;
	uint64_t min, max;
};

#define F(field) offsetof(struct config, field), sizeof(((struct config *)0)->field)
#define K(p, t, fld)                                                                               \
	{                                                                                          \
		p, t, F(fld), 0, 0                                                                 \
	}
#define N(p, fld, lo, hi)                                                                          \
	{                                                                                          \
		p, CT_UINT, F(fld), lo, hi                                                         \
	}

static const struct ckey ckeys[] = {
    K("bridge", CT_IFNAME, bridge),
    K("uplinks", CT_IFNAMES, uplinks),
    K("rules", CT_PATH, rules_dir),
    K("run_dir", CT_PATH, run_dir),
    K("state_dir", CT_PATH, state_dir),
    N("queue.base", queue.base, 0, 65535),
    N("queue.count", queue.count, 1, 64),
    N("queue.maxlen", queue.maxlen, 1, 1u << 20),
    K("engine.user", CT_USER, engine.user),
    K("engine.remove_table_on_exit", CT_BOOL, engine.remove_on_exit),
    N("engine.flows_max", engine.flows_max, 1, 1u << 24),
    N("engine.sni_timeout_ms", engine.sni_timeout_ms, 1, 60000),
    N("engine.recheck_interval_s", engine.recheck_s, 0, 86400),
    N("engine.metrics_port", engine.metrics_port, 0, 65535),
    K("engine.metrics_listen", CT_HOSTPORT, engine.metrics_listen),
    N("limits.new_flows_per_second", limits.new_flows_per_second, 1, RULES_LIMIT_RATE_MAX),
    N("limits.new_flows_burst", limits.new_flows_burst, 1, RULES_LIMIT_BURST_MAX),
    K("dns.resolvers", CT_RESOLVERS, dns.resolvers),
    K("dns.routable", CT_ROUTABLE, dns.routable),
    K("dns.qtypes", CT_QTYPES, dns.qtypes),
    K("dns.refuse_with", CT_REFUSE, dns.refuse),
    N("dns.ttl_min", dns.ttl_min, 0, 86400),
    N("dns.ttl_max", dns.ttl_max, 1, 604800),
    N("dns.grace", dns.grace, 0, 3600),
    N("dns.max_learned_per_sandbox", dns.learned_per_sandbox, 1, 1u << 24),
    N("dns.max_learned_total", dns.learned_total, 1, 1u << 26),
    K("vault.listen", CT_ENDPOINT, vault.listen),
    K("vault.ca_dir", CT_PATH, vault.ca_dir),
    K("vault.secrets", CT_PATH, vault.secrets),
    K("vault.trust", CT_PATH, vault.trust),
    K("vault.user", CT_USER, vault.user),
    K("vault.worker_user", CT_USER, vault.worker_user),
    N("vault.max_conns_per_sandbox", vault.max_conns_per_sandbox, 1, 65535),
    N("vault.max_header_bytes", vault.max_header_bytes, 1024, 1u << 20),
    N("vault.handshake_timeout_ms", vault.handshake_timeout_ms, 100, 600000),
    N("vault.idle_timeout_ms", vault.idle_timeout_ms, 100, 3600000),
    N("vault.request_timeout_ms", vault.request_timeout_ms, 100, 3600000),
    K("log.socket", CT_PATH, log.socket),
    K("log.file", CT_PATH, log.file),
    K("log.key", CT_PATH, log.key),
    K("log.user", CT_USER, log.user),
    N("log.checkpoint.records", log.checkpoint_records, 1, 1000000),
    N("log.checkpoint.interval_ms", log.checkpoint_ms, 10, 3600000),
    N("log.rotate_bytes", log.rotate_bytes, 0, UINT64_MAX),
    K("log.fsync_batch", CT_BOOL, log.fsync_batch),
    K("log.syslog.local", CT_BOOL, log.syslog.local),
    K("log.syslog.remote", CT_HOSTPORT, log.syslog.remote),
    K("log.syslog.tls", CT_BOOL, log.syslog.tls),
    K("log.syslog.ca", CT_OPTPATH, log.syslog.ca),
    N("log.syslog.spool", log.syslog.spool_records, 0, 10000000),
    K("log.syslog.socket", CT_PATH, log.syslog.socket),
    K("log.witness.address", CT_HOSTPORT, log.witness.address),
    K("log.witness.key", CT_OPTPATH, log.witness.key),
    K("log.witness.required", CT_BOOL, log.witness.required),
    N("log.witness.max_lag_ms", log.witness.max_lag_ms, 100, 86400000),
    K("log.syslog.facility", CT_FACILITY, log.syslog.facility),
    N("log.syslog.enterprise_number", log.syslog.pen, 1, UINT32_MAX),
    K("sandbox.pool4", CT_PREFIX4, sandbox.pool4),
    K("sandbox.pool6", CT_PREFIX6, sandbox.pool6),
    K("sandbox.user", CT_USER, sandbox.user),
};
#define N_CKEYS (sizeof(ckeys) / sizeof(ckeys[0]))

/* Paths that follow run_dir / state_dir unless set. */
static const struct {
	const char *key, *base, *name;
} cderived[] = {
    {"log.socket", "run_dir", "logd.sock"},
    {"log.key", "state_dir", "log.key"},
    {"vault.ca_dir", "state_dir", "ca"},
    {"vault.secrets", "state_dir", "secrets"},
};

struct cload {
	struct yctx c;
	struct config cfg;
	const char *basedir;		    /* for relative paths */
	const struct ynode *where[N_CKEYS]; /* value node of each key set */
};

static size_t ckey_index(const char *path)
{
	for (size_t i = 0; i < N_CKEYS; i++)
		if (strcmp(ckeys[i].path, path) == 0)
			return i;
	return N_CKEYS;
}

static void *cfield(struct config *cfg, const struct ckey *k)
{
	return (char *)cfg + k->off;
}

/* Fill the paths that follow run_dir / state_dir and were not set; returns
 * the table index of one that would not fit, or N_CKEYS. */
static size_t config_derive(struct config *cfg, const bool *set)
{
	for (size_t i = 0; i < sizeof(cderived) / sizeof(cderived[0]); i++) {
		size_t k = ckey_index(cderived[i].key), b = ckey_index(cderived[i].base);
		char *dst = cfield(cfg, &ckeys[k]), base[PC_PATH_MAX];

		if (set && set[k])
			continue;
		pc_strlcpy(base, cfield(cfg, &ckeys[b]), sizeof(base));
		if ((size_t)snprintf(dst, ckeys[k].size, "%s/%s", base, cderived[i].name) >=
		    ckeys[k].size)
			return b;
	}
	return N_CKEYS;
}

void config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	pc_strlcpy(cfg->bridge, "pcbr0", sizeof(cfg->bridge));
	pc_strlcpy(cfg->rules_dir, "/etc/portcullis/rules.d", sizeof(cfg->rules_dir));
	pc_strlcpy(cfg->run_dir, "/run/portcullis", sizeof(cfg->run_dir));
	pc_strlcpy(cfg->state_dir, "/var/lib/portcullis", sizeof(cfg->state_dir));
	cfg->queue.base = 100;
	cfg->queue.count = 2;
	cfg->queue.maxlen = 4096;
	pc_strlcpy(cfg->engine.user, "portcullis", sizeof(cfg->engine.user));
	cfg->engine.remove_on_exit = false;
	cfg->engine.flows_max = 262144;
	cfg->engine.sni_timeout_ms = 3000;
	cfg->engine.recheck_s = 60;
	cfg->limits.new_flows_per_second = RULES_LIMIT_RATE_DEFAULT;
	cfg->limits.new_flows_burst = RULES_LIMIT_BURST_DEFAULT;
	cfg->dns.qtypes = QT_DEFAULT;
	cfg->dns.refuse = DNS_REFUSE_REFUSED;
	cfg->dns.ttl_min = 30;
	cfg->dns.ttl_max = 3600;
	cfg->dns.grace = 60;
	cfg->dns.learned_per_sandbox = 4096;
	cfg->dns.learned_total = 100000;
	pc_endpoint_parse("0.0.0.0:8443", 0, &cfg->vault.listen);
	pc_strlcpy(cfg->vault.trust, "/etc/ssl/certs/ca-certificates.crt",
		   sizeof(cfg->vault.trust));
	pc_strlcpy(cfg->vault.user, "portcullis-vault", sizeof(cfg->vault.user));
	pc_strlcpy(cfg->vault.worker_user, "portcullis-vworker", sizeof(cfg->vault.worker_user));
	cfg->vault.max_conns_per_sandbox = 64;
	cfg->vault.max_header_bytes = 32768;
	cfg->vault.handshake_timeout_ms = 10000;
	cfg->vault.idle_timeout_ms = 60000;
	cfg->vault.request_timeout_ms = 60000;
	pc_strlcpy(cfg->log.file, "/var/log/portcullis/verdicts.jsonl", sizeof(cfg->log.file));
	pc_strlcpy(cfg->log.user, "portcullis-log", sizeof(cfg->log.user));
	cfg->log.checkpoint_records = 1000;
	cfg->log.checkpoint_ms = 1000;
	cfg->log.rotate_bytes = 0;
	cfg->log.syslog.local = true;
	cfg->log.syslog.spool_records = 100000;
	cfg->log.witness.max_lag_ms = 10000;
	cfg->log.syslog.facility = 16; /* local0 */
	cfg->log.syslog.pen = 0;       /* none: no structured data (docs/logd.md "Syslog export") */
	pc_strlcpy(cfg->log.syslog.socket, "/dev/log", sizeof(cfg->log.syslog.socket));
	pc_strlcpy(cfg->sandbox.user, "nobody", sizeof(cfg->sandbox.user));
	config_derive(cfg, NULL);
}

/* ---- value parsers ------------------------------------------------------- */

static int cset_path(struct cload *l, const struct ynode *n, const struct ckey *k)
{
	char *dst = cfield(&l->cfg, k);
	const char *s;
	size_t need;

	if (yget_str(&l->c, n, k->path, &s))
		return PC_EPARSE;
	if (!*s) {
		if (k->type == CT_OPTPATH) {
			dst[0] = '\0';
			return 0;
		}
		return yerr(&l->c, n, "%s: expected a path, found an empty string", k->path);
	}
	if (s[0] == '/' || !l->basedir || !*l->basedir)
		need = (size_t)snprintf(dst, k->size, "%s", s);
	else
		need = (size_t)snprintf(dst, k->size, "%s%s%s", l->basedir,
					strcmp(l->basedir, "/") ? "/" : "", s);
	if (need >= k->size)
		return yerr(&l->c, n,
			    "%s: path too long (%zu bytes once resolved); expected at "
			    "most %zu",
			    k->path, need, k->size - 1);
	return 0;
}

static int cset_name(struct cload *l, const struct ynode *n, const struct ckey *k)
{
	const char *s;
	bool ok;

	if (yget_str(&l->c, n, k->path, &s))
		return PC_EPARSE;
	if (k->type == CT_IFNAME) {
		ok = rules_ifname_valid(s);
	} else {
		size_t len = strlen(s);

		ok = len > 0 && len < 32 && ((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_');
		for (size_t i = 1; ok && i < len; i++)
			ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
			     s[i] == '_' || s[i] == '-';
	}
	if (!ok)
		return yerr(&l->c, n, "%s: invalid %s '%.40s'; expected %s", k->path,
			    k->type == CT_IFNAME ? "interface name" : "user name", s,
			    k->type == CT_IFNAME
				? "1-15 characters without '/', ':' or spaces"
				: "a system user: lower-case letters, digits, '_', '-'");
	pc_strlcpy(cfield(&l->cfg, k), s, k->size);
	return 0;
}

/* A list setting, or one value written without a list: at most max items,
 * each a string handed to fn (which checks it and keeps it in v[i]). Every
 * item is checked, so that one load reports every bad one. */
typedef int (*citem_fn)(struct cload *l, const struct ynode *it, size_t i, const char *s,
			const char *path, void *v);

static int clist(struct cload *l, const struct ynode *n, const char *path, const char *expected,
		 const char *noun, size_t max, citem_fn fn, void *v, size_t *out_cnt)
{
	const struct ynode *const *items = (const struct ynode *const *)n->kids;
	size_t cnt = n->n;
	int rc = 0;

	if (n->type == YN_SCALAR && !ynode_is_null(n)) {
		items = &n;
		cnt = 1;
	} else if (n->type != YN_SEQ) {
		return yerr_type(&l->c, n, path, expected);
	}
	if (cnt > max)
		return yerr(&l->c, n, "%s: %zu %s; expected at most %zu", path, cnt, noun, max);
	for (size_t i = 0; i < cnt; i++) {
		const char *s;
		int r;

		if (yget_str(&l->c, items[i], path, &s)) {
			rc = PC_EPARSE;
			continue;
		}
		r = fn(l, items[i], i, s, path, v);
		if (r)
			rc = r;
	}
	if (rc)
		return rc;
	*out_cnt = cnt;
	return 0;
}

static int citem_ifname(struct cload *l, const struct ynode *it, size_t i, const char *s,
			const char *path, void *v)
{
	char(*names)[PC_IFNAMSIZ] = v;
	int rc = 0;

	if (!rules_ifname_valid(s))
		return yerr(&l->c, it,
			    "%s: invalid interface name '%.40s'; expected 1-15 characters "
			    "without '/', ':' or spaces",
			    path, s);
	pc_strlcpy(names[i], s, sizeof(names[i]));
	for (size_t j = 0; j < i; j++)
		if (strcmp(names[i], names[j]) == 0)
			rc = yerr(&l->c, it,
				  "%s: '%.40s' is listed twice; expected each interface once", path,
				  s);
	return rc;
}

/* uplinks: a list of interface names (or one written without a list). */
static int cset_ifnames(struct cload *l, const struct ynode *n, const struct ckey *k)
{
	char v[RULES_MAX_UPLINKS][PC_IFNAMSIZ];
	size_t cnt;
	int rc = clist(l, n, k->path, "a list of interface names", "interfaces", RULES_MAX_UPLINKS,
		       citem_ifname, v, &cnt);

	if (rc)
		return rc;
	memcpy(l->cfg.uplinks, v, cnt * sizeof(v[0]));
	l->cfg.n_uplinks = cnt;
	return 0;
}

/* Syslog facilities an exporter may use (RFC 5424 6.2.1): local0..local7,
 * and user and daemon; as numbers. */
static const struct {
	const char *name;
	uint8_t num;
} facilities[] = {{"user", 1},	  {"daemon", 3},  {"local0", 16}, {"local1", 17}, {"local2", 18},
		  {"local3", 19}, {"local4", 20}, {"local5", 21}, {"local6", 22}, {"local7", 23}};

static int syslog_facility_num(const char *s)
{
	for (size_t i = 0; i < sizeof(facilities) / sizeof(facilities[0]); i++)
		if (strcmp(facilities[i].name, s) == 0)
			return facilities[i].num;
	return -1;
}

static const char *syslog_facility_name(uint8_t f)
{
	for (size_t i = 0; i < sizeof(facilities) / sizeof(facilities[0]); i++)
		if (facilities[i].num == f)
			return facilities[i].name;
	return "local0";
}

static int cset_uint(struct cload *l, const struct ynode *n, const struct ckey *k)
{
	uint64_t v;
	void *dst = cfield(&l->cfg, k);

	if (yget_uint(&l->c, n, k->path, k->min, k->max, &v))
		return PC_EPARSE;
	if (k->size == 2) {
		uint16_t x = (uint16_t)v;

		memcpy(dst, &x, 2);
	} else if (k->size == 4) {
		uint32_t x = (uint32_t)v;

		memcpy(dst, &x, 4);
	} else {
		memcpy(dst, &v, 8);
	}
	return 0;
}

static int cset_qtypes(struct cload *l, const struct ynode *n, const struct ckey *k)
{
	uint32_t bits = 0;
	int rc = 0;

	if (n->type != YN_SEQ)
		return yerr_type(&l->c, n, k->path, "a list of DNS types like [A, AAAA]");
	for (size_t i = 0; i < n->n; i++) {
		const struct ynode *it = n->kids[i];
		const char *s, *sug;
		uint32_t bit;

		if (yget_str(&l->c, it, k->path, &s)) {
			rc = PC_EPARSE;
		} else if (rules_qtype_from_name(s, &bit) == 0) {
			bits |= bit;
		} else {
			sug = rules_suggest(s, rules_qtype_all, 11);
			rc = yerr(&l->c, it,
				  "%s: unknown DNS type '%.32s'%s%s%s; expected one of A, AAAA, "
				  "CNAME, HTTPS, SVCB, TXT, MX, SRV, PTR, NS, CAA",
				  k->path, s, sug ? " (did you mean '" : "", sug ? sug : "",
				  sug ? "'?)" : "");
		}
	}
	if (!rc)
		memcpy(cfield(&l->cfg, k), &bits, sizeof(bits));
	return rc;
}

static int citem_resolver(struct cload *l, const struct ynode *it, size_t i, const char *s,
			  const char *path, void *v)
{
	struct pc_addr *res = v;
	int rc = 0;

	if (pc_addr_parse(s, &res[i]) < 0)
		return yerr(&l->c, it,
			    "%s: invalid address '%.48s'; expected an IPv4 or IPv6 address (port "
			    "53 is implied)",
			    path, s);
	for (size_t j = 0; j < i; j++)
		if (pc_addr_eq(&res[i], &res[j]))
			rc = yerr(&l->c, it,
				  "%s: '%.48s' is listed twice; expected each resolver once", path,
				  s);
	return rc;
}

static int cset_resolvers(struct cload *l, const struct ynode *n, const struct ckey *k)
{
	struct pc_addr res[RULES_MAX_RESOLVERS];
	size_t cnt;
	int rc;

	(void)k;
	/* (one address may be written without a list) */
	rc = clist(l, n, "dns.resolvers", "a list of IP addresses", "addresses",
		   RULES_MAX_RESOLVERS, citem_resolver, res, &cnt);
	if (rc)
		return rc;
	memcpy(l->cfg.dns.resolvers, res, cnt * sizeof(res[0]));
	l->cfg.dns.n_resolvers = cnt;
	return 0;
}

/* dns.routable: each prefix must lie inside one special-purpose block, so
 * that the list can only say "this special range is an ordinary network
 * here", never widen into a blanket exemption (0.0.0.0/0) by a typo. */
static int citem_routable(struct cload *l, const struct ynode *it, size_t i, const char *s,
			  const char *path, void *v)
{
	struct pc_prefix *r = v;
	const struct pc_special *within = NULL;

	if (pc_prefix_parse(s, &r[i]) < 0)
		return yerr(&l->c, it,
			    "%s: invalid prefix '%.64s'; expected a network like "
			    "'192.0.2.0/24' or '2001:db8::/32'",
			    path, s);
	for (size_t j = 0; j < pc_special_count(); j++) {
		const struct pc_special *e = pc_special_at(j);

		if (e->prefix.len <= r[i].len && pc_prefix_contains(&e->prefix, &r[i].addr))
			within = e;
	}
	if (!within)
		return yerr(&l->c, it,
			    "%s: '%.64s' is not inside one special-purpose block; expected "
			    "a range inside one of them, like '192.0.2.0/24' (other "
			    "addresses are learned anyway)",
			    path, s);
	return 0;
}

static int cset_routable(struct cload *l, const struct ynode *n, const struct ckey *k)
{
	struct pc_prefix r[RULES_MAX_ROUTABLE];
	size_t cnt;
	int rc = clist(l, n, k->path, "a list of special-purpose prefixes", "prefixes",
		       RULES_MAX_ROUTABLE, citem_routable, r, &cnt);

	if (rc)
		return rc;
	memcpy(l->cfg.dns.routable, r, cnt * sizeof(r[0]));
	l->cfg.dns.n_routable = cnt;
	return 0;
}

static int cset_hostport(struct cload *l, const struct ynode *n, const struct ckey *k)
{
	char host[POLICY_HOST_MAX], norm[POLICY_HOST_MAX];
	struct pc_endpoint ep;
	const char *s, *colon;
	bool wild;
	char *end;
	unsigned long port;

	if (yget_str(&l->c, n, k->path, &s))
		return PC_EPARSE;
	if (k->type == CT_ENDPOINT || s[0] == '[') {
		if (pc_endpoint_parse(s, 0, &ep) < 0)
			goto bad;
		if (k->type == CT_ENDPOINT) {
			l->cfg.vault.listen = ep;
			return 0;
		}
	} else if (*s) {
		colon = strrchr(s, ':');
		if (!colon || (size_t)(colon - s) >= sizeof(host) || colon == s)
			goto bad;
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = '\0';
		port = strtoul(colon + 1, &end, 10);
		if (colon[1] < '1' || colon[1] > '9' || *end || port > 65535)
			goto bad;
		if (pc_addr_parse(host, &ep.addr) < 0 &&
		    (policy_host_normalize(host, norm, sizeof(norm), &wild, NULL) < 0 || wild))
			goto bad;
	}
	if (strlen(s) >= k->size)
		goto bad;
	pc_strlcpy(cfield(&l->cfg, k), s, k->size);
	return 0;
bad:
	return yerr(&l->c, n, "%s: invalid endpoint '%.64s'; expected %s", k->path, s,
		    k->type == CT_ENDPOINT ? "an address and port like '0.0.0.0:8443' or "
					     "'[::1]:8443'"
					   : "\"host:port\" like 'siem.example.com:6514', or \"\" "
					     "for none");
}

static int cset(struct cload *l, const struct ynode *n, const struct ckey *k)
{
	switch (k->type) {
	case CT_PATH:
	case CT_OPTPATH:
		return cset_path(l, n, k);
	case CT_IFNAME:
	case CT_USER:
		return cset_name(l, n, k);
	case CT_UINT:
		return cset_uint(l, n, k);
	case CT_BOOL:
		return yget_bool(&l->c, n, k->path, (bool *)cfield(&l->cfg, k));
	case CT_REFUSE: {
		const char *s;

		if (yget_str(&l->c, n, k->path, &s))
			return PC_EPARSE;
		if (strcmp(s, "refused") == 0)
			l->cfg.dns.refuse = DNS_REFUSE_REFUSED;
		else if (strcmp(s, "nxdomain") == 0)
			l->cfg.dns.refuse = DNS_REFUSE_NXDOMAIN;
		else
			return yerr(&l->c, n, "%s: expected refused or nxdomain, found '%.32s'",
				    k->path, s);
		return 0;
	}
	case CT_FACILITY: {
		const char *s;
		int f;

		if (yget_str(&l->c, n, k->path, &s))
			return PC_EPARSE;
		f = syslog_facility_num(s);
		if (f < 0)
			return yerr(&l->c, n,
				    "%s: expected local0 to local7, user or daemon, found '%.32s'",
				    k->path, s);
		l->cfg.log.syslog.facility = (uint8_t)f;
		return 0;
	}
	case CT_QTYPES:
		return cset_qtypes(l, n, k);
	case CT_RESOLVERS:
		return cset_resolvers(l, n, k);
	case CT_IFNAMES:
		return cset_ifnames(l, n, k);
	case CT_ROUTABLE:
		return cset_routable(l, n, k);
	case CT_ENDPOINT:
	case CT_HOSTPORT:
		return cset_hostport(l, n, k);
	case CT_PREFIX4:
	case CT_PREFIX6: {
		const char *s;
		struct pc_prefix p;
		int af = k->type == CT_PREFIX4 ? AF_INET : AF_INET6;

		if (yget_str(&l->c, n, k->path, &s))
			return PC_EPARSE;
		if (pc_prefix_parse(s, &p) < 0 || p.addr.family != af)
			return yerr(
			    &l->c, n,
			    "%s: invalid prefix '%.64s'; expected an IPv%d prefix like '%s'",
			    k->path, s, af == AF_INET ? 4 : 6,
			    af == AF_INET ? "10.203.0.128/25" : "fd00:203::/64");
		memcpy(cfield(&l->cfg, k), &p, sizeof(p));
		return 0;
	}
	}
	return PC_EINVAL;
}

/* ---- the walk ---------------------------------------------------------- */

/* The distinct key names one level below prefix ("" = top level). */
static size_t ckeys_at(const char *prefix, char (*segs)[40], size_t max)
{
	size_t plen = strlen(prefix), n = 0;

	for (size_t i = 0; i < N_CKEYS; i++) {
		const char *p = ckeys[i].path, *seg;
		size_t sl, j;

		if (plen && (strncmp(p, prefix, plen) != 0 || p[plen] != '.'))
			continue;
		seg = plen ? p + plen + 1 : p;
		sl = strcspn(seg, ".");
		for (j = 0; j < n; j++)
			if (strlen(segs[j]) == sl && strncmp(segs[j], seg, sl) == 0)
				break;
		if (j == n && n < max)
			snprintf(segs[n++], sizeof(segs[0]), "%.*s", (int)sl, seg);
	}
	return n;
}

static int cwalk(struct cload *l, const struct ynode *m, const char *prefix);

static int cwalk_key(struct cload *l, const struct ynode *key, const struct ynode *val,
		     const char *prefix)
{
	char full[96], segs[24][40], where[64];
	const char *known[24];
	size_t n, idx, plen = strlen(prefix);

	if (strchr(key->str, '.') || key->len + plen + 2 > sizeof(full))
		goto unknown;
	snprintf(full, sizeof(full), "%s%s%s", prefix, plen ? "." : "", key->str);
	idx = ckey_index(full);
	if (idx < N_CKEYS) {
		int rc = cset(l, val, &ckeys[idx]);

		if (!rc)
			l->where[idx] = val;
		return rc;
	}
	for (size_t i = 0; i < N_CKEYS; i++) {
		size_t fl = strlen(full);

		if (strncmp(ckeys[i].path, full, fl) == 0 && ckeys[i].path[fl] == '.') {
			if (val->type != YN_MAP)
				return yerr_type(&l->c, val, full, "a mapping");
			return cwalk(l, val, full);
		}
	}
unknown:
	n = ckeys_at(prefix, segs, 24);
	for (size_t i = 0; i < n; i++)
		known[i] = segs[i];
	if (plen)
		snprintf(where, sizeof(where), "'%s'", prefix);
	else
		snprintf(where, sizeof(where), "the configuration");
	if (strchr(key->str, '.'))
		return yerr(
		    &l->c, key,
		    "unknown key '%.48s' in %s; write nested keys as mappings (a: {b: ...})",
		    key->str, where);
	yerr_unknown_key(&l->c, key, known, n, where);
	return PC_EPARSE;
}

static int cwalk(struct cload *l, const struct ynode *m, const char *prefix)
{
	int rc = 0;

	for (size_t i = 0; i < m->n && !l->c.d->gave_up; i++)
		if (cwalk_key(l, ymap_key(m, i), ymap_val(m, i), prefix))
			rc = PC_EPARSE;
	return rc;
}

/* Relations between keys, reported at the second key. */
static int config_cross_check(struct cload *l)
{
	struct config *c = &l->cfg;
	int rc = 0;
#define AT(key)	     (l->where[ckey_index(key)])
#define WHERE2(a, b) (AT(b) ? AT(b) : AT(a))

	if ((unsigned)c->queue.base + c->queue.count > 65536)
		rc = yerr(&l->c, WHERE2("queue.base", "queue.count"),
			  "queue.base + queue.count goes past queue number 65535; expected "
			  "base + count <= 65536");
	if (c->dns.ttl_min > c->dns.ttl_max)
		rc = yerr(&l->c, WHERE2("dns.ttl_min", "dns.ttl_max"),
			  "dns.ttl_min (%u) is above dns.ttl_max (%u); expected min <= max",
			  c->dns.ttl_min, c->dns.ttl_max);
	if (c->dns.learned_per_sandbox > c->dns.learned_total)
		rc = yerr(&l->c, WHERE2("dns.max_learned_total", "dns.max_learned_per_sandbox"),
			  "dns.max_learned_per_sandbox (%u) is above dns.max_learned_total (%u); "
			  "expected per_sandbox <= total",
			  c->dns.learned_per_sandbox, c->dns.learned_total);
	if (c->log.syslog.tls && !c->log.syslog.remote[0])
		rc = yerr(&l->c, AT("log.syslog.tls"),
			  "log.syslog.tls is true but log.syslog.remote is not set; expected a "
			  "collector \"host:port\" to send to");
	if (c->log.syslog.ca[0] && !c->log.syslog.tls)
		rc = yerr(&l->c, AT("log.syslog.ca"),
			  "log.syslog.ca is set but log.syslog.tls is false; expected tls: true "
			  "(the CA is only used for TLS)");
	if (c->log.witness.address[0] && !c->log.witness.key[0])
		rc = yerr(&l->c, AT("log.witness.address"),
			  "log.witness.address is set but log.witness.key is not; expected the "
			  "witness's public key file (its cosignatures are checked with it)");
	if (c->log.witness.required && !c->log.witness.address[0])
		rc = yerr(&l->c, AT("log.witness.required"),
			  "log.witness.required is true but log.witness.address is not set; "
			  "expected the witness's \"host:port\"");
#undef AT
#undef WHERE2
	return rc;
}

static int config_from_yaml(struct cload *l, const struct yfile *yf)
{
	const struct ynode *root;
	bool set[N_CKEYS];
	size_t bad;
	int rc;

	if (yf->n_docs > 1)
		return yerr(&l->c, yf->docs[1].root,
			    "a second YAML document; expected one configuration per file");
	if (yf->n_docs == 0 || ynode_is_null(yf->docs[0].root))
		return 0; /* an empty file: every default */
	root = yf->docs[0].root;
	if (root->type != YN_MAP)
		return yerr_type(&l->c, root, "configuration", "a mapping of settings");
	rc = cwalk(l, root, "");
	if (rc)
		return rc;
	for (size_t i = 0; i < N_CKEYS; i++)
		set[i] = l->where[i] != NULL;
	bad = config_derive(&l->cfg, set);
	if (bad < N_CKEYS)
		return yerr(&l->c, l->where[bad] ? l->where[bad] : root,
			    "%s: too long to hold the paths derived from it; expected at most "
			    "%d bytes",
			    ckeys[bad].path, PC_PATH_MAX - 16);
	return config_cross_check(l);
}

/* lines (N_CKEYS of them, may be NULL): the line of each key's value in
 * the file, 0 for keys not set there (portcullis config show). */
static int config_load_mem(const char *name, const char *basedir, const char *buf, size_t len,
			   struct config *cfg, unsigned *lines, struct diag *d)
{
	struct cload *l;
	struct yfile *yf = NULL;
	int rc;

	if (len > RULES_CONFIG_MAX)
		return diag_at(d, PC_EINVAL, name, 0, 0, "too large (%zu bytes, limit %u)", len,
			       RULES_CONFIG_MAX);
	l = calloc(1, sizeof(*l));
	if (!l)
		return diag_at(d, PC_ENOMEM, name, 0, 0, "out of memory");
	config_defaults(&l->cfg);
	if (pc_strlcpy(l->cfg.path, name, sizeof(l->cfg.path)) >= sizeof(l->cfg.path)) {
		rc = diag_at(d, PC_EINVAL, name, 0, 0, "configuration path too long");
		goto out;
	}
	l->c.d = d;
	l->basedir = basedir;
	rc = yfile_parse(name, buf, len, &yf, d);
	if (rc)
		goto out;
	l->c.file = yf->name;
	config_from_yaml(l, yf);
	rc = diag_code(d);
	if (!rc)
		*cfg = l->cfg;
	for (size_t i = 0; !rc && lines && i < N_CKEYS; i++)
		lines[i] = l->where[i] ? l->where[i]->line : 0;
out:
	yfile_free(yf);
	free(l);
	return rc;
}

/* The directory relative paths start from: the configuration's own,
 * made absolute when it can be so that a daemon's chdir does not move it. */
static void config_basedir(const char *path, char *out, size_t len)
{
	char dir[PC_PATH_MAX], *slash, *real;

	pc_strlcpy(dir, path, sizeof(dir));
	slash = strrchr(dir, '/');
	if (!slash)
		pc_strlcpy(dir, ".", sizeof(dir));
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	real = realpath(dir, NULL);
	pc_strlcpy(out, real ? real : dir, len);
	free(real);
}

static int config_load_lines(const char *path, struct config *cfg, unsigned *lines,
			     struct pc_err *err, pc_err_report_fn report, void *arg)
{
	char base[PC_PATH_MAX];
	struct pc_err rerr;
	struct diag d;
	char *buf = NULL;
	size_t len;
	int rc;

	diag_init(&d, err, report, arg);
	rc = pc_file_read_regular(path, RULES_CONFIG_MAX, &buf, &len, &rerr);
	if (rc)
		return diag_add(&d, &rerr);
	config_basedir(path, base, sizeof(base));
	rc = config_load_mem(path, base, buf, len, cfg, lines, &d);
	free(buf);
	return rc;
}

int config_load_report(const char *path, struct config *cfg, struct pc_err *err,
		       pc_err_report_fn report, void *arg)
{
	return config_load_lines(path, cfg, NULL, err, report, arg);
}

int config_load(const char *path, struct config *cfg, struct pc_err *err)
{
	return config_load_report(path, cfg, err, NULL, NULL);
}

int config_load_buffer(const char *name, const char *buf, size_t len, struct config *cfg,
		       struct pc_err *err)
{
	char base[PC_PATH_MAX], *slash;
	struct diag d;

	diag_init(&d, err, NULL, NULL);
	pc_strlcpy(base, name ? name : "", sizeof(base));
	slash = strrchr(base, '/');
	if (slash)
		*slash = '\0';
	else
		base[0] = '\0';
	return config_load_mem(name ? name : "<buffer>", base, buf, len, cfg, NULL, &d);
}

/* ---- the effective configuration (portcullis config show) ---------------
 * Every key of the table above with its value after defaults, derivation
 * and the file, and where that value came from: the answer to "what does
 * the daemon actually use?" that reading the file cannot give (a derived
 * path follows state_dir only when the file does not set it). */

/* One value in both forms: as shown to a person (lists as [a, b]) and as
 * JSON. */
static void cdesc_item(struct pc_buf *t, struct pc_json *j, const char *s, bool first)
{
	if (!first)
		pc_buf_puts(t, ", ");
	pc_buf_puts(t, s);
	pc_json_str(j, s);
}

static void cdesc_value(const struct config *cfg, const struct ckey *k, struct pc_buf *t,
			struct pc_json *j)
{
	const void *f = (const char *)cfg + k->off;
	char a[PC_ADDRSTRLEN + 8], p[PC_ADDRSTRLEN + 8];
	uint64_t v = 0;

	switch (k->type) {
	case CT_PATH:
	case CT_OPTPATH:
	case CT_IFNAME:
	case CT_USER:
	case CT_HOSTPORT:
		pc_buf_puts(t, f);
		pc_json_str(j, f);
		return;
	case CT_UINT:
		if (k->size == 2) {
			uint16_t x;

			memcpy(&x, f, 2);
			v = x;
		} else if (k->size == 4) {
			uint32_t x;

			memcpy(&x, f, 4);
			v = x;
		} else {
			memcpy(&v, f, 8);
		}
		/* no enterprise number: say what logd does instead (docs/logd.md) */
		if (v == 0 && strcmp(k->path, "log.syslog.enterprise_number") == 0) {
			pc_buf_puts(t, "none (no structured data: the fields as a JSON MSG)");
			pc_json_null(j);
			return;
		}
		pc_buf_u64(t, v);
		pc_json_u64(j, v);
		return;
	case CT_BOOL:
		pc_buf_puts(t, *(const bool *)f ? "true" : "false");
		pc_json_bool(j, *(const bool *)f);
		return;
	case CT_FACILITY:
		pc_buf_puts(t, syslog_facility_name(cfg->log.syslog.facility));
		pc_json_str(j, syslog_facility_name(cfg->log.syslog.facility));
		return;
	case CT_REFUSE:
		pc_buf_puts(t, cfg->dns.refuse == DNS_REFUSE_NXDOMAIN ? "nxdomain" : "refused");
		pc_json_str(j, cfg->dns.refuse == DNS_REFUSE_NXDOMAIN ? "nxdomain" : "refused");
		return;
	case CT_ENDPOINT:
		pc_endpoint_str(&cfg->vault.listen, a, sizeof(a));
		pc_buf_puts(t, a);
		pc_json_str(j, a);
		return;
	case CT_PREFIX4:
	case CT_PREFIX6: {
		const struct pc_prefix *px = f;

		if (!px->addr.family) { /* unset: the bridge's own subnet */
			pc_json_null(j);
			return;
		}
		snprintf(p, sizeof(p), "%s/%u", pc_addr_str(&px->addr, a, sizeof(a)), px->len);
		pc_buf_puts(t, p);
		pc_json_str(j, p);
		return;
	}
	case CT_QTYPES:
	case CT_RESOLVERS:
	case CT_IFNAMES:
	case CT_ROUTABLE:
		break;
	}
	/* the lists */
	pc_buf_putc(t, '[');
	pc_json_arr(j);
	if (k->type == CT_QTYPES) {
		bool first = true;

		for (size_t i = 0; rules_qtype_all[i]; i++) {
			uint32_t bit;

			if (rules_qtype_from_name(rules_qtype_all[i], &bit) == 0 &&
			    (cfg->dns.qtypes & bit)) {
				cdesc_item(t, j, rules_qtype_all[i], first);
				first = false;
			}
		}
	} else if (k->type == CT_RESOLVERS) {
		for (size_t i = 0; i < cfg->dns.n_resolvers; i++)
			cdesc_item(t, j, pc_addr_str(&cfg->dns.resolvers[i], a, sizeof(a)), i == 0);
	} else if (k->type == CT_IFNAMES) {
		for (size_t i = 0; i < cfg->n_uplinks; i++)
			cdesc_item(t, j, cfg->uplinks[i], i == 0);
	} else {
		for (size_t i = 0; i < cfg->dns.n_routable; i++) {
			snprintf(p, sizeof(p), "%s/%u",
				 pc_addr_str(&cfg->dns.routable[i].addr, a, sizeof(a)),
				 cfg->dns.routable[i].len);
			cdesc_item(t, j, p, i == 0);
		}
	}
	pc_buf_putc(t, ']');
	pc_json_arr_end(j);
}

void config_entries_free(struct config_entry *e, size_t n)
{
	for (size_t i = 0; e && i < n; i++) {
		free(e[i].text);
		free(e[i].json);
	}
	free(e);
}

int config_describe(const char *path, struct config *cfg, struct config_entry **out, size_t *n,
		    struct pc_err *err, pc_err_report_fn report, void *arg)
{
	unsigned lines[N_CKEYS];
	struct config c;
	struct config_entry *e;
	int rc = config_load_lines(path, &c, lines, err, report, arg);

	if (rc < 0)
		return rc;
	e = calloc(N_CKEYS, sizeof(*e));
	if (!e)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	for (size_t i = 0; i < N_CKEYS; i++) {
		struct pc_buf t = {0}, jb = {0};
		struct pc_json j;

		e[i].key = ckeys[i].path;
		if (lines[i]) {
			e[i].origin = CONFIG_FROM_FILE;
			e[i].line = lines[i];
		}
		for (size_t d = 0; !lines[i] && d < sizeof(cderived) / sizeof(cderived[0]); d++)
			if (strcmp(cderived[d].key, ckeys[i].path) == 0) {
				e[i].origin = CONFIG_DERIVED;
				e[i].from = cderived[d].base;
			}
		pc_json_init(&j, &jb);
		cdesc_value(&c, &ckeys[i], &t, &j);
		e[i].text = pc_buf_take(&t, NULL);
		e[i].json = pc_buf_take(&jb, NULL);
		if (!e[i].text || !e[i].json) {
			config_entries_free(e, i + 1);
			return pc_err_set(err, PC_ENOMEM, "out of memory");
		}
	}
	*out = e;
	*n = N_CKEYS;
	if (cfg)
		*cfg = c;
	return 0;
}

int config_uplinks_valid(const struct config *cfg, struct pc_err *err)
{
	if (!cfg->n_uplinks)
		return pc_err_set(err, PC_EINVAL,
				  "uplinks is not set; name the interface(s) toward the "
				  "upstream network (e.g. uplinks: [eth0]): nothing arriving on "
				  "any other interface is forwarded");
	for (size_t i = 0; i < cfg->n_uplinks; i++)
		if (strcmp(cfg->uplinks[i], cfg->bridge) == 0 || strcmp(cfg->uplinks[i], "lo") == 0)
			return pc_err_set(err, PC_EINVAL,
					  "uplinks: '%s' cannot be an uplink (the sandbox "
					  "bridge and lo are not)",
					  cfg->uplinks[i]);
	return 0;
}
