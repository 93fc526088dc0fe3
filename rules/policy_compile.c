/* Loading a policy as a whole: read the rule files, parse each, run the
 * checks across them, and only if nothing anywhere was wrong, seal the
 * result into one immutable, reference-counted struct policy. */
#include "rules/rules_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pbuild_init(struct pbuild *b, struct diag *d, const struct config *cfg,
		       const struct policy *prev)
{
	memset(b, 0, sizeof(*b));
	b->d = d;
	/* what a file's parse depends on besides its bytes: once per build */
	b->def.qtypes = cfg ? cfg->dns.qtypes : QT_DEFAULT;
	b->def.refuse = cfg ? cfg->dns.refuse : DNS_REFUSE_REFUSED;
	b->def.rate = cfg ? cfg->limits.new_flows_per_second : RULES_LIMIT_RATE_DEFAULT;
	b->def.burst = cfg ? cfg->limits.new_flows_burst : RULES_LIMIT_BURST_DEFAULT;
	b->prev = prev;
	b->p = calloc(1, sizeof(*b->p));
	if (!b->p)
		return diag_at(d, PC_ENOMEM, "", 0, 0, "out of memory");
	atomic_init(&b->p->refs, 1);
	return 0;
}

static void policy_free(struct policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_files; i++)
		rfile_unref(p->files[i]);
	arena_free(&p->arena);
	free(p);
}

/* The build's files go to the policy (their references with them); those
 * parsed in this build keep their sandboxes as checked, for the next. */
static int pbuild_seal_files(struct pbuild *b)
{
	struct policy *p = b->p;

	p->files = arena_calloc(&p->arena, b->n_files ? b->n_files : 1, sizeof(*p->files));
	if (!p->files)
		return PC_ENOMEM;
	for (size_t i = 0; i < b->n_files; i++) {
		struct pbuild_file *f = &b->files[i];
		struct rfile *rf = f->rf;

		if (f->fresh && f->n) {
			rf->sbs = arena_calloc(&rf->arena, f->n, sizeof(*rf->sbs));
			if (!rf->sbs)
				return PC_ENOMEM;
			memcpy(rf->sbs, &b->v[f->first], f->n * sizeof(*rf->sbs));
			rf->n_sbs = f->n;
		}
	}
	for (size_t i = 0; i < b->n_files; i++)
		p->files[i] = b->files[i].rf;
	p->n_files = b->n_files;
	b->n_files = 0;
	return 0;
}

static int sbb_name_cmp(const void *x, const void *y)
{
	return strcmp((*(struct sbb *const *)x)->sb.name, (*(struct sbb *const *)y)->sb.name);
}

/* Checks, then the sealed policy; *out written only when all is well. */
static int pbuild_finish(struct pbuild *b, struct policy **out)
{
	struct policy *p = b->p;
	struct sbb **ord = NULL;
	int rc;

	pbuild_check(b);
	rc = diag_code(b->d);
	if (rc)
		goto out;
	p->n_sb = b->n;
	p->sb = arena_calloc(&p->arena, b->n ? b->n : 1, sizeof(*p->sb));
	if (!p->sb) {
		rc = diag_at(b->d, PC_ENOMEM, "", 0, 0, "out of memory");
		goto out;
	}
	ord = malloc((b->n ? b->n : 1) * sizeof(*ord));
	if (!ord) {
		rc = diag_at(b->d, PC_ENOMEM, "", 0, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < b->n; i++) {
		ord[i] = &b->v[i];
		if (!rc && !b->v[i].canon)
			rc = policy_canon_sandbox(&b->v[i]);
	}
	/* names are unique (pbuild_check): the order is the names' */
	if (b->n)
		qsort(ord, b->n, sizeof(*ord), sbb_name_cmp);
	for (size_t i = 0; i < b->n; i++)
		p->sb[i] = ord[i]->sb;
	if (!rc)
		rc = pbuild_seal_files(b);
	if (!rc)
		rc = policy_index_build(p);
	if (!rc)
		rc = policy_canon_build(p, ord);
	if (rc) {
		rc = diag_at(b->d, rc, "", 0, 0, "compiling the policy: %s", pc_strerror(rc));
		goto out;
	}
	if (out) {
		*out = p;
		p = NULL;
	}
out:
	free(ord);
	policy_free(p);
	for (size_t i = 0; i < b->n_files; i++) /* not sealed: the policy failed */
		rfile_unref(b->files[i].rf);
	free(b->files);
	free(b->v);
	b->v = NULL;
	b->files = NULL;
	b->p = NULL;
	return rc;
}

static int load_files(const char *const *paths, size_t n, const struct config *cfg,
		      const struct policy *prev, struct policy **out, struct diag *d)
{
	struct pbuild b;
	int rc;

	rc = pbuild_init(&b, d, cfg, prev);
	if (rc)
		return rc;
	/* Every file is read and parsed even after an error, so that lint
	 * shows all of them; the policy is still all or nothing. */
	for (size_t i = 0; i < n && !d->gave_up; i++) {
		struct pc_err rerr;
		char *buf = NULL;
		size_t len;

		if (pc_file_read_regular(paths[i], RULES_FILE_MAX, &buf, &len, &rerr) < 0) {
			diag_add(d, &rerr);
			continue;
		}
		rc = pbuild_reuse(&b, paths[i], buf, len) ? 0 : pbuild_file(&b, paths[i], buf, len);
		free(buf);
		if (rc == PC_ENOMEM)
			break;
	}
	return pbuild_finish(&b, out);
}

int policy_load_files_report(const char *const *paths, size_t n, const struct config *cfg,
			     struct policy **out, struct pc_err *err, pc_err_report_fn report,
			     void *arg)
{
	struct diag d;

	diag_init(&d, err, report, arg);
	return load_files(paths, n, cfg, NULL, out, &d);
}

int policy_load_files(const char *const *paths, size_t n, const struct config *cfg,
		      struct policy **out, struct pc_err *err)
{
	return policy_load_files_report(paths, n, cfg, out, err, NULL, NULL);
}

int policy_load_buffer(const char *name, const char *buf, size_t len, const struct config *cfg,
		       struct policy **out, struct pc_err *err)
{
	struct pbuild b;
	struct diag d;
	int rc;

	diag_init(&d, err, NULL, NULL);
	rc = pbuild_init(&b, &d, cfg, NULL);
	if (rc)
		return rc;
	pbuild_file(&b, name ? name : "<buffer>", buf, len);
	return pbuild_finish(&b, out);
}

static int name_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static bool has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n > m && strcmp(s + n - m, suf) == 0;
}

