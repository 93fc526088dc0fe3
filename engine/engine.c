/* The engine's life: privileged setup (probe, queues bound, table
 * installed, raw sockets, control socket), the queue threads, policy
 * reload with the re-judging of allowed flows, the bridge port set, and
 * shutdown. docs/engine.md says what happens when. */
#include "engine/engine_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define POLICY_LOG_MS 2000

struct rulehits *engine_hits_get(struct engine *e)
{
	struct rulehits *h;

	pthread_mutex_lock(&e->pol_lock);
	h = rulehits_ref(e->hits);
	pthread_mutex_unlock(&e->pol_lock);
	return h;
}

struct policy *engine_policy_get(struct engine *e)
{
	struct policy *p;

	pthread_mutex_lock(&e->pol_lock);
	p = policy_ref(e->policy);
	pthread_mutex_unlock(&e->pol_lock);
	return p;
}

/* A policy-load record from the control thread (best effort: the policy
 * is in force whether or not logd is up; traffic is what fails closed). */
static void log_policy(struct engine *e, bool ok, const char *hash, const char *msg)
{
	struct logrec r = {.action = LOGREC_POLICY_LOAD};
	struct pc_err err = {0};

	r.verdict = ok ? LOGREC_ALLOWED : LOGREC_REFUSED;
	r.policy = hash;
	r.reason = ok ? "policy in force" : "policy rejected; the previous one stays in force";
	r.message = msg;
	if (e->ctl_lc && logc_send_sync(e->ctl_lc, &r, POLICY_LOG_MS, &err) < 0)
		pc_log(PC_LOG_WARN, "policy record not logged: %s", err.msg);
}

static int ruleset_install(struct engine *e, const struct policy *pol, struct pc_err *err)
{
	struct nft_ruleset_params p = {&e->cfg, pol, NULL, 0, e->qpath};
	struct nft_ruleset *rs = NULL;
	int rc;

	pthread_rwlock_rdlock(&e->ports.lock);
	p.ports = e->ports.ports;
	p.n_ports = e->ports.n;
	rc = nft_ruleset_build(&p, &rs, err);
	pthread_rwlock_unlock(&e->ports.lock);
	if (rc == 0) {
		limitlog_tick(e); /* what the tables in place dropped: their counters go */
		rc = nft_apply(rs, err);
	}
	if (rc == 0)
		limitlog_tables_new(e, pol);
	nft_ruleset_free(rs);
	return rc;
}

/* The guard was put back after another program took part of it away: a
 * policy-load record (the policy is in force again from now on), best
 * effort as the others; the journal has it either way. */
static void log_restored(struct engine *e, bool ok, const char *msg)
{
	struct policy *pol = engine_policy_get(e);
	struct logrec r = {.action = LOGREC_POLICY_LOAD};
	struct pc_err err = {0};

	r.verdict = ok ? LOGREC_ALLOWED : LOGREC_REFUSED;
	r.policy = pol ? policy_hash(pol) : NULL;
	r.reason = ok ? "guard reinstalled after another program changed it"
		      : "guard changed by another program and not reinstalled; sandbox traffic "
			"is blackholed";
	r.message = msg;
	if (e->ctl_lc && logc_send_sync(e->ctl_lc, &r, POLICY_LOG_MS, &err) < 0)
		pc_log(PC_LOG_WARN, "reinstall record not logged: %s", err.msg);
	policy_unref(pol);
}

