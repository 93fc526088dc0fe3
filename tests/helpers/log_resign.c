/* log_resign KEY IN OUT [EDIT...]: a compromised engine's log, made by
 * hand. Each EDIT rewrites records of the log IN, then every record's
 * prev and hash, every checkpoint and the sidecar OUT.checkpoint are made
 * again and signed with logd's key KEY: the result verifies as any log
 * logd wrote, and says what the edits say. `portcullis log audit` must
 * catch what `log verify` cannot (tests/integration/logd_audit.sh).
 *
 *   SEQ:drop            the record is left out (later seqs move down one)
 *   SEQ:FIELD=JSON      the member FIELD of record SEQ takes the JSON value
 *   all:FIELD=JSON      ... of every record that has it
 */
#include "logd/logd_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct edit {
	bool all, drop;
	uint64_t seq;
	const char *field, *value;
};

static int die(const char *what)
{
	fprintf(stderr, "log_resign: %s\n", what);
	return 3;
}

/* The member "field": replaced by value in line (len), into out. */
static size_t set_member(const char *line, size_t len, const char *field, const char *value,
			 char *out, size_t outlen)
{
	char key[256];
	const char *k, *v, *e;
	size_t n;

	snprintf(key, sizeof(key), "\"%s\":", field);
	k = memmem(line, len, key, strlen(key));
	if (!k || len + strlen(value) + 1 > outlen) {
		memcpy(out, line, len);
		return len;
	}
	v = k + strlen(key);
	if (*v == '"') {
		for (e = v + 1; *e && !(*e == '"' && e[-1] != '\\'); e++)
			;
		e++;
	} else if (*v == '[') {
		e = memchr(v, ']', len - (size_t)(v - line)) + 1;
	} else {
		for (e = v; *e != ',' && *e != '}'; e++)
			;
	}
	n = (size_t)(v - line);
	memcpy(out, line, n);
	memcpy(out + n, value, strlen(value));
	memcpy(out + n + strlen(value), e, len - (size_t)(e - line));
	return n + strlen(value) + len - (size_t)(e - line);
}

static uint64_t seq_of(const char *line)
{
	const char *p = strchr(line, ':');

	return p ? strtoull(p + 1, NULL, 10) : 0;
}