static int load_dir(const char *dir, const struct config *cfg, const struct policy *prev,
		    struct policy **out, struct pc_err *err, pc_err_report_fn report, void *arg)
{
	char **paths = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct diag d;
	DIR *dh;
	int rc = 0;

	diag_init(&d, err, report, arg);
	dh = opendir(dir);
	if (!dh) {
		struct pc_err e;

		pc_err_errno(&e, errno == ENOENT ? PC_ENOENT : PC_EIO, "rules directory %s", dir);
		return diag_add(&d, &e);
	}
	while ((de = readdir(dh))) {
		char path[PC_PATH_MAX];

		/* Dot files are editors' and package managers' leftovers. */
		if (de->d_name[0] == '.')
			continue;
		if (has_suffix(de->d_name, ".yml")) {
			rc =
			    diag_at(&d, PC_EPARSE, dir, 0, 0,
				    "%s: rule files must be named NAME.yaml; rename it (or move it "
				    "out of the rules directory)",
				    de->d_name);
			continue;
		}
		if (!has_suffix(de->d_name, ".yaml"))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
		    sizeof(path)) {
			rc = diag_at(&d, PC_EINVAL, dir, 0, 0, "%s: path too long", de->d_name);
			continue;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char **np =
			    n >= RULES_MAX_FILES ? NULL : realloc(paths, ncap * sizeof(*np));

			if (!np) {
				rc = diag_at(&d, n >= RULES_MAX_FILES ? PC_EINVAL : PC_ENOMEM, dir,
					     0, 0, "more than %u rule files, or out of memory",
					     RULES_MAX_FILES);
				break;
			}
			paths = np;
			cap = ncap;
		}
		paths[n] = strdup(path);
		if (!paths[n]) {
			rc = diag_at(&d, PC_ENOMEM, dir, 0, 0, "out of memory");
			break;
		}
		n++;
	}
	closedir(dh);
	/* Errors about the directory itself fail the load too, after the
	 * files have had their say. */
	if (rc != PC_ENOMEM) {
		if (n) /* qsort on an empty directory's NULL array is undefined */
			qsort(paths, n, sizeof(*paths), name_cmp);
		rc = load_files((const char *const *)paths, n, cfg, prev, out, &d);
	}
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return rc;
}

int policy_load_dir_report(const char *dir, const struct config *cfg, struct policy **out,
			   struct pc_err *err, pc_err_report_fn report, void *arg)
{
	return load_dir(dir, cfg, NULL, out, err, report, arg);
}

int policy_load_dir(const char *dir, const struct config *cfg, struct policy **out,
		    struct pc_err *err)
{
	return load_dir(dir, cfg, NULL, out, err, NULL, NULL);
}

int policy_load_dir_since(const char *dir, const struct config *cfg, const struct policy *prev,
			  struct policy **out, struct pc_err *err)
{
	return load_dir(dir, cfg, prev, out, err, NULL, NULL);
}

/* ---- the sealed policy ------------------------------------------------------ */

struct policy *policy_ref(struct policy *p)
{
	if (p)
		atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
	return p;
}

void policy_unref(struct policy *p)
{
	if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
		policy_free(p);
}

const char *policy_hash(const struct policy *p)
{
	return p ? p->hash : NULL;
}

const char *policy_canonical(const struct policy *p, size_t *len)
{
	if (!p)
		return NULL;
	if (len)
		*len = p->canonical_len;
	return p->canonical;
}

size_t policy_sandbox_count(const struct policy *p)
{
	return p ? p->n_sb : 0;
}

const struct policy_sandbox *policy_sandbox_at(const struct policy *p, size_t i)
{
	return p && i < p->n_sb ? &p->sb[i] : NULL;
}

static int sb_key_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct policy_sandbox *)elem)->name);
}

const struct policy_sandbox *policy_sandbox_by_name(const struct policy *p, const char *name)
{
	if (!p || !name || !p->n_sb)
		return NULL;
	return bsearch(name, p->sb, p->n_sb, sizeof(*p->sb), sb_key_cmp);
}