void engine_tables_restore(struct engine *e)
{
	struct policy *pol = engine_policy_get(e);
	struct pc_err err = {0};
	char msg[300], ebuf[600];
	uint64_t t0 = pc_now_mono_ms();
	int rc;

	/* cut off first: whatever the change opened is closed before anything
	 * else happens, and stays closed until a check proves the guard */
	snprintf(msg, sizeof(msg), "%s changed the tables inet/bridge %s", e->nftw.who, NFT_TABLE);
	cutoff_begin(e, msg);
	rc = pol ? ruleset_install(e, pol, &err) : pc_err_set(&err, PC_EINVAL, "no policy");
	e->nftw.other = false; /* the check below covers other tables too */
	policy_unref(pol);
	if (rc == 0) {
		snprintf(msg, sizeof(msg),
			 "nftables: tables inet/bridge %s changed by %s; reinstalled in %llu ms",
			 NFT_TABLE, e->nftw.who, (unsigned long long)(pc_now_mono_ms() - t0));
		pc_log(PC_LOG_WARN, "%s", msg);
	} else {
		snprintf(msg, sizeof(msg),
			 "nftables: tables inet/bridge %s changed by %s; reinstalling failed: %s",
			 NFT_TABLE, e->nftw.who, pc_err_str(&err, ebuf, sizeof(ebuf)));
		pc_log(PC_LOG_ERR, "%s", msg);
	}
	if (rc == 0)
		e->guard.tables_ok++;
	else
		e->guard.tables_failed++;
	log_restored(e, rc == 0, msg);
	checkrun_request(e, "nftables");
}

/* A foreign table can still open a way out without touching ours (a chain
 * before ours that sets our mark bits, a dup, a netdev hook): the check
 * that would find it runs now, not at the next reload, so that
 * engine_check_result stops saying "proven" as soon as it is not. */
void engine_nft_other_changed(struct engine *e)
{
	char why[160];

	pc_log(PC_LOG_NOTICE, "nftables: %s changed another table; checking containment again",
	       e->nftw.other_who);
	snprintf(why, sizeof(why), "%s changed another nftables table", e->nftw.other_who);
	cutoff_begin(e, why);
	e->nftw.other = false;
	e->guard.other++;
	checkrun_request(e, "foreign");
}

void engine_routing_restore(struct engine *e)
{
	struct pc_err err = {0};
	char msg[300], ebuf[600];
	size_t added = 0;
	int rc = routing_ensure(e->cfg.bridge, &added, &err);

	if (rc == 0 && added == 0)
		return; /* an event about something else, or our own addition */
	if (rc == 0) {
		snprintf(msg, sizeof(msg),
			 "routing: %zu rule%s/route%s of bridge %s were missing; reinstalled",
			 added, added == 1 ? "" : "s", added == 1 ? "" : "s", e->cfg.bridge);
		pc_log(PC_LOG_WARN, "%s", msg);
	} else {
		snprintf(msg, sizeof(msg),
			 "routing: reinstalling the rules of bridge %s failed: %s", e->cfg.bridge,
			 pc_err_str(&err, ebuf, sizeof(ebuf)));
		pc_log(PC_LOG_ERR, "%s", msg);
	}
	if (rc == 0)
		e->guard.routing_ok++;
	else
		e->guard.routing_failed++;
	log_restored(e, rc == 0, msg);
	checkrun_request(e, "routing");
}

/* What stops the engine from starting that its configuration decides
 * (uplinks, engine.user): rules/startcheck.c's list, the one `policy lint`
 * reports, so that -t, the start and lint give one answer. */
int engine_config_valid(const struct config *cfg, struct pc_err *err)
{
	return config_start_check(cfg, CFGD_ENGINE, NULL, NULL, err);
}

static bool ports_equal(const struct nft_port *a, size_t na, const struct nft_port *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (a[i].ifindex != b[i].ifindex || strcmp(a[i].name, b[i].name) != 0)
			return false;
	return true;
}

