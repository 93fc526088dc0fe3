/* Sandboxes cut off while containment is in doubt (issue 18, point 2):
 * from the moment another program changes nftables until a containment
 * check requested after that change proves the guard again, every port of
 * the sandbox bridge is down. docs/engine.md, "Cut off until proven". */
#include "engine/engine_int.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define CUTOFF_LOG_MS 2000

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
	c->n_downed = 0;
}

void cutoff_check_done(struct engine *e, int result)
{
	struct engine_cutoff *c = &e->cut;
	char msg[400];

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

int cutoff_status_json(const struct engine *e, char **buf, size_t *len)
{
	const struct engine_cutoff *c = &e->cut;
	char t[40];
	int rc;

	rc = pc_buf_appendf(buf, len, ",\"cutoff\":{\"active\":%s,\"count\":%llu",
			    c->active ? "true" : "false", (unsigned long long)c->count);
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
			"another program changed nftables and no check has proven containment "
			"since; 0 otherwise.",
			e->cut.active);
	pc_prom_one_u64(b, "portcullis_engine_cutoffs_total", "counter",
			"Times the sandboxes were cut off after another program changed nftables.",
			e->cut.count);
	pc_prom_one_u64(b, "portcullis_engine_cutoff_failures_total", "counter",
			"Sandbox ports the cut-off could not take down.", e->cut.failures);
}
