/* `portcullis log verify|show|prove|keygen`: the auditor's and the
 * administrator's side of the signed log. */
#include "logd/logd_int.h"
#include "rules/rules.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define USAGE                                                                                      \
	"usage: portcullis log verify [FILE...] [--key PUB] [--checkpoint NOTE]\n"                 \
	"                             [--against NOTE]... [--witness-key PUB] "                    \
	"[--allow-unsigned] [--json]\n"                                                            \
	"       portcullis log verify --proof PROOF [--key PUB] [--json]\n"                        \
	"       portcullis log show [FILE] [--checkpoints] [--follow] [--sandbox NAME]\n"          \
	"                [--action ACTION] [--outcome allowed|refused] [--since TIME] [--json]\n"  \
	"       portcullis log prove SEQ [--file FILE] [--key PUB] [-o OUT]\n"                     \
	"       portcullis log prove --consistency OLD NEW [--file FILE] [--key PUB] [-o OUT]\n"   \
	"       portcullis log keygen [--name NAME] [--force]\n"                                   \
	"       portcullis log status [--json]\n"

struct cli {
	const char *config;
	bool have_cfg;
	struct config cfg;
};

/* Where log verify writes its text: stdout, or with --json a memory
 * stream whose lines become the object's "notes". */
static FILE *vout;
/* With --json, the first error said (the object's "error"). */
static char *first_err;
static size_t first_err_len;