int engine_ports_refresh(struct engine *e, bool force, struct pc_err *err)
{
	struct nft_port *ports = NULL;
	size_t n = 0;
	uint32_t bri = 0;
	unsigned brf = 0;
	bool same;
	int rc;

	rc = links_bridge_ports(e->cfg.bridge, &ports, &n, &bri, &brf, err);
	if (rc)
		return rc;
	if (bri) /* what the bridge's next event is compared with (cutoff.c) */
		e->cut.br_flags = brf;
	pthread_rwlock_rdlock(&e->ports.lock);
	same = ports_equal(e->ports.ports, e->ports.n, ports, n);
	pthread_rwlock_unlock(&e->ports.lock);
	if (same && !force) {
		free(ports);
		return 0;
	}
	if (!force) {
		rc = nft_ports_update(ports, n, err);
		if (rc) {
			free(ports);
			return rc;
		}
		checkrun_request(e, "ports"); /* the port set is part of the table */
	}
	for (size_t i = 0; i < n; i++)
		if (ports[i].ifindex > NFT_MARK_PORT_MASK)
			pc_log(PC_LOG_ERR,
			       "bridge port %s: ifindex %u does not fit the port stamp; "
			       "its traffic is dropped",
			       ports[i].name, ports[i].ifindex);
	e->br_ifindex = bri;
	portmap_set(&e->ports, ports, n);
	pc_log(PC_LOG_INFO, "bridge %s: %zu port%s", e->cfg.bridge, n, n == 1 ? "" : "s");
	return 0;
}

int engine_local_refresh(struct engine *e, struct pc_err *err)
{
	struct dnsguard_local *l = NULL;
	size_t n = 0;
	int rc = links_local_prefixes(&e->cfg, &l, &n, err);

	if (rc == 0)
		rc = dnsguard_local_set(e->dg, l, n, err);
	free(l);
	return rc;
}

void engine_init(struct engine *e)
{
	memset(e, 0, sizeof(*e));
	e->ctl_fd = e->sig_fd = e->link_fd = e->nfq_proc_fd = -1;
	e->route_fd = e->nft_fd = -1;
	e->chk.fd = -1;
	e->chk.result = -1;
	e->httpm.fd = -1;
	for (size_t i = 0; i < HTTPM_CLIENTS; i++)
		e->httpm.c[i].fd = -1;
	e->dnsr.fd4 = e->dnsr.fd6 = -1;
	pthread_mutex_init(&e->pol_lock, NULL);
	quota_stats_init(&e->quota);
	pthread_rwlock_init(&e->ports.lock, NULL);
	e->start_ms = pc_now_mono_ms();
}

