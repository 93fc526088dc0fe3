/* What stops a daemon from starting that its configuration decides (with
 * this machine's users): the one list that portcullisd, portcullis-vault
 * and portcullis-logd check at start and with -t, and that `policy lint`
 * reports as errors for all three. Kept in one place so that lint and -t
 * cannot disagree again (issue 36: lint warned, exit 0, where -t refused,
 * and -t said ok where the start would fail). */
#include "rules/rules_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void config_item_pos(const char *path, const char *const *keys, long idx, unsigned *line,
		     unsigned *col)
{
	struct diag d;
	struct yfile *yf = NULL;
	char *buf = NULL;
	size_t len;

	*line = *col = 1;
	diag_init(&d, NULL, NULL, NULL);
	if (pc_file_read_regular(path, RULES_FILE_MAX, &buf, &len, NULL) == 0 &&
	    yfile_parse(path, buf, len, &yf, &d) == 0 && yf->n_docs) {
		const struct ynode *n = yf->docs[0].root;

		for (size_t i = 0; n && keys[i]; i++)
			n = ymap_get(n, keys[i]);
		/* a list's item; one value written without a list is item 0 */
		if (n && idx >= 0 && n->type == YN_SEQ)
			n = (size_t)idx < n->n ? n->kids[idx] : n;
		if (n) {
			*line = n->line;
			*col = n->col;
		}
	}
	yfile_free(yf);
	free(buf);
}

void config_key_pos(const char *path, const char *a, const char *b, unsigned *line, unsigned *col)
{
	const char *keys[] = {a, b, NULL};

	config_item_pos(path, keys, -1, line, col);
}

struct startck {
	const struct config *cfg;
	unsigned mask;
	config_refusal_fn report;
	void *arg;
	struct pc_err *err;
	int rc;
};

static const char *daemons_str(unsigned who, char *buf, size_t len)
{
	static const char *const names[] = {"portcullisd", "portcullis-vault", "portcullis-logd"};
	size_t n = 0, k = 0;

	for (unsigned i = 0; i < 3; i++)
		n += (who >> i) & 1u;
	buf[0] = '\0';
	for (unsigned i = 0; i < 3; i++) {
		size_t off = strlen(buf);

		if (!((who >> i) & 1u))
			continue;
		k++;
		snprintf(buf + off, len - off, "%s%s",
			 k == 1	  ? ""
			 : k == n ? " and "
				  : ", ",
			 names[i]);
	}
	return buf;
}

/* One reason: who (a CFGD_* mask) would refuse, at key a.b. */
static void refuse(struct startck *s, unsigned who, const char *a, const char *b, const char *why)
{
	struct pc_err e = {0};
	char names[96];
	unsigned line, col;

	who &= s->mask;
	if (!who)
		return;
	config_key_pos(s->cfg->path, a, b, &line, &col);
	pc_err_set_at(&e, PC_EINVAL, s->cfg->path, line, col, "%s would refuse to start: %s",
		      daemons_str(who, names, sizeof(names)), why);
	if (s->report)
		s->report(&e, s->arg);
	if (!s->rc) {
		s->rc = PC_EINVAL;
		if (s->err)
			*s->err = e;
	}
}

struct cuser {
	bool exists;
	uid_t uid;
	gid_t gid;
};

static struct cuser cuser_get(const char *name)
{
	struct cuser u = {0};

	u.exists = pc_user_lookup(name, &u.uid, &u.gid, NULL) == 0;
	return u;
}

int config_start_check(const struct config *cfg, unsigned mask, config_refusal_fn report, void *arg,
		       struct pc_err *err)
{
	struct startck s = {cfg, mask, report, arg, err, 0};
	struct cuser eu = cuser_get(cfg->engine.user), vu = cuser_get(cfg->vault.user),
		     wu = cuser_get(cfg->vault.worker_user), lu = cuser_get(cfg->log.user);
	char why[512];
	struct pc_err ue = {0};