/* pc_cli_error, and the first one kept for --json. */
__attribute__((format(printf, 2, 3))) static void cli_error(const char *what, const char *fmt, ...)
{
	char why[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pc_cli_error(what, "%s", why);
	if (first_err && !first_err[0])
		pc_strlcpy(first_err, why, first_err_len);
}

static const struct config *cli_cfg(struct cli *c)
{
	struct pc_err err;

	if (c->have_cfg)
		return &c->cfg;
	if (config_load(c->config, &c->cfg, &err) < 0) {
		char buf[1024];

		cli_error("log", "%s", pc_err_str(&err, buf, sizeof(buf)));
		return NULL;
	}
	c->have_cfg = true;
	return &c->cfg;
}

/* The public key: --key, else <log.key>.pub from the configuration. */
static int key_get(struct cli *c, const char *opt, struct note_verifier *v)
{
	char path[PC_PATH_MAX + 8];
	struct pc_err err;
	const struct config *cfg;

	if (!opt) {
		struct stat st;

		/* An auditor checks a copy of the log on a workstation without
		 * the gateway's configuration: what is missing is the key, not
		 * the configuration file. */
		if (stat(c->config, &st) < 0 && errno == ENOENT) {
			cli_error("log",
				  "no public key to check the log with: give --key PUB (the log's "
				  "public key, log.key.pub on the gateway); without --key it is "
				  "read from the configuration, and %s does not exist",
				  c->config);
			return PC_EXIT_ERROR;
		}
		if (!(cfg = cli_cfg(c)))
			return PC_EXIT_ERROR;
		snprintf(path, sizeof(path), "%s.pub", cfg->log.key);
		opt = path;
	}
	if (note_verifier_load(opt, v, &err) < 0) {
		cli_error("log", "public key: %s", err.msg);
		return PC_EXIT_ERROR;
	}
	return 0;
}

static const char *file_get(struct cli *c, const char *opt)
{
	const struct config *cfg;

	if (opt)
		return opt;
	cfg = cli_cfg(c);
	return cfg ? cfg->log.file : NULL;
}

static int note_read(const char *path, struct note_verifier *key, struct checkpoint *cp,
		     struct pc_err *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc = pc_file_read(path, CHECKPOINT_MAX * 4, &text, &len, err);

	if (rc < 0)
		return rc;
	rc = checkpoint_open(key, text, len, cp, err);
	free(text);
	return rc;
}

static void age_str(uint64_t ms, char *buf, size_t len)
{
	uint64_t now = pc_now_real_ms(), d = now > ms ? (now - ms) / 1000 : 0;

	if (d < 120)
		snprintf(buf, len, "%llu s ago", (unsigned long long)d);
	else if (d < 7200)
		snprintf(buf, len, "%llu min ago", (unsigned long long)d / 60);
	else
		snprintf(buf, len, "%llu h ago", (unsigned long long)d / 3600);
}

/* --json when the command could not get to a result: one object saying
 * why, so a script reading stdout always gets JSON. */
static void json_error_print(const char *msg)
{
	struct pc_buf b;
	struct pc_json j;
	char *t;

	pc_buf_init(&b, 4096, 0);
	pc_json_init(&j, &b);
	pc_json_obj(&j);
	pc_json_key(&j, "ok");
	pc_json_bool(&j, false);
	pc_json_kstr(&j, "error", msg);
	pc_json_obj_end(&j);
	if ((t = pc_buf_take(&b, NULL)))
		printf("%s\n", t);
	free(t);
}

/* ---- witness and --against (docs/logd.md "Witness and consistency proofs") */
struct vanchors {
	const char *const *against; /* --against files */
	size_t n;
	const struct cosig_verifier *wkey; /* --witness-key, else log.witness.key; NULL: none */
};

/* The witness's key for reporting cosignatures: --witness-key, else the
 * configuration's log.witness.key when there is one. */
static const struct cosig_verifier *wkey_get(struct cli *c, const char *opt,
					     struct cosig_verifier *v, bool *bad)
{
	struct pc_err err;
	struct config cfg;

	if (!opt) {
		if (c->have_cfg)
			opt = c->cfg.log.witness.key;
		else if (config_load(c->config, &cfg, NULL) == 0)
			opt = cfg.log.witness.key[0] ? cfg.log.witness.key : NULL;
		if (!opt || !opt[0])
			return NULL;
	}
	if (cosig_verifier_load(opt, v, &err) < 0) {
		/* a configured key that cannot be read must not turn the
		 * cosignature check off */
		cli_error("log verify", "witness key %s: %s", opt, err.msg);
		*bad = true;
		return NULL;
	}
	return v;
}

/* How verify goes about one file, and what it found beyond the result. */
struct verify_opts {
	bool allow_unsigned;	   /* a file no checkpoint covers: 0, not 1 */
	bool defer_sidecar;	   /* several files: a missing sidecar matters only for
				      the newest, which the caller knows once all are read */
	const struct vanchors *va; /* --against, the witness's key */
};

/* "no sidecar": what that costs, said for the file it concerns. */
static void no_sidecar_note(const char *path)
{
	fprintf(vout,
		"  no sidecar: %s.checkpoint is missing: records cut off after the last "
		"checkpoint in the file cannot be detected (give --checkpoint NOTE, from the "
		"SIEM or a witness)\n",
		path);
}

/* ---- log verify --json: one object with the facts the text gives, the
 * text itself line by line ("notes") and the first error (docs/logd.md) */
struct vjson {
	struct pc_buf fb; /* the "files" array */
	struct pc_json fj;
	char *text; /* vout's memory */
	size_t text_len;
	bool unsigned_seen;
	bool have_chain, have_proof, chain_from_start;
	uint64_t chain_n, chain_first, chain_last;
	struct logproof_info proof;
	char proof_key[NOTE_NAME_MAX + 16];
	char err[1024];
};
static struct vjson *vj; /* NULL: text */

/* One verified file's verdict, as its summary line and what follows say. */
static void vjson_file(const char *path, const struct tlog_file_verdict *fv, const char *cpfile)
{
	const struct note_verifier *key = fv->signed_by;
	bool sig = fv->result == TLOG_INTACT;
	struct pc_json *j;
	char ts[32], k[NOTE_NAME_MAX + 16];

	if (!vj)
		return;
	j = &vj->fj;
	vj->unsigned_seen |= !sig;
	pc_json_obj(j);
	pc_json_kstr(j, "file", path);
	pc_json_kstr(j, "result", sig ? "intact" : "unsigned");
	pc_json_ku64(j, "records", fv->records);
	pc_json_ku64(j, "first_seq", fv->first_seq);
	pc_json_ku64(j, "last_seq", fv->last_seq);
	pc_json_ku64(j, "checkpoints", fv->checkpoints);
	pc_json_key(j, "signed_by");
	if (sig && key) {
		snprintf(k, sizeof(k), "%s+%08x", key->name, key->hash);
		pc_json_str(j, k);
	} else {
		pc_json_null(j);
	}
	pc_json_key(j, "sealed");
	if (fv->sealed) {
		pc_json_obj(j);
		pc_json_ku64(j, "line", fv->sealed_line);
		pc_json_ku64(j, "records", fv->sealed_records);
		pc_json_kstr(j, "time", pc_time_rfc3339(fv->sealed_time_ms, ts, sizeof(ts)));
		pc_json_obj_end(j);
	} else {
		pc_json_null(j);
	}
	pc_json_ku64(j, "unsealed", fv->unsealed);
	pc_json_key(j, "checkpoint");
	if (fv->has_checkpoint) {
		pc_json_obj(j);
		pc_json_kstr(j, "file", cpfile);
		pc_json_ku64(j, "records", fv->checkpoint_records);
		pc_json_kstr(j, "time", pc_time_rfc3339(fv->checkpoint_time_ms, ts, sizeof(ts)));
		pc_json_key(j, "covers_whole_file");
		pc_json_bool(j, fv->checkpoint_covers_all);
		pc_json_obj_end(j);
	} else {
		pc_json_null(j);
	}
	pc_json_key(j, "sidecar_missing");
	pc_json_bool(j, fv->sidecar_missing);
	pc_json_obj_end(j);
}

/* The object, from what the run gathered; rc is its exit status. */
static void vjson_print(int rc)
{
	struct pc_buf b;
	struct pc_json j;
	char *files, *t, ts[32];
	const char *p, *e;

	pc_json_arr_end(&vj->fj);
	files = pc_buf_take(&vj->fb, NULL);
	pc_buf_init(&b, 1 << 24, 0);
	pc_json_init(&j, &b);
	pc_json_obj(&j);
	pc_json_key(&j, "ok");
	pc_json_bool(&j, rc == PC_EXIT_OK);
	pc_json_kstr(&j, "result",
		     rc == PC_EXIT_ERROR		  ? "error"
		     : vj->have_proof && rc == PC_EXIT_OK ? "valid"
		     : vj->err[0]			  ? "failed"
		     : vj->unsigned_seen		  ? "unsigned"
		     : rc == PC_EXIT_OK			  ? "intact"
							  : "failed");
	pc_json_key(&j, "files");
	pc_json_raw(&j, files ? files : "[]");
	pc_json_key(&j, "chain");
	if (vj->have_chain) {
		pc_json_obj(&j);
		pc_json_ku64(&j, "files", vj->chain_n);
		pc_json_ku64(&j, "first_seq", vj->chain_first);
		pc_json_ku64(&j, "last_seq", vj->chain_last);
		pc_json_key(&j, "from_start");
		pc_json_bool(&j, vj->chain_from_start);
		pc_json_obj_end(&j);
	} else {
		pc_json_null(&j);
	}
	pc_json_key(&j, "proof");
	if (vj->have_proof) {
		pc_json_obj(&j);
		pc_json_ku64(&j, "seq", vj->proof.seq);
		pc_json_ku64(&j, "leaf", vj->proof.index);
		pc_json_ku64(&j, "tree_records", vj->proof.cp.size);
		pc_json_kstr(&j, "signed_by", vj->proof_key);
		pc_json_kstr(&j, "time", pc_time_rfc3339(vj->proof.cp.time_ms, ts, sizeof(ts)));
		pc_json_obj_end(&j);
	} else {
		pc_json_null(&j);
	}
	pc_json_key(&j, "notes");
	pc_json_arr(&j);
	for (p = vj->text; p && p < vj->text + vj->text_len; p = e + 1) {
		size_t skip = 0;

		if (!(e = memchr(p, '\n', (size_t)(vj->text + vj->text_len - p))))
			e = vj->text + vj->text_len;
		while (p + skip < e && p[skip] == ' ')
			skip++;
		if (e > p + skip)
			pc_json_strn(&j, p + skip, (size_t)(e - p - skip));
	}
	pc_json_arr_end(&j);
	pc_json_key(&j, "error");
	if (vj->err[0])
		pc_json_str(&j, vj->err);
	else
		pc_json_null(&j);
	pc_json_obj_end(&j);
	if ((t = pc_buf_take(&b, NULL)))
		printf("%s\n", t);
	else
		json_error_print("out of memory");
	free(t);
	free(files);
}

/* Verify one file; prints its verdict (tlog_verdict_file). PC_EXIT_*. */
static int verify_one_(const char *path, struct note_verifier *key, const char *cpfile,
		       const struct verify_opts *o, struct logc_anchors *anc,
		       struct merkle_hasher *ah, struct tlog_file_verdict *out);
static int verify_one(const char *path, struct note_verifier *key, const char *cpfile,
		      const struct verify_opts *o, struct tlog_file_verdict *out)
{
	struct logc_anchors *anc = calloc(1, sizeof(*anc));
	struct merkle_hasher *ah = NULL;
	int xrc;

	if (!anc || merkle_hasher_new(&ah, NULL) < 0) {
		free(anc);
		cli_error("log verify", "out of memory");
		return PC_EXIT_ERROR;
	}
	xrc = verify_one_(path, key, cpfile, o, anc, ah, out);
	merkle_hasher_free(ah);
	free(anc);
	return xrc;
}

static int verify_one_(const char *path, struct note_verifier *key, const char *cpfile,
		       const struct verify_opts *o, struct logc_anchors *anc,
		       struct merkle_hasher *ah, struct tlog_file_verdict *out)
{
	const struct vanchors *va = o->va;
	char side[PC_PATH_MAX + 16], ts[32], age[32], onote[1024];
	struct checkpoint ext = {0};
	struct tlog_file_facts facts;
	struct tlog_file_verdict fv;
	struct logv *v = NULL;
	struct pc_err err, cperr;
	bool have_ext = false, cpbad = false, side_missing = false;
	int rc;

	if (!cpfile) {
		snprintf(side, sizeof(side), "%s.checkpoint", path);
		if (access(side, F_OK) == 0)
			cpfile = side;
		else
			side_missing = true;
	}
	/* A checkpoint that does not verify is reported after the file: a
	 * wrong key is best named at the file's first checkpoint line. */
	if (cpfile) {
		if (note_read(cpfile, key, &ext, &cperr) < 0)
			cpbad = true;
		else
			have_ext = true;
	}
	/* --against and <log>.witnessed: checked as the file is read */
	if (logc_anchors_load(anc, key, path, va ? va->against : NULL, va ? va->n : 0, &err) < 0) {
		cli_error("log verify", "%s", err.msg);
		return err.code == PC_ETAMPER || err.code == PC_EPARSE ? PC_EXIT_FAIL
								       : PC_EXIT_ERROR;
	}
	/* A live log may end in a line logd is writing right now: if the
	 * file grows meanwhile, look again; a file that stays cut mid-line
	 * was cut (truncated), and that is reported. */
	for (int attempt = 0;; attempt++) {
		struct stat a, b;
		bool torn;

		if (logv_new(key, &v, &err) < 0) {
			cli_error("log verify", "%s", err.msg);
			return PC_EXIT_ERROR;
		}
		if (have_ext && ext.size)
			logv_expect(v, &ext);
		logc_anchors_attach(anc, ah, v);
		if (stat(path, &a) < 0)
			a.st_size = -1;
		rc = logv_file(v, path, attempt < 3 ? LOGV_TORN_OK : 0, &err);
		torn = rc == 0 && logv_result(v)->torn;
		if (!torn)
			break;
		logv_free(v);
		v = NULL;
		usleep(200 * 1000);
		if (stat(path, &b) < 0 || b.st_size == a.st_size)
			attempt = 2; /* it did not grow: once more, strictly */
	}
	if (rc < 0) {
		cli_error("log verify", "%s: %s", path, err.msg);
		logv_free(v);
		return rc == PC_ETAMPER ? PC_EXIT_FAIL : PC_EXIT_ERROR;
	}
	if (cpbad) {
		cli_error("log verify", "%s: %s", cpfile, cperr.msg);
		logv_free(v);
		return cperr.code == PC_ETAMPER || cperr.code == PC_EPARSE ? PC_EXIT_FAIL
									   : PC_EXIT_ERROR;
	}
	/* an earlier segment's witnessed checkpoint is set aside before the
	 * verdict asks whether one was found (a file without a checkpoint
	 * has no origin to compare: nothing happens for it) */
	if (logc_anchors_origin(anc, key, logv_result(v), onote, sizeof(onote), &err) < 0) {
		cli_error("log verify", "%s: %s", path, err.msg);
		logv_free(v);
		return PC_EXIT_FAIL;
	}
	facts = (struct tlog_file_facts){.key = key,
					 .ext = have_ext ? &ext : NULL,
					 .sidecar_missing = side_missing,
					 .allow_unsigned = o->allow_unsigned,
					 .wkey = va ? va->wkey : NULL,
					 .anchors = anc};
	if (tlog_verdict_file(logv_result(v), &facts, &fv, &err) < 0) {
		cli_error("log verify", "%s: %s", path, err.msg);
		logv_free(v);
		return PC_EXIT_FAIL;
	}
	if (fv.result == TLOG_UNSIGNED) {
		fprintf(vout, "%s: unsigned: %llu records", path, (unsigned long long)fv.records);
		if (fv.records)
			fprintf(vout, " (seq %llu-%llu)", (unsigned long long)fv.first_seq,
				(unsigned long long)fv.last_seq);
		fprintf(vout, " and no checkpoint: no signature vouches for %s; %s\n",
			fv.records ? "them (they form a hash chain, which anyone can compute)"
				   : "the file",
			o->allow_unsigned ? "accepted (--allow-unsigned)"
					  : "not accepted (--allow-unsigned accepts it)");
		if (fv.sidecar_missing && !o->defer_sidecar)
			no_sidecar_note(path);
		vjson_file(path, &fv, cpfile);
		*out = fv;
		logv_free(v);
		return fv.accepted ? PC_EXIT_OK : PC_EXIT_FAIL;
	}
	age_str(fv.sealed_time_ms, age, sizeof(age));
	fprintf(vout,
		"%s: intact: %llu records (seq %llu-%llu), %llu checkpoints, signed by %s+%08x\n",
		path, (unsigned long long)fv.records, (unsigned long long)fv.first_seq,
		(unsigned long long)fv.last_seq, (unsigned long long)fv.checkpoints,
		fv.signed_by->name, fv.signed_by->hash);
	if (fv.sealed)
		fprintf(vout,
			"  sealed: the checkpoint on line %llu covers %llu records, signed %s "
			"(%s)\n",
			(unsigned long long)fv.sealed_line, (unsigned long long)fv.sealed_records,
			pc_time_rfc3339(fv.sealed_time_ms, ts, sizeof(ts)), age);
	if (fv.unsealed)
		fprintf(vout,
			"  unsealed tail: %llu records from line %llu (seq %llu-%llu) are not "
			"covered by a signature yet\n",
			(unsigned long long)fv.unsealed, (unsigned long long)fv.unsealed_line,
			(unsigned long long)fv.unsealed_first_seq, (unsigned long long)fv.last_seq);
	else if (fv.records)
		fprintf(vout, "  no unsealed tail: every record is covered by a signature\n");
	age_str(fv.checkpoint_time_ms, age, sizeof(age));
	if (fv.has_checkpoint)
		fprintf(vout, "  latest checkpoint %s: %llu records, signed %s (%s)%s\n", cpfile,
			(unsigned long long)fv.checkpoint_records,
			pc_time_rfc3339(fv.checkpoint_time_ms, ts, sizeof(ts)), age,
			fv.checkpoint_covers_all ? ": covers the whole file" : "");
	else if (fv.sidecar_missing && !o->defer_sidecar)
		no_sidecar_note(path);
	fputs(onote, vout);
	{
		struct pc_buf lines;
		char *t;

		pc_buf_init(&lines, 1 << 16, 0);
		logc_anchors_report(anc, key, va ? va->wkey : NULL, fv.records, &lines, &err);
		if ((t = pc_buf_take(&lines, NULL)))
			fputs(t, vout);
		free(t);
	}
	if (fv.witnessed_missing)
		fprintf(
		    vout,
		    "  no witnessed checkpoint: %s%s is missing: the witness has cosigned none of "
		    "this file (it was unreachable, or never asked): a cut-back to a checkpoint "
		    "in the file cannot be detected\n",
		    path, LOGWC_SUFFIX);
	vjson_file(path, &fv, cpfile);
	*out = fv;
	logv_free(v);
	return PC_EXIT_OK;
}

/* A file given to a multi-file verify: its name and whether it had a
 * checkpoint held outside it (tlog_link.id is its index here). */
struct given {
	const char *name;
	bool no_sidecar;
};

/* <log>.<time>-quarantine or -quarantine.<N> (writer.c's aside_name) */
static bool quarantine_name(const char *f)
{
	const char *q = strstr(f, "-quarantine");

	if (!q)
		return false;
	q += strlen("-quarantine");
	if (*q == '\0')
		return true;
	if (*q++ != '.' || !*q)
		return false;
	return strspn(q, "0123456789") == strlen(q);
}

static int verify_main(struct cli *c, int argc, char **argv, struct vjson *json)
{
	static const struct option o[] = {{"key", required_argument, NULL, 'k'},
					  {"json", no_argument, NULL, 'j'},
					  {"checkpoint", required_argument, NULL, 'C'},
					  {"proof", required_argument, NULL, 'p'},
					  {"against", required_argument, NULL, 'A'},
					  {"witness-key", required_argument, NULL, 'w'},
					  {"allow-unsigned", no_argument, NULL, 'U'},
					  {NULL, 0, NULL, 0}};
	const char *keyp = NULL, *cpfile = NULL, *proof = NULL, *wkeyp = NULL;
	const char *against[LOGC_ANCHORS_MAX];
	struct cosig_verifier wkey;
	struct vanchors va = {.against = against};
	struct verify_opts vo = {.va = &va};
	struct note_verifier key;
	struct tlog_file_verdict cur;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "k:C:p:", o, NULL)) != -1) {
		if (opt == 'k')
			keyp = optarg;
		else if (opt == 'C')
			cpfile = optarg;
		else if (opt == 'p')
			proof = optarg;
		else if (opt == 'A' && va.n < LOGC_ANCHORS_MAX - 1)
			against[va.n++] = optarg;
		else if (opt == 'w')
			wkeyp = optarg;
		else if (opt == 'U')
			vo.allow_unsigned = true;
		else if (opt == 'j')
			vj = json;
		else
			return fputs(USAGE, stderr), PC_EXIT_USAGE;
	}
	if ((proof && optind != argc) || ((cpfile || va.n) && argc - optind > 1))
		return fputs(USAGE, stderr), PC_EXIT_USAGE;
	if (vj) {
		/* the text goes into the object's notes */
		if (!(vout = open_memstream(&vj->text, &vj->text_len))) {
			vj = NULL;
			vout = stdout;
			cli_error("log verify", "out of memory");
			return PC_EXIT_ERROR;
		}
		pc_buf_init(&vj->fb, 1 << 24, 0);
		pc_json_init(&vj->fj, &vj->fb);
		pc_json_arr(&vj->fj);
		first_err = vj->err;
		first_err_len = sizeof(vj->err);
	}
	if ((rc = key_get(c, keyp, &key)) != 0)
		return rc;
	{
		bool wbad = false;

		va.wkey = wkey_get(c, wkeyp, &wkey, &wbad);
		if (wbad)
			return PC_EXIT_ERROR;
	}
	if (proof) {
		struct logproof_info info;
		struct pc_err err;
		char *text = NULL, ts[32];
		size_t len = 0;

		if (pc_file_read(proof, 1 << 20, &text, &len, &err) < 0) {
			cli_error("log verify", "%s", err.msg);
			return PC_EXIT_ERROR;
		}
		rc = logproof_verify(text, len, &key, &info, &err);
		free(text);
		if (rc < 0) {
			cli_error("log verify", "%s: %s", proof, err.msg);
			return rc == PC_ETAMPER || rc == PC_EPARSE ? PC_EXIT_FAIL : PC_EXIT_ERROR;
		}
		fprintf(vout,
			"%s: valid: record seq %llu is leaf %llu of the %llu-record tree signed by "
			"%s+%08x at %s\n",
			proof, (unsigned long long)info.seq, (unsigned long long)info.index,
			(unsigned long long)info.cp.size, key.name, key.hash,
			pc_time_rfc3339(info.cp.time_ms, ts, sizeof(ts)));
		if (vj) {
			vj->have_proof = true;
			vj->proof = info;
			snprintf(vj->proof_key, sizeof(vj->proof_key), "%s+%08x", key.name,
				 key.hash);
		}
		return PC_EXIT_OK;
	}
	if (optind == argc) {
		const char *f = file_get(c, NULL);

		return f ? verify_one(f, &key, cpfile, &vo, &cur) : PC_EXIT_ERROR;
	}
	/* Several files (in any order, e.g. verdicts.jsonl*): each verifies,
	 * and in seq order each continues the one before. */
	{
		int n = argc - optind;
		struct tlog_link *l = calloc((size_t)n, sizeof(*l));
		struct given *g = calloc((size_t)n, sizeof(*g));
		struct tlog_chain_verdict cv = {0};

		if (!l || !g) {
			free(l);
			free(g);
			return PC_EXIT_ERROR;
		}
		int m = 0;

		for (int i = 0; i < n; i++) {
			const char *f = argv[optind + i];
			size_t fl = strlen(f);

			/* verdicts.jsonl* also matches the sidecar: it is read
			 * with its log, not as one */
			if (n > 1 && fl > 11 && strcmp(f + fl - 11, ".checkpoint") == 0)
				continue;
			if (n > 1 && fl > 10 && strcmp(f + fl - 10, LOGWC_SUFFIX) == 0)
				continue; /* the witnessed checkpoint, too */
			/* a quarantine file (<log>.<time>-quarantine[.N]) is lines
			 * logd set aside: evidence, not a segment (issue 32: a
			 * glob that took it in broke the chain) */
			if (n > 1 && quarantine_name(f)) {
				fprintf(vout,
					"%s: skipped: a quarantine file (lines logd set aside at a "
					"start), not a segment of the log; check it with sha256sum "
					"against the log-segment record that names it\n",
					f);
				continue;
			}
			vo.defer_sidecar = n > 1;
			rc = verify_one(f, &key, n == 1 ? cpfile : NULL, &vo, &cur);
			if (rc != 0) {
				free(l);
				free(g);
				return rc;
			}
			g[m] = (struct given){.name = f, .no_sidecar = cur.sidecar_missing};
			l[m] = (struct tlog_link){
			    .first_seq = cur.first_seq, .last_seq = cur.last_seq, .id = (size_t)m};
			memcpy(l[m].first_prev, cur.first_prev, MERKLE_HASH);
			memcpy(l[m].last_hash, cur.last_hash, MERKLE_HASH);
			m++;
		}
		n = m;
		rc = n ? tlog_verdict_chain(l, (size_t)n, &cv) : 0;
		/* only the newest file can lose records unseen: each older one
		 * is sealed, and the next one's first record links to its end */
		if (n >= 1 && g[l[n - 1].id].no_sidecar)
			no_sidecar_note(g[l[n - 1].id].name);
		if (rc < 0) {
			const struct tlog_link *a = &l[cv.at], *b = &l[cv.at - 1];

			cli_error("log verify",
				  "%s (from seq %llu) does not continue %s (up to seq %llu): %s",
				  g[a->id].name, (unsigned long long)a->first_seq, g[b->id].name,
				  (unsigned long long)b->last_seq,
				  cv.missing_between
				      ? "a file is missing in between"
				      : "its first record does not link to the last one there");
			free(l);
			free(g);
			return PC_EXIT_FAIL;
		}
		if (n > 1 && !cv.from_start)
			fprintf(vout,
				"%d files form one unbroken chain, seq %llu-%llu, but not from the "
				"start of the log: the first record of %s (seq %llu) links to a "
				"record before it: the older segments are missing (deleted by "
				"rotation, or removed)\n",
				n, (unsigned long long)cv.first_seq,
				(unsigned long long)cv.last_seq, g[l[0].id].name,
				(unsigned long long)l[0].first_seq);
		else if (n > 1)
			fprintf(vout, "%d files form one unbroken chain, seq %llu-%llu\n", n,
				(unsigned long long)cv.first_seq, (unsigned long long)cv.last_seq);
		if (n > 1 && vj) {
			vj->have_chain = true;
			vj->chain_n = (uint64_t)n;
			vj->chain_from_start = cv.from_start;
			vj->chain_first = cv.first_seq;
			vj->chain_last = cv.last_seq;
		}
		free(l);
		free(g);
	}
	return PC_EXIT_OK;
}