int engine_setup(struct engine *e, const char *config_path, struct pc_err *err)
{
	char path[PC_PATH_MAX + 32];
	int rc;

	rc = config_load(config_path, &e->cfg, err);
	if (rc)
		return rc;
	rc = engine_config_valid(&e->cfg, err);
	if (rc)
		return rc;
	rc = policy_load_dir(e->cfg.rules_dir, &e->cfg, &e->policy, err);
	if (rc)
		return rc;
	/* Kept before it goes in force, so that no record names a policy an
	 * auditor cannot find (docs/policy.md, "Policies kept by hash"); the
	 * directory while still root, for the drop that follows. */
	rc = polstore_prepare(&e->cfg, err);
	if (rc == 0)
		rc = polstore_put_cfg(&e->cfg, e->policy, err);
	if (rc)
		return rc;
	if (rulehits_new(e->policy, &e->hits) < 0)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	rc = dnsguard_new(&e->cfg, &e->dg, err);
	if (rc)
		return rc;
	/* Before any packet is queued: no answer may teach the gateway's or
	 * the sandboxes' own addresses. */
	rc = engine_local_refresh(e, err);
	if (rc)
		return rc;
	if (flow_registry_new(e->cfg.engine.flows_max, &e->flows) < 0)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	rc = nft_probe_queue(&e->qpath, err);
	if (rc)
		return rc;
	pc_log(PC_LOG_NOTICE, "queue path: %s (%s)", nft_queue_path_name(e->qpath),
	       e->qpath == NFT_QUEUE_NATIVE ? "nft queue expression"
					    : "xt NFQUEUE target through nft_compat");
	/* Queues first: once the table is in, packets are queued to us. */
	e->q = calloc(e->cfg.queue.count, sizeof(*e->q));
	if (!e->q)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	e->nq = e->cfg.queue.count; /* only now: shutdown walks e->q */
	for (size_t i = 0; i < e->nq; i++) {
		struct qthread *t = &e->q[i];

		t->e = e;
		t->num = (uint16_t)(e->cfg.queue.base + i);
		rc = queue_open(t, err);
		if (rc)
			return rc;
		if (held_table_new(e->cfg.engine.flows_max < 4096 ? e->cfg.engine.flows_max : 4096,
				   &t->held) < 0)
			return pc_err_set(err, PC_ENOMEM, "out of memory");
		if (dnstcp_table_new(DNSTCP_STREAMS_MAX, &t->dnstcp) < 0)
			return pc_err_set(err, PC_ENOMEM, "out of memory");
		rc = logc_open(e->cfg.log.socket, &t->lc, err);
		if (rc)
			return rc;
		/* The queue threads' records go through a ring: no sleep and
		 * wake-up per batch while logd keeps up (docs/engine.md). A
		 * ring that cannot be made now is made on the next send. */
		logc_use_ring(t->lc, NULL);
	}
	rc = logc_open(e->cfg.log.socket, &e->ctl_lc, err);
	if (rc)
		return rc;
	rc = engine_ports_refresh(e, true, err);
	if (rc)
		return rc;
	/* Watch before installing: a change made between the install and the
	 * first poll is not missed (our own batches are recognised). */
	e->nft_fd = nftwatch_open(err);
	if (e->nft_fd < 0)
		return e->nft_fd;
	e->route_fd = routing_monitor_open(err);
	if (e->route_fd < 0)
		return e->route_fd;
	/* The routing rules first: until the tables mark anything, sandbox
	 * traffic is blackholed (fail closed), never forwarded. */
	{
		size_t added = 0;

		rc = routing_ensure(e->cfg.bridge, &added, err);
		if (rc) {
			pc_err_prefix(err, "installing the routing rules: ");
			return rc;
		}
		pc_log(PC_LOG_NOTICE,
		       "routing: bridge %s routed only when marked (rules %u-%u, blackhole table "
		       "%u; %zu added)",
		       e->cfg.bridge, NFT_ROUTE_PRIO_MARK, NFT_ROUTE_PRIO_DROP, NFT_ROUTE_TABLE,
		       added);
	}
	rc = ruleset_install(e, e->policy, err);
	if (rc) {
		pc_err_prefix(err, "installing the nftables tables: ");
		return rc;
	}
	pc_log(PC_LOG_NOTICE, "tables inet/bridge %s installed; policy %s", NFT_TABLE,
	       policy_hash(e->policy));
	rc = dnsreply_open(&e->dnsr, err);
	if (rc)
		return rc;
	e->nfq_proc_fd = open("/proc/net/netfilter/nfnetlink_queue", O_RDONLY | O_CLOEXEC);
	if (e->nfq_proc_fd < 0)
		pc_log(PC_LOG_WARN, "kernel queue counters unavailable: %s", strerror(errno));
	e->link_fd = links_monitor_open(err);
	if (e->link_fd < 0)
		return e->link_fd;
	if (mkdir(e->cfg.run_dir, 0755) < 0 && errno != EEXIST)
		return pc_err_errno(err, PC_EIO, "creating %s", e->cfg.run_dir);
	snprintf(path, sizeof(path), "%s/%s", e->cfg.run_dir, PC_ENGINE_SOCK);
	/* Anyone may ask for status; reload checks the peer's uid. */
	e->ctl_fd = pc_unix_listen(path, 0666, (uid_t)-1, (gid_t)-1, err);
	if (e->ctl_fd < 0)
		return e->ctl_fd;
	if (fcntl(e->ctl_fd, F_SETFL, fcntl(e->ctl_fd, F_GETFL) | O_NONBLOCK) < 0)
		return pc_err_errno(err, PC_EIO, "control socket");
	rc = httpm_open(e, err); /* engine.metrics_port / metrics_listen; off by default */
	if (rc)
		return rc;
	log_policy(e, true, policy_hash(e->policy), "loaded at start");
	return 0;
}