	/* the uplinks the ruleset forwards from (docs/engine.md, "Uplinks") */
	if (config_uplinks_valid(cfg, &ue) < 0)
		refuse(&s, CFGD_ENGINE, "uplinks", NULL, ue.msg);

	/* Each daemon drops to its user after its setup (pc_privdrop refuses
	 * uid 0); logd tells its senders apart by uid, so the engine's and
	 * the vault's users must be neither root nor one another. */
	if (!eu.exists) {
		snprintf(why, sizeof(why),
			 "engine.user: no user '%s' on this machine (it drops to this user "
			 "after its setup)",
			 cfg->engine.user);
		refuse(&s, CFGD_ENGINE, "engine", "user", why);
	} else if (eu.uid == 0) {
		snprintf(why, sizeof(why),
			 "engine.user: '%s' has uid 0 (it never runs as root after its "
			 "setup); expected its own system user",
			 cfg->engine.user);
		refuse(&s, CFGD_ENGINE | CFGD_LOGD, "engine", "user", why);
	}
	if (!vu.exists) {
		snprintf(why, sizeof(why),
			 "vault.user: no user '%s' on this machine (it drops to this user "
			 "after its setup)",
			 cfg->vault.user);
		refuse(&s, CFGD_VAULT, "vault", "user", why);
	} else if (vu.uid == 0) {
		snprintf(why, sizeof(why),
			 "vault.user: '%s' has uid 0 (it never runs as root after its "
			 "setup); expected its own system user",
			 cfg->vault.user);
		refuse(&s, CFGD_VAULT | CFGD_LOGD, "vault", "user", why);
	} else if (eu.exists && eu.uid == vu.uid) {
		snprintf(why, sizeof(why),
			 "vault.user: '%s' is engine.user's uid %ld: the log tells the "
			 "engine's records from the vault's by uid; expected a user of its own",
			 cfg->vault.user, (long)vu.uid);
		refuse(&s, CFGD_LOGD, "vault", "user", why);
	}
	/* the vault's workers: their own user and group (docs/vault.md,
	 * "Processes"), so that a worker taken over holds nothing of the
	 * vault's */
	if (!wu.exists) {
		snprintf(why, sizeof(why),
			 "vault.worker_user: no user '%s' on this machine (the package creates "
			 "portcullis-vworker)",
			 cfg->vault.worker_user);
		refuse(&s, CFGD_VAULT, "vault", "worker_user", why);
	} else if (wu.uid == 0 || wu.gid == 0 ||
		   (vu.exists && (wu.uid == vu.uid || wu.gid == vu.gid))) {
		snprintf(why, sizeof(why),
			 "vault.worker_user: '%s' must be a user and group of its own, neither "
			 "root nor vault.user's ('%s')",
			 cfg->vault.worker_user, cfg->vault.user);
		refuse(&s, CFGD_VAULT | (wu.uid == 0 ? CFGD_LOGD : 0u), "vault", "worker_user",
		       why);
	} else if (eu.exists && eu.uid == wu.uid) {
		snprintf(why, sizeof(why),
			 "vault.worker_user: '%s' is engine.user's uid %ld: the log tells the "
			 "engine's records from the vault's by uid; expected a user of its own",
			 cfg->vault.worker_user, (long)wu.uid);
		refuse(&s, CFGD_LOGD, "vault", "worker_user", why);
	}
	if (!lu.exists) {
		snprintf(why, sizeof(why),
			 "log.user: no user '%s' on this machine (it drops to this user after "
			 "its setup)",
			 cfg->log.user);
		refuse(&s, CFGD_LOGD, "log", "user", why);
	} else if (lu.uid == 0) {
		snprintf(why, sizeof(why),
			 "log.user: '%s' has uid 0 (it never runs as root after its setup); "
			 "expected its own system user",
			 cfg->log.user);
		refuse(&s, CFGD_LOGD, "log", "user", why);
	}
	return s.rc;
}