/* log verify [--json]: the exit status is the same either way. */
static int cmd_verify(struct cli *c, int argc, char **argv)
{
	struct vjson *json = calloc(1, sizeof(*json));
	int rc;

	if (!json) {
		cli_error("log verify", "out of memory");
		return PC_EXIT_ERROR;
	}
	vout = stdout;
	rc = verify_main(c, argc, argv, json);
	if (vj) {
		fclose(vout);
		vout = stdout;
		if (rc != PC_EXIT_USAGE)
			vjson_print(rc);
		pc_buf_free(&vj->fb);
		free(vj->text);
		first_err = NULL;
		vj = NULL;
	}
	free(json);
	return rc;
}

struct show {
	struct logshow_filter f;
	bool cps, json;
};

static void show_line(void *arg, const char *p, size_t len)
{
	struct show *sh = arg;
	char out[2048], note[CHECKPOINT_MAX];
	size_t nlen;

	if (!logshow_match(&sh->f, p, len))
		return;
	if (sh->json) {
		/* a record line is JSON already; checkpoints only with
		 * --checkpoints. What does not print (raw in the line: C1 and
		 * bidi controls, U+2028/9) as \uxxxx: the same JSON, which a
		 * terminal does not obey (the file's bytes are log verify's) */
		if (logrec_human(p, len, out, sizeof(out)) >= 0 || sh->cps) {
			struct pc_buf o;

			pc_buf_init(&o, 0, 0);
			logesc_put(&o, p, len, LOGESC_JSON_LINE);
			if (!o.err)
				printf("%s\n", pc_buf_str(&o));
			else
				printf("?? line not shown: out of memory\n");
			pc_buf_free(&o);
		}
		return;
	}
	if (logrec_human(p, len, out, sizeof(out)) >= 0) {
		puts(out);
	} else if (logv_checkpoint_unescape(p, len, note, sizeof(note), &nlen) == 0) {
		struct checkpoint cp;
		char ts[32];
		const char *b = memmem(note, nlen, "\n\n", 2);

		if (sh->cps && b &&
		    checkpoint_body_parse(note, (size_t)(b - note) + 1, &cp, NULL) == 0)
			printf("-- checkpoint: %llu records, %.8sZ\n", (unsigned long long)cp.size,
			       pc_time_rfc3339(cp.time_ms, ts, sizeof(ts)) + 11);
	} else {
		printf("?? line not understood (log verify says why)\n");
	}
}