int engine_start_threads(struct engine *e, struct pc_err *err)
{
	for (size_t i = 0; i < e->nq; i++) {
		int rc = pthread_create(&e->q[i].tid, NULL, queue_thread_main, &e->q[i]);

		if (rc) {
			errno = rc;
			return pc_err_errno(err, PC_EIO, "starting queue thread %u", e->q[i].num);
		}
		e->q[i].started = true;
	}
	return 0;
}

/* Wait (bounded) until every batch a queue thread began before now has
 * its verdicts, the window of batches awaiting logd's acknowledgement
 * included: after that, every verdict issued follows the new policy. */
static void wait_batches(struct engine *e)
{
	uint64_t want[64], deadline = pc_now_mono_ms() + 2000;

	for (size_t i = 0; i < e->nq && i < 64; i++)
		want[i] = atomic_load(&e->q[i].begun);
	for (size_t i = 0; i < e->nq && i < 64; i++)
		while (atomic_load(&e->q[i].done) < want[i] && pc_now_mono_ms() < deadline)
			usleep(1000);
}

/* A flow the new policy does not allow, and whose it was: the sandbox
 * the flow registry filed it under, else the one the old policy gives its
 * source address ("" when neither knows). */
struct cut_flow {
	struct ct_tuple t;
	const char *why;
	char sandbox[POLICY_NAME_MAX];
};

struct rejudge {
	struct engine *e;
	struct decide_ctx c;
	const struct policy *old;
	struct cut_flow *cut;
	size_t n, cap;
	size_t kept;
};

static int rejudge_visit(const struct ct_tuple *t, void *arg)
{
	struct rejudge *rj = arg;
	struct flow_key k;
	struct flow_meta m;
	struct cut_flow *f;
	bool have;
	const char *why = NULL;

	flow_key_from_ct(&k, t);
	have = flow_registry_get(rj->e->flows, &k, &m);
	if (decide_rejudge(&rj->c, &k, have ? &m : NULL, (t->mark & NFT_MARK_VAULT) != 0, &why)) {
		rj->kept++;
		return 0;
	}
	if (rj->n == rj->cap) {
		size_t cap = rj->cap ? rj->cap * 2 : 64;
		struct cut_flow *nc = realloc(rj->cut, cap * sizeof(*nc));

		if (!nc)
			return PC_ENOMEM;
		rj->cut = nc;
		rj->cap = cap;
	}
	f = &rj->cut[rj->n++];
	f->t = *t;
	f->why = why;
	f->sandbox[0] = '\0';
	if (have) {
		pc_strlcpy(f->sandbox, m.sandbox, sizeof(f->sandbox));
	} else if (rj->old) {
		const struct policy_sandbox *sb = policy_sandbox_by_source(rj->old, &t->src);

		if (sb)
			pc_strlcpy(f->sandbox, sb->name, sizeof(f->sandbox));
	}
	return 0;
}

/* The flows of one sandbox that left the policy. */
struct ended {
	const char *sandbox; /* a cut_flow's */
	size_t tcp, udp, other, vault;
};

/* What a cut is recorded as (docs/engine.md, "Reload"). A flow whose
 * sandbox is still in the policy lost its permission: a refusal, naming
 * the sandbox. A flow whose sandbox left the policy (`portcullis sandbox
 * run` ending, or the admin removing it) was refused nothing: it ended
 * with its sandbox, and one informational record per sandbox says so and
 * counts them; a refusal per flow made every sandbox's exit look like an
 * attack to a SIEM. Either way the flow is cut. */