int main(int argc, char **argv)
{
	struct note_signer *signer = NULL;
	struct merkle_hasher *h = NULL;
	struct merkle_tree tree;
	struct pc_err err = {0};
	struct edit ed[32];
	size_t ne = 0, cap = 1 << 16;
	char *line = malloc(cap), *tmp = malloc(cap * 2), prev[2 * MERKLE_HASH + 1];
	char note[CHECKPOINT_MAX], sidecar[4096], last_note[CHECKPOINT_MAX] = "";
	uint64_t drop_shift = 0;
	bool last_cp = false;
	FILE *in, *out;

	if (argc < 4)
		return die(
		    "usage: log_resign KEY IN OUT [SEQ:drop|SEQ:FIELD=JSON|all:FIELD=JSON]...");
	for (int i = 4; i < argc && ne < 32; i++) {
		char *c = strchr(argv[i], ':'), *eq;

		if (!c)
			return die("an edit is SEQ:drop or SEQ:FIELD=JSON");
		*c = '\0';
		ed[ne].all = strcmp(argv[i], "all") == 0;
		ed[ne].seq = strtoull(argv[i], NULL, 10);
		ed[ne].drop = strcmp(c + 1, "drop") == 0;
		if (!ed[ne].drop) {
			if (!(eq = strchr(c + 1, '=')))
				return die("an edit is SEQ:drop or SEQ:FIELD=JSON");
			*eq = '\0';
			ed[ne].field = c + 1;
			ed[ne].value = eq + 1;
		}
		ne++;
	}
	if (note_key_load(argv[1], &signer, &err) < 0 || merkle_hasher_new(&h, &err) < 0)
		return die(err.msg);
	if (!(in = fopen(argv[2], "r")) || !(out = fopen(argv[3], "w")))
		return die("cannot open the files");
	merkle_tree_init(&tree);
	memset(prev, '0', 2 * MERKLE_HASH);
	prev[2 * MERKLE_HASH] = '\0';
	while (fgets(line, (int)cap, in)) {
		size_t len = strcspn(line, "\n");

		line[len] = '\0';
		if (strncmp(line, "{\"checkpoint\":\"", 15) == 0) {
			struct checkpoint cp;
			size_t nl, body;
			char *e;

			if (logv_checkpoint_unescape(line, len, note, sizeof(note), &nl) < 0)
				return die("a checkpoint line does not parse");
			note[nl] = '\0';
			e = strstr(note, "\n\n");
			body = e ? (size_t)(e - note) + 1 : nl;
			if (checkpoint_body_parse(note, body, &cp, &err) < 0)
				return die(err.msg);
			cp.size = tree.size;
			if (merkle_tree_root(h, &tree, cp.root) < 0)
				return die("hashing failed");
			int n = checkpoint_sign(signer, &cp, note, sizeof(note), &err);

			if (n < 0)
				return die(err.msg);
			memcpy(last_note, note, (size_t)n + 1);
			fputs("{\"checkpoint\":\"", out);
			for (int i = 0; i < n; i++) {
				if (note[i] == '\n')
					fputs("\\n", out);
				else
					fputc(note[i], out);
			}
			fputs("\"}\n", out);
			last_cp = true;
			continue;
		}
		uint64_t seq = seq_of(line);
		bool dropped = false;

		for (size_t i = 0; i < ne; i++) {
			if (!ed[i].all && ed[i].seq != seq)
				continue;
			if (ed[i].drop) {
				dropped = true;
				continue;
			}
			len = set_member(line, len, ed[i].field, ed[i].value, tmp, cap * 2);
			memcpy(line, tmp, len);
			line[len] = '\0';
		}
		if (dropped) {
			drop_shift++;
			continue;
		}
		if (drop_shift) {
			char num[32];

			snprintf(num, sizeof(num), "%llu", (unsigned long long)(seq - drop_shift));
			len = set_member(
			    line, len, strncmp(line, "{\"seq\"", 6) == 0 ? "seq" : "event.sequence",
			    num, tmp, cap * 2);
			memcpy(line, tmp, len);
			line[len] = '\0';
		}
		/* the tail: ,"<prev>":"<hex>","<hash>":"<hex>"} made again */
		char *hk = strstr(line, ",\"event.hash\":\"");
		char *pk = strstr(line, ",\"portcullis.prev\":\"");

		if (!hk) {
			hk = strstr(line, ",\"hash\":\"");
			pk = strstr(line, ",\"prev\":\"");
		}
		if (!hk || !pk)
			return die("a record without prev and hash");
		if (tree.size == 0) /* the file's first record links to the file before */
			memcpy(prev, strchr(pk + 3, ':') + 2, 2 * MERKLE_HASH);
		memcpy(strchr(pk + 3, ':') + 2, prev, 2 * MERKLE_HASH);
		uint8_t leaf[MERKLE_HASH];

		if (merkle_leaf(h, line, (size_t)(hk - line), "}", 1, leaf) < 0 ||
		    merkle_tree_append(h, &tree, leaf) < 0)
			return die("hashing failed");
		merkle_hex(leaf, prev);
		memcpy(strchr(hk + 3, ':') + 2, prev, 2 * MERKLE_HASH);
		fprintf(out, "%s\n", line);
		last_cp = false;
	}
	if (!last_cp && last_note[0])
		return die("the log does not end with a checkpoint: stop logd first");
	fclose(in);
	if (fclose(out) != 0)
		return die("writing failed");
	snprintf(sidecar, sizeof(sidecar), "%s.checkpoint", argv[3]);
	if (!(out = fopen(sidecar, "w")))
		return die("cannot write the sidecar");
	fputs(last_note, out);
	fclose(out);
	note_signer_free(signer);
	merkle_hasher_free(h);
	free(line);
	free(tmp);
	return 0;
}