static int cmd_show(struct cli *c, int argc, char **argv)
{
	static const struct option o[] = {
	    {"checkpoints", no_argument, NULL, 'a'},   {"follow", no_argument, NULL, 'f'},
	    {"sandbox", required_argument, NULL, 's'}, {"action", required_argument, NULL, 'A'},
	    {"outcome", required_argument, NULL, 'O'}, {"since", required_argument, NULL, 'S'},
	    {"json", no_argument, NULL, 'j'},	       {NULL, 0, NULL, 0}};
	struct show sh;
	struct pc_err err = {0};
	bool follow = false;
	const char *path;
	int opt;

	memset(&sh, 0, sizeof(sh));
	while ((opt = getopt_long(argc, argv, "af", o, NULL)) != -1) {
		switch (opt) {
		case 'a':
			sh.cps = true;
			break;
		case 'f':
			follow = true;
			break;
		case 's':
			sh.f.sandbox = optarg;
			break;
		case 'A':
			sh.f.action = optarg;
			break;
		case 'O':
			if (strcmp(optarg, "allowed") && strcmp(optarg, "refused")) {
				pc_cli_error("log show", "--outcome: expected allowed or refused");
				return PC_EXIT_USAGE;
			}
			sh.f.outcome = optarg[0] == 'a' ? LOGSHOW_ALLOWED : LOGSHOW_REFUSED;
			break;
		case 'S':
			if (logshow_filter_since(&sh.f, optarg, pc_now_real_ms(), &err) < 0) {
				pc_cli_error("log show", "%s", err.msg);
				return PC_EXIT_USAGE;
			}
			break;
		case 'j':
			sh.json = true;
			break;
		default:
			return PC_EXIT_USAGE; /* portcullis prints the usage */
		}
	}
	if (argc - optind > 1)
		return PC_EXIT_USAGE;
	if (!(path = file_get(c, optind < argc ? argv[optind] : NULL)))
		return PC_EXIT_ERROR;
	if (logshow_read(path, follow, show_line, &sh, &err) < 0) {
		pc_cli_error("log show", "%s", err.msg);
		return PC_EXIT_ERROR;
	}
	return fflush(stdout) == 0 ? PC_EXIT_OK : PC_EXIT_ERROR;
}