static void rejudge_log(struct engine *e, const struct policy *pol, const struct cut_flow *cut,
			size_t n)
{
	struct ended *ended = n ? calloc(n, sizeof(*ended)) : NULL;
	struct pc_err err = {0};
	size_t n_ended = 0;
	char msg[300];

	for (size_t i = 0; i < n; i++) {
		const struct cut_flow *f = &cut[i];
		struct logrec r = {.action = LOGREC_CONNECT, .verdict = LOGREC_REFUSED};
		size_t j;

		if (f->sandbox[0] && !policy_sandbox_by_name(pol, f->sandbox) && ended) {
			for (j = 0; j < n_ended && strcmp(ended[j].sandbox, f->sandbox); j++)
				;
			if (j == n_ended)
				ended[n_ended++].sandbox = f->sandbox;
			ended[j].tcp += f->t.proto == IPPROTO_TCP;
			ended[j].udp += f->t.proto == IPPROTO_UDP;
			ended[j].other += f->t.proto != IPPROTO_TCP && f->t.proto != IPPROTO_UDP;
			ended[j].vault += (f->t.mark & NFT_MARK_VAULT) != 0;
			continue;
		}
		r.sandbox = f->sandbox[0] ? f->sandbox : NULL;
		r.policy = policy_hash(pol);
		r.reason = f->why;
		r.src.addr = f->t.src;
		r.src.port = f->t.sport;
		r.dst.addr = f->t.dst;
		r.dst.port = f->t.dport;
		r.transport = f->t.proto;
		if (e->ctl_lc && logc_send(e->ctl_lc, &r, &err) < 0)
			pc_log(PC_LOG_WARN, "reload: cut flow not logged: %s", err.msg);
	}
	for (size_t j = 0; j < n_ended; j++) {
		const struct ended *x = &ended[j];
		size_t all = x->tcp + x->udp + x->other;
		struct logrec r = {.action = LOGREC_CONNECT,
				   .verdict = LOGREC_NONE,
				   .sandbox = x->sandbox,
				   .policy = policy_hash(pol),
				   .reason = "sandbox left the policy: its flows ended with it",
				   .message = msg};

		snprintf(msg, sizeof(msg),
			 "%zu flow%s of sandbox %s ended with it (%zu TCP, %zu UDP, %zu other; %zu "
			 "through the vault)",
			 all, all == 1 ? "" : "s", x->sandbox, x->tcp, x->udp, x->other, x->vault);
		if (e->ctl_lc && logc_send(e->ctl_lc, &r, &err) < 0)
			pc_log(PC_LOG_WARN, "reload: ended flows not logged: %s", err.msg);
	}
	if (n && e->ctl_lc && logc_flush(e->ctl_lc, POLICY_LOG_MS, &err) < 0)
		pc_log(PC_LOG_WARN, "reload: cut flows not logged: %s", err.msg);
	free(ended);
}

/* Cut the allowed flows the new policy does not allow: their conntrack
 * entries are deleted, so their next packet is a new, non-SYN flow that
 * the engine answers with a RST (docs/engine.md, "Reload"). */
static void rejudge_flows(struct engine *e, struct policy *pol, const struct policy *old)
{
	struct rejudge rj = {.e = e, .old = old};
	struct pc_err err = {0};

	rj.c.cfg = &e->cfg;
	rj.c.policy = pol;
	rj.c.dg = e->dg;
	rj.c.ports = &e->ports;
	rj.c.now_ms = pc_now_mono_ms();
	if (ct_dump_marked(NFT_MARK_ALLOW, NFT_MARK_ALLOW, rejudge_visit, &rj, &err) < 0)
		pc_log(PC_LOG_ERR, "reload: listing allowed flows: %s", err.msg);
	for (size_t i = 0; i < rj.n; i++) {
		struct flow_key k;

		if (ct_delete(&rj.cut[i].t, &err) < 0)
			pc_log(PC_LOG_ERR, "reload: cutting a flow: %s", err.msg);
		flow_key_from_ct(&k, &rj.cut[i].t);
		flow_registry_del(e->flows, &k);
	}
	rejudge_log(e, pol, rj.cut, rj.n);
	pc_log(PC_LOG_NOTICE, "reload: %zu allowed flow%s kept, %zu cut", rj.kept,
	       rj.kept == 1 ? "" : "s", rj.n);
	free(rj.cut);
}

