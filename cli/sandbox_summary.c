/* The launcher's closing summary: what the guard decided for this sandbox,
 * counted from its records in the signed log (read from where the log
 * stood when the sandbox was created), and how the run ended. */
#include "cli/cli_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct rec_fields {
	uint64_t seq;
	char action[32], outcome[16];
	char secrets[256]; /* names, comma separated */
};

static void str_copy(const char *v, size_t vl, char *out, size_t len)
{
	size_t o = 0;

	/* our own fields hold no escapes worth decoding: copy between quotes */
	for (size_t i = 0; i < vl && o + 1 < len; i++)
		if (v[i] != '"')
			out[o++] = v[i];
	out[o] = '\0';
}

static int rec_field(void *ctx, const char *k, size_t kl, enum logjson_type t, const char *v,
		     size_t vl)
{
	struct rec_fields *r = ctx;

	/* both spellings: ECS names, and those of logs written before them */
	if ((LOGJSON_KEY_IS(k, kl, "seq") || LOGJSON_KEY_IS(k, kl, "event.sequence")) &&
	    t == LOGJSON_SCALAR)
		r->seq = strtoull(v, NULL, 10);
	else if (LOGJSON_KEY_IS(k, kl, "event.action") && t == LOGJSON_STRING)
		str_copy(v, vl, r->action, sizeof(r->action));
	else if (LOGJSON_KEY_IS(k, kl, "event.outcome") && t == LOGJSON_STRING)
		str_copy(v, vl, r->outcome, sizeof(r->outcome));
	else if ((LOGJSON_KEY_IS(k, kl, "secrets") ||
		  LOGJSON_KEY_IS(k, kl, "portcullis.secrets")) &&
		 t == LOGJSON_ARRAY && vl > 2)
		str_copy(v + 1, vl - 2, r->secrets, sizeof(r->secrets)); /* [..] -> a,b */
	return 0;
}

/* Add each name of names ("A,B") to list, kept as "A,B," while building. */
static void names_add(char *list, size_t len, const char *names)
{
	const char *p = names;

	while (*p) {
		size_t n = strcspn(p, ","), ll = strlen(list);
		char pat[VAULT_NAME_MAX + 3];

		if (n && n < VAULT_NAME_MAX) {
			/* ",A," inside ","+list: a whole name, not a suffix of one */
			snprintf(pat, sizeof(pat), ",%.*s,", (int)n, p);
			bool have = !strncmp(list, pat + 1, n + 1) || strstr(list, pat);

			if (!have && ll + n + 1 < len)
				snprintf(list + ll, len - ll, "%.*s,", (int)n, p);
		}
		p += n;
		if (*p == ',')
			p++;
	}
}

static void count_line(const char *name, uint64_t seq_first, const char *line, size_t len,
		       struct sb_counts *c)
{
	struct rec_fields r = {0};
	char pat[POLICY_NAME_MAX + 16];
	/* "sandbox" (old logs) or "portcullis.sandbox" */
	int plen = snprintf(pat, sizeof(pat), "sandbox\":\"%s\"", name);

	if (plen < 0 || (size_t)plen >= sizeof(pat) || !memmem(line, len, pat, (size_t)plen) ||
	    logjson_each(line, len, rec_field, &r) < 0 || r.seq < seq_first)
		return;
	if (!c->first_seq || r.seq < c->first_seq)
		c->first_seq = r.seq;
	if (r.seq > c->last_seq)
		c->last_seq = r.seq;
	bool ok = !strcmp(r.outcome, "success"), no = !strcmp(r.outcome, "failure");

	if (!strcmp(r.action, "connect")) {
		c->flows_allowed += ok;
		c->flows_refused += no;
	} else if (!strcmp(r.action, "dns-query")) {
		c->dns_allowed += ok;
		c->dns_refused += no;
	} else if (!strcmp(r.action, "http-request") && (ok || no)) {
		/* (the response's own record carries no outcome) */
		c->http_requests++;
		if (ok && r.secrets[0]) {
			c->injected++;
			names_add(c->injected_names, sizeof(c->injected_names), r.secrets);
		}
	} else if (!strcmp(r.action, "exfiltration")) {
		c->exfil++;
	}
}

void sbsum_count_buffer(const char *name, uint64_t seq_first, const char *buf, size_t len,
			struct sb_counts *c)
{
	size_t n;

	for (const char *p = buf, *end = buf + len; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t l = eol ? (size_t)(eol - p) : (size_t)(end - p);

		count_line(name, seq_first, p, l, c);
		p += l + 1;
	}
	n = strnlen(c->injected_names, sizeof(c->injected_names));
	if (n && c->injected_names[n - 1] == ',')
		c->injected_names[n - 1] = '\0'; /* the trailing comma */
}

int sbsum_count(const struct sb *s, struct sb_counts *out, struct pc_err *err)
{
	struct sb_counts c = {0};
	struct stat st;
	uint64_t off = s->log_off;
	size_t n;
	char *map;
	int fd;

	fd = open(s->cfg.log.file, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		int rc = pc_err_errno(err, PC_EIO, "reading %s", s->cfg.log.file);

		if (fd >= 0)
			close(fd);
		return rc;
	}
	/* rotated since (another file, or a shorter one): the current file
	 * holds the rest of the run */
	if (st.st_ino != s->log_ino || st.st_dev != s->log_dev || (uint64_t)st.st_size < off) {
		c.rotated = true;
		off = 0;
	}
	n = (size_t)st.st_size;
	if (n == off) {
		close(fd);
		*out = c;
		return 0;
	}
	map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return pc_err_errno(err, PC_EIO, "reading %s", s->cfg.log.file);
	sbsum_count_buffer(s->name, s->seq_first, map + off, n - off, &c);
	munmap(map, n);
	*out = c;
	return 0;
}

void sbsum_print(const struct sb *s, const struct sb_counts *c, int status, const char *how)
{
	char b4[PC_ADDRSTRLEN] = "", b6[PC_ADDRSTRLEN] = "";

	if (s->addr4.family)
		pc_addr_str(&s->addr4, b4, sizeof(b4));
	if (s->addr6.family)
		pc_addr_str(&s->addr6, b6, sizeof(b6));
	fprintf(stderr, "portcullis sandbox %s: summary\n", s->name);
	fprintf(stderr, "  %-17s %s%s%s on %s port %s\n", "sandbox", b4, b4[0] && b6[0] ? ", " : "",
		b6, s->cfg.bridge, s->port);
	fprintf(stderr, "  %-17s %s\n", "command", how);
	fprintf(stderr, "  %-17s %u allowed, %u refused\n", "flows", c->flows_allowed,
		c->flows_refused);
	fprintf(stderr, "  %-17s %u allowed, %u refused\n", "DNS queries", c->dns_allowed,
		c->dns_refused);
	fprintf(stderr, "  %-17s %u%s%s%s\n", "secrets injected", c->injected,
		c->injected ? " (" : "", c->injected_names, c->injected ? ")" : "");
	fprintf(stderr, "  %-17s %u refused\n", "exfiltration", c->exfil);
	if (c->first_seq)
		fprintf(stderr, "  %-17s seq %llu..%llu in %s%s\n", "log",
			(unsigned long long)c->first_seq, (unsigned long long)c->last_seq,
			s->cfg.log.file,
			c->rotated ? " (rotated during the run: this file only)" : "");
	else
		fprintf(stderr, "  %-17s no records found in %s\n", "log", s->cfg.log.file);
	fprintf(stderr, "  %-17s %s\n", "certificate", s->cert_path[0] ? s->cert_path : "none");
	fprintf(stderr, "  %-17s %d\n", "exit status", status);
}