struct leaves {
	uint8_t (*h)[MERKLE_HASH];
	uint64_t n, cap, want_seq, index;
	char *line;
	size_t len;
};

static int leaf_collect(void *ctx, uint64_t index, uint64_t seq, const uint8_t leaf[MERKLE_HASH],
			const char *line, size_t len)
{
	struct leaves *l = ctx;

	if (l->n == l->cap) {
		uint64_t cap = l->cap ? l->cap * 2 : 4096;
		void *nh = realloc(l->h, cap * MERKLE_HASH);

		if (!nh)
			return PC_ENOMEM;
		l->h = nh;
		l->cap = cap;
	}
	memcpy(l->h[l->n++], leaf, MERKLE_HASH);
	if (seq == l->want_seq) {
		l->line = malloc(len);
		if (!l->line)
			return PC_ENOMEM;
		memcpy(l->line, line, len);
		l->len = len;
		l->index = index;
	}
	return 0;
}

/* The end of both proofs: to -o OUT (atomically), else to stdout. An exit
 * status. */
static int prove_write(const char *outp, const char *text, size_t len)
{
	struct pc_err err;

	if (outp) {
		if (pc_file_write_atomic(outp, text, len, 0644, &err) < 0) {
			pc_cli_error("log prove", "%s", err.msg);
			return PC_EXIT_ERROR;
		}
	} else if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
		pc_cli_error("log prove", "writing the proof: %s", strerror(errno));
		return PC_EXIT_ERROR;
	}
	return PC_EXIT_OK;
}