int engine_reload(struct engine *e, struct pc_err *err)
{
	struct policy *np = NULL, *old;
	struct rulehits *nh = NULL, *oh;
	char ebuf[1024];
	int rc;

	pc_sd_notify("RELOADING=1", NULL);
	rc = policy_load_dir_since(e->cfg.rules_dir, &e->cfg, e->policy, &np, err);
	/* a policy the store cannot keep is not put in force */
	if (rc == 0)
		rc = polstore_put_cfg(&e->cfg, np, err);
	if (rc == 0 && rulehits_new(np, &nh) < 0)
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
	if (rc == 0) {
		rc = ruleset_install(e, np, err);
		if (rc)
			pc_err_prefix(err, "installing the new tables: ");
	}
	if (rc) {
		rulehits_unref(nh);
		policy_unref(np);
		pc_log(PC_LOG_ERR, "reload refused, previous policy stays in force: %s",
		       pc_err_str(err, ebuf, sizeof(ebuf)));
		log_policy(e, false, policy_hash(e->policy), pc_err_str(err, ebuf, sizeof(ebuf)));
		pc_sd_notify("READY=1", NULL);
		return rc;
	}
	pthread_mutex_lock(&e->pol_lock);
	old = e->policy;
	e->policy = np;
	oh = e->hits; /* the new policy's rules count from 0 */
	e->hits = nh;
	pthread_mutex_unlock(&e->pol_lock);
	wait_batches(e);
	rulehits_unref(oh);
	dnsguard_prune(e->dg, np);
	rejudge_flows(e, np, old);
	policy_unref(old);
	pc_log(PC_LOG_NOTICE, "policy %s in force", policy_hash(np));
	log_policy(e, true, policy_hash(np), "reloaded");
	pc_sd_notify("READY=1", NULL);
	return 0;
}

static int seen_visit(const struct ct_tuple *t, void *arg)
{
	struct engine *e = arg;
	struct flow_key k;

	flow_key_from_ct(&k, t);
	flow_registry_seen(e->flows, &k);
	return 0;
}

/* The verdict records of allowed DNS queries that were deferred to their
 * answer and got none (docs/dnsguard.md, "One record per query"): written
 * from the control thread's connection. all: every outstanding one (the
 * engine is stopping). Records logd does not take stay owed, counted in
 * their sandbox's share, for the next round: a query that already left
 * cannot be refused, but its record can wait. Only when the engine stops
 * are they said on stderr instead, with the name. A batch logd took in
 * part and failed to acknowledge is sent again whole: a record twice
 * rather than none. */
static void engine_dns_owed(struct engine *e, bool all)
{
	struct dnsguard_owed o[64];
	size_t n;

	while ((n = dnsguard_owed_peek(e->dg, pc_now_mono_ms(), all, o, 64)) > 0) {
		struct pc_err err = {0};
		bool ok = e->ctl_lc != NULL;

		for (size_t i = 0; i < n && ok; i++) {
			struct logrec r;

			decision_owed_rec(&o[i], &r);
			r.message = o[i].why;
			ok = logc_send(e->ctl_lc, &r, &err) == 0;
		}
		if (ok)
			ok = logc_flush(e->ctl_lc, POLICY_LOG_MS, &err) == 0;
		if (!ok && !all) {
			pc_log(PC_LOG_ERR,
			       "DNS query records not logged yet (%s): kept for the next round; "
			       "their sandboxes' new queries are refused past their share",
			       err.msg[0] ? err.msg : "no log client");
			return;
		}
		if (!ok)
			for (size_t i = 0; i < n; i++)
				pc_log(PC_LOG_ERR,
				       "DNS query record not logged (%s): sandbox %s asked %s (%s)",
				       err.msg[0] ? err.msg : "no log client", o[i].sandbox,
				       o[i].qname, o[i].why);
		dnsguard_owed_done(e->dg, n);
		if (n < 64)
			break;
	}
}