/* ---- log prove --consistency OLD NEW ----------------------------------- */

/* OLD or NEW: a tree size, or a checkpoint file signed by key. */
static int size_or_note(const char *arg, const struct note_verifier *key, uint64_t *size,
			char *note, size_t notelen, size_t *nlen, struct checkpoint *cp)
{
	struct pc_err err;
	char *text = NULL, *ep;
	size_t len = 0;

	if (arg[0] >= '0' && arg[0] <= '9') {
		errno = 0;
		*size = strtoull(arg, &ep, 10);
		if (!*ep && !errno)
			return 0;
	}
	if (pc_file_read(arg, notelen - 1, &text, &len, &err) < 0 ||
	    checkpoint_open(key, text, len, cp, &err) < 0) {
		free(text);
		pc_cli_error("log prove", "%s: %s", arg, err.msg);
		return err.code == PC_ETAMPER || err.code == PC_EPARSE ? PC_EXIT_FAIL
								       : PC_EXIT_ERROR;
	}
	memcpy(note, text, len);
	*nlen = len;
	*size = cp->size;
	free(text);
	return 0;
}

static int prove_consistency(struct cli *c, const char *oldp, const char *newp, const char *filep,
			     const char *keyp, const char *outp)
{
	char onote[CHECKPOINT_MAX + 4 * COSIG_LINE_MAX], nnote[CHECKPOINT_MAX + 4 * COSIG_LINE_MAX];
	char side[PC_PATH_MAX + 16], *sidetext = NULL, *body = NULL;
	uint8_t proof[MERKLE_PROOF_MAX][MERKLE_HASH], mroot[MERKLE_HASH], nroot[MERKLE_HASH];
	struct checkpoint ocp = {0}, ncp = {0}, sc;
	struct leaves l = {.want_seq = UINT64_MAX};
	struct note_verifier key;
	struct logv *v = NULL;
	struct merkle_hasher *h = NULL;
	struct pc_err err;
	const struct logv_result *r;
	uint64_t m, n;
	size_t olen = 0, nlen = 0, plen, slen = 0, off;
	const char *path;
	int rc;

	if (!(path = file_get(c, filep)) || key_get(c, keyp, &key) != 0)
		return PC_EXIT_ERROR;
	if ((rc = size_or_note(oldp, &key, &m, onote, sizeof(onote), &olen, &ocp)) != 0 ||
	    (rc = size_or_note(newp, &key, &n, nnote, sizeof(nnote), &nlen, &ncp)) != 0)
		return rc;
	rc = PC_EXIT_ERROR;
	if (m > n) {
		pc_cli_error("log prove", "OLD (%llu records) is larger than NEW (%llu)",
			     (unsigned long long)m, (unsigned long long)n);
		return PC_EXIT_USAGE;
	}
	if (logv_new(&key, &v, &err) < 0 || merkle_hasher_new(&h, &err) < 0)
		goto fail;
	logv_set_leaf_fn(v, leaf_collect, &l);
	if (logv_file(v, path, LOGV_TORN_OK, &err) < 0) {
		pc_cli_error("log prove", "%s: %s", path, err.msg);
		rc = err.code == PC_ETAMPER ? PC_EXIT_FAIL : PC_EXIT_ERROR;
		goto out;
	}
	r = logv_result(v);
	if (n > l.n) {
		pc_cli_error("log prove", "%s holds %llu records, not %llu", path,
			     (unsigned long long)l.n, (unsigned long long)n);
		rc = PC_EXIT_FAIL;
		goto out;
	}
	/* NEW as a size: the signed checkpoint for it, the file's last or the
	 * sidecar, goes with the proof (the tlog-witness body is complete) */
	if (!nlen) {
		snprintf(side, sizeof(side), "%s.checkpoint", path);
		if (r->has_cp && r->last_cp.size == n) {
			memcpy(nnote, r->last_cp_note, r->last_cp_len);
			nlen = r->last_cp_len;
			ncp = r->last_cp;
		} else if (pc_file_read(side, CHECKPOINT_MAX, &sidetext, &slen, NULL) == 0 &&
			   checkpoint_open(&key, sidetext, slen, &sc, NULL) == 0 && sc.size == n) {
			memcpy(nnote, sidetext, slen);
			nlen = slen;
			ncp = sc;
		} else {
			pc_cli_error(
			    "log prove",
			    "no signed checkpoint for %llu records (the file's last covers "
			    "%llu): give NEW as a checkpoint file, or that size",
			    (unsigned long long)n,
			    (unsigned long long)(r->has_cp ? r->last_cp.size : 0));
			rc = PC_EXIT_FAIL;
			goto out;
		}
	}
	{
		struct merkle_leaves ml = {
		    .h = h, .leaf = (const uint8_t(*)[MERKLE_HASH])l.h, .n = n};

		if (merkle_leaves_root(&ml, 0, m, mroot) < 0 ||
		    merkle_leaves_root(&ml, 0, n, nroot) < 0 ||
		    merkle_consistency_proof(m, n, merkle_leaves_root, &ml, proof, &plen, &err) < 0)
			goto fail;
	}
	/* the checkpoints given must be trees of this file */
	if ((olen && memcmp(ocp.root, mroot, MERKLE_HASH) != 0) ||
	    memcmp(ncp.root, nroot, MERKLE_HASH) != 0) {
		pc_cli_error(
		    "log prove",
		    "the first %llu records of %s are not the tree %s signs: records were "
		    "changed, or the checkpoint is of another log (a split view)",
		    (unsigned long long)(olen && memcmp(ocp.root, mroot, MERKLE_HASH) ? m : n),
		    path, olen && memcmp(ocp.root, mroot, MERKLE_HASH) ? oldp : newp);
		rc = PC_EXIT_FAIL;
		goto out;
	}
	if (merkle_consistency_verify(h, m, n, mroot, nroot, (const uint8_t(*)[MERKLE_HASH])proof,
				      plen) < 0) {
		pc_cli_error("log prove", "internal error: the proof does not verify");
		goto out;
	}
	/* the C2SP tlog-witness add-checkpoint body: old, proof, checkpoint */
	if (!(body = malloc(32 + plen * 45 + nlen + 1)))
		goto out;
	off = (size_t)sprintf(body, "old %llu\n", (unsigned long long)m);
	for (size_t i = 0; i < plen; i++) {
		char b64[64];

		sodium_bin2base64(b64, sizeof(b64), proof[i], MERKLE_HASH,
				  sodium_base64_VARIANT_ORIGINAL);
		off += (size_t)sprintf(body + off, "%s\n", b64);
	}
	body[off++] = '\n';
	memcpy(body + off, nnote, nlen);
	off += nlen;
	rc = prove_write(outp, body, off);
	goto out;
fail:
	pc_cli_error("log prove", "%s", err.msg);
	rc = PC_EXIT_ERROR;
out:
	free(body);
	free(sidetext);
	free(l.h);
	free(l.line);
	merkle_hasher_free(h);
	logv_free(v);
	return rc;
}

static int cmd_prove(struct cli *c, int argc, char **argv)
{
	static const struct option o[] = {{"file", required_argument, NULL, 'f'},
					  {"key", required_argument, NULL, 'k'},
					  {"consistency", no_argument, NULL, 'c'},
					  {NULL, 0, NULL, 0}};
	const char *filep = NULL, *keyp = NULL, *outp = NULL, *path, *note;
	bool consistency = false;
	uint8_t proof[MERKLE_PROOF_MAX][MERKLE_HASH];
	char side[PC_PATH_MAX + 16], *sidetext = NULL, *text = NULL, *ep;
	struct leaves l = {0};
	struct note_verifier key;
	const struct logv_result *r;
	struct checkpoint cp;
	struct logv *v = NULL;
	struct pc_err err;
	size_t plen, tlen, nlen, slen = 0;
	int opt, rc = PC_EXIT_ERROR; /* an exit status, never a PC_E* code */

	while ((opt = getopt_long(argc, argv, "f:k:o:", o, NULL)) != -1) {
		if (opt == 'f')
			filep = optarg;
		else if (opt == 'k')
			keyp = optarg;
		else if (opt == 'o')
			outp = optarg;
		else if (opt == 'c')
			consistency = true;
		else
			return fputs(USAGE, stderr), PC_EXIT_USAGE;
	}
	if (consistency)
		return argc - optind == 2
			   ? prove_consistency(c, argv[optind], argv[optind + 1], filep, keyp, outp)
			   : (fputs(USAGE, stderr), PC_EXIT_USAGE);
	if (argc - optind != 1)
		return fputs(USAGE, stderr), PC_EXIT_USAGE;
	errno = 0;
	l.want_seq = strtoull(argv[optind], &ep, 10);
	if (*ep || errno || !l.want_seq)
		return fputs(USAGE, stderr), PC_EXIT_USAGE;
	if (!(path = file_get(c, filep)) || key_get(c, keyp, &key) != 0)
		return PC_EXIT_ERROR;
	if (logv_new(&key, &v, &err) < 0)
		goto fail;
	logv_set_leaf_fn(v, leaf_collect, &l);
	if (logv_file(v, path, LOGV_TORN_OK, &err) < 0) {
		pc_cli_error("log prove", "%s: %s", path, err.msg);
		rc = err.code == PC_ETAMPER ? PC_EXIT_FAIL : PC_EXIT_ERROR;
		goto out;
	}
	r = logv_result(v);
	if (!l.line) {
		pc_cli_error("log prove", "%s has no record with seq %llu (it holds %llu-%llu)",
			     path, (unsigned long long)l.want_seq, (unsigned long long)r->first_seq,
			     (unsigned long long)r->last_seq);
		rc = PC_EXIT_FAIL;
		goto out;
	}
	/* The latest checkpoint: the sidecar (re-signed while idle) when it
	 * covers the record, else the last one in the file. */
	note = r->last_cp_note;
	nlen = r->last_cp_len;
	cp = r->last_cp;
	snprintf(side, sizeof(side), "%s.checkpoint", path);
	if (pc_file_read(side, CHECKPOINT_MAX, &sidetext, &slen, NULL) == 0) {
		struct checkpoint sc;

		if (checkpoint_open(&key, sidetext, slen, &sc, NULL) == 0 && sc.size <= l.n &&
		    sc.size >= cp.size) {
			note = sidetext;
			nlen = slen;
			cp = sc;
		}
	}
	if (!r->has_cp || l.index >= cp.size) {
		pc_cli_error("log prove",
			     "seq %llu is not sealed by a checkpoint yet (try again after the next "
			     "one)",
			     (unsigned long long)l.want_seq);
		rc = PC_EXIT_FAIL;
		goto out;
	}
	{
		struct merkle_hasher *h;
		int prc;

		if (merkle_hasher_new(&h, &err) < 0)
			goto fail;
		/* prc, not rc: a PC_E* code left in rc read as exit status
		 * 0 when the write below failed */
		prc = merkle_inclusion_proof(h, (const uint8_t(*)[MERKLE_HASH])l.h, cp.size,
					     l.index, proof, &plen, &err);
		merkle_hasher_free(h);
		if (prc < 0)
			goto fail;
	}
	if (logproof_format(l.index, l.line, l.len, (const uint8_t(*)[MERKLE_HASH])proof, plen,
			    note, nlen, &text, &tlen, &err) < 0)
		goto fail;
	rc = prove_write(outp, text, tlen);
	goto out;
fail:
	pc_cli_error("log prove", "%s", err.msg);
	rc = PC_EXIT_ERROR;
out:
	free(text);
	free(sidetext);
	free(l.h);
	free(l.line);
	logv_free(v);
	return rc;
}