void engine_dns_repledge(struct engine *e)
{
	struct dnsguard_owed *o;
	struct pc_err err = {0};
	uint64_t conns, after;
	long n;

	if (!e->ctl_lc || logc_keepalive(e->ctl_lc, &conns, &err) < 0 || conns == e->pledged_conns)
		return; /* logd down: the next round tries again */
	/* before the snapshot: a query registered after it is pledged by a
	 * queue thread that sees the new count, in a ring it found alive */
	atomic_fetch_add(&e->logd_gen, 1);
	n = dnsguard_owed_all(e->dg, &o);
	if (n < 0) {
		pc_log(PC_LOG_ERR, "pledging DNS query records again: out of memory (next round)");
		return;
	}
	for (long i = 0; i < n; i++) {
		struct logrec r;

		decision_owed_rec(&o[i], &r);
		r.redeems = 0;
		r.pledge = o[i].pledge;
		if (logc_pledge(e->ctl_lc, &r, &err) < 0) {
			free(o);
			pc_log(PC_LOG_WARN, "pledging DNS query records again: %s (next round)",
			       err.msg);
			return;
		}
	}
	free(o);
	/* all on one connection: a new one since holds none of them */
	if (logc_keepalive(e->ctl_lc, &after, &err) < 0 || after != conns)
		return;
	e->pledged_conns = conns;
	if (n)
		pc_log(PC_LOG_NOTICE,
		       "logd's session is new: %ld DNS query record%s still owed pledged again", n,
		       n == 1 ? "" : "s");
}

void engine_housekeeping(struct engine *e)
{
	struct pc_err err = {0};

	engine_dns_owed(e, false);
	limitlog_tick(e);

	/* Forget registry entries whose conntrack entry is gone. */
	flow_registry_unsee_all(e->flows);
	if (ct_dump_marked(NFT_MARK_ALLOW, NFT_MARK_ALLOW, seen_visit, e, &err) < 0) {
		pc_log(PC_LOG_WARN, "housekeeping: %s", err.msg);
		return; /* keep everything rather than forget live flows */
	}
	flow_registry_sweep(e->flows);
}

void engine_shutdown(struct engine *e)
{
	struct pc_err err = {0};

	atomic_store(&e->stop, true);
	checkrun_stop(e);
	cutoff_shutdown(e);
	for (size_t i = 0; i < e->nq; i++)
		if (e->q[i].started)
			pthread_join(e->q[i].tid, NULL);
	engine_dns_owed(e, true);
	limitlog_tick(e); /* the last summary, before the tables may go */
	if (e->cfg.engine.remove_on_exit) {
		if (nft_remove(&err) < 0)
			pc_log(PC_LOG_ERR, "removing the tables: %s", err.msg);
		else
			pc_log(PC_LOG_NOTICE, "tables removed (engine.remove_table_on_exit)");
		if (e->route_fd >= 0 && routing_remove(e->cfg.bridge, &err) < 0)
			pc_log(PC_LOG_ERR, "removing the routing rules: %s", err.msg);
	} else {
		pc_log(PC_LOG_NOTICE, "tables and routing rules left in place: no engine, no "
				      "traffic");
	}
	for (size_t i = 0; i < e->nq; i++) {
		queue_close(&e->q[i]);
		logc_close(e->q[i].lc);
		held_table_free(e->q[i].held);
		dnstcp_table_free(e->q[i].dnstcp);
	}
	free(e->q);
	e->q = NULL;
	logc_close(e->ctl_lc);
	limitlog_free(e);
	dnsreply_close(&e->dnsr);
	httpm_close(e);
	{
		const int fds[] = {e->ctl_fd, e->link_fd, e->route_fd,
				   e->nft_fd, e->sig_fd,  e->nfq_proc_fd};

		for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
	dnsguard_free(e->dg);
	flow_registry_free(e->flows);
	quota_stats_free(&e->quota);
	portmap_set(&e->ports, NULL, 0);
	rulehits_unref(e->hits);
	e->hits = NULL;
	policy_unref(e->policy);
	e->policy = NULL;
}