static int cmd_keygen(struct cli *c, int argc, char **argv)
{
	static const struct option o[] = {{"name", required_argument, NULL, 'n'},
					  {"force", no_argument, NULL, 'f'},
					  {NULL, 0, NULL, 0}};
	char name[NOTE_NAME_MAX], pub[PC_PATH_MAX + 8], buf[NOTE_NAME_MAX + 80];
	const char *namep = NULL;
	const struct config *cfg;
	struct note_signer *s = NULL;
	struct pc_err err;
	bool force = false;
	int opt, n;

	while ((opt = getopt_long(argc, argv, "n:f", o, NULL)) != -1) {
		if (opt == 'n')
			namep = optarg;
		else if (opt == 'f')
			force = true;
		else
			return fputs(USAGE, stderr), PC_EXIT_USAGE;
	}
	if (optind != argc)
		return fputs(USAGE, stderr), PC_EXIT_USAGE;
	if (!(cfg = cli_cfg(c)))
		return PC_EXIT_ERROR;
	if (access(cfg->log.key, F_OK) == 0 && !force) {
		pc_cli_error("log keygen",
			     "%s exists; --force replaces it (rotation: see docs/logd.md)",
			     cfg->log.key);
		return PC_EXIT_FAIL;
	}
	if (!namep) {
		logd_key_default_name(name, sizeof(name));
		namep = name;
	}
	snprintf(pub, sizeof(pub), "%s.pub", cfg->log.key);
	if (force && access(pub, F_OK) == 0) {
		/* Keep the old public key: the files it signed still need it. */
		struct note_verifier old;
		char keep[PC_PATH_MAX + 24];

		if (note_verifier_load(pub, &old, &err) == 0) {
			snprintf(keep, sizeof(keep), "%s.%08x", pub, old.hash);
			if (rename(pub, keep) == 0)
				printf("previous public key kept as %s\n", keep);
		}
	}
	if (note_signer_generate(namep, &s, &err) < 0 ||
	    note_key_write(cfg->log.key, s, &err) < 0) {
		pc_cli_error("log keygen", "%s", err.msg);
		note_signer_free(s);
		return PC_EXIT_ERROR;
	}
	n = note_verifier_format(note_signer_verifier(s), buf, sizeof(buf));
	printf("private key %s (mode 0600, read by portcullis-logd as root before it drops "
	       "privileges)\npublic key  %s:\n%.*s",
	       cfg->log.key, pub, n > 0 ? n : 0, buf);
	note_signer_free(s);
	return PC_EXIT_OK;
}

/* ---- log status: logd's own view, from its control socket ---------------- */

static int cmd_status(struct cli *c, int argc, char **argv)
{
	static const struct option o[] = {{"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0}};
	char path[PC_PATH_MAX + 32], *reply = NULL, *nl;
	const struct config *cfg;
	struct pc_err err;
	bool json = false;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "", o, NULL)) != -1) {
		if (opt == 'j')
			json = true;
		else
			return fputs(USAGE, stderr), PC_EXIT_USAGE;
	}
	if (optind != argc)
		return fputs(USAGE, stderr), PC_EXIT_USAGE;
	if (!(cfg = cli_cfg(c)))
		return PC_EXIT_ERROR;
	snprintf(path, sizeof(path), "%s/%s", cfg->run_dir, LOGD_CTL_SOCK);
	/* --json: logd's "status-json", the same facts from one reading */
	if (pc_ctl_request(path, json ? "status-json" : "status", 5000, 8192, &reply, &err) < 0) {
		pc_cli_error("log status", "portcullis-logd: %s", err.msg);
		if (json)
			json_error_print(err.msg);
		return PC_EXIT_ERROR;
	}
	nl = strchr(reply, '\n');
	if (!nl || (strncmp(reply, "ok\n", 3) != 0 && strncmp(reply, "warn\n", 5) != 0)) {
		pc_cli_error("log status", "portcullis-logd: %.200s", reply);
		if (json)
			json_error_print("portcullis-logd did not give its status");
		free(reply);
		return PC_EXIT_ERROR;
	}
	fputs(nl + 1, stdout);
	rc = reply[0] == 'o' ? PC_EXIT_OK : PC_EXIT_FAIL;
	free(reply);
	return rc;
}

int logd_verify_files(FILE *out, int argc, char **argv, const char *config)
{
	struct cli c = {.config = config};
	int rc;

	/* options are the audit's: only files reach the verifier */
	for (int i = 1; i < argc; i++)
		if (argv[i][0] == '-')
			return PC_EXIT_USAGE;
	vout = out;
	optind = 0;
	rc = verify_main(&c, argc, argv, NULL);
	vout = stdout;
	optind = 0;
	return rc;
}

int logd_cli(int argc, char **argv, const char *config)
{
	struct cli c = {.config = config};
	const char *sub;

	if (argc < 2) {
		fputs(USAGE, stderr);
		return PC_EXIT_USAGE;
	}
	sub = argv[1];
	argc--;
	argv++;
	optind = 0;
	if (!strcmp(sub, "verify"))
		return cmd_verify(&c, argc, argv);
	if (!strcmp(sub, "show"))
		return cmd_show(&c, argc, argv);
	if (!strcmp(sub, "prove"))
		return cmd_prove(&c, argc, argv);
	if (!strcmp(sub, "keygen"))
		return cmd_keygen(&c, argc, argv);
	if (!strcmp(sub, "status"))
		return cmd_status(&c, argc, argv);
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
		fputs(USAGE, stdout);
		return PC_EXIT_OK;
	}
	pc_cli_error("log", "unknown subcommand %s", sub);
	fputs(USAGE, stderr);
	return PC_EXIT_USAGE;
}
