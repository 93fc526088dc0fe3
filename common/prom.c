/* Prometheus text exposition format (version 0.0.4): the metric families
 * the daemons serve on their control sockets and `portcullis metrics`
 * prints (docs/operations.md, "Metrics"); each daemon's process_* families;
 * and the merge of several daemons' texts into one exposition. */
#include "common/pc.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void prom_add(struct pc_prom *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void prom_add(struct pc_prom *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pc_buf_vprintf(&b->buf, fmt, ap);
	va_end(ap);
}

void pc_prom_family(struct pc_prom *b, const char *name, const char *type, const char *help)
{
	prom_add(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void pc_prom_u64(struct pc_prom *b, const char *name, const char *labels, uint64_t v)
{
	prom_add(b, "%s%s%s%s %llu\n", name, labels && *labels ? "{" : "", labels ? labels : "",
		 labels && *labels ? "}" : "", (unsigned long long)v);
}

void pc_prom_f64(struct pc_prom *b, const char *name, const char *labels, double v)
{
	prom_add(b, "%s%s%s%s %.3f\n", name, labels && *labels ? "{" : "", labels ? labels : "",
		 labels && *labels ? "}" : "", v);
}

void pc_prom_one_u64(struct pc_prom *b, const char *name, const char *type, const char *help,
		     uint64_t v)
{
	pc_prom_family(b, name, type, help);
	pc_prom_u64(b, name, NULL, v);
}

void pc_prom_one_f64(struct pc_prom *b, const char *name, const char *type, const char *help,
		     double v)
{
	pc_prom_family(b, name, type, help);
	pc_prom_f64(b, name, NULL, v);
}

void pc_prom_rows(struct pc_prom *b, const struct pc_prom_row *rows, size_t n, void *base,
		  bool atomic)
{
	for (size_t i = 0; i < n; i++) {
		void *p = (char *)base + rows[i].off;
		uint64_t v;

		if (atomic)
			v = atomic_load((_Atomic uint64_t *)p);
		else
			memcpy(&v, p, sizeof(v));
		if (rows[i].type)
			pc_prom_family(b, rows[i].name, rows[i].type, rows[i].help);
		pc_prom_u64(b, rows[i].name, rows[i].labels, v);
	}
}

const char *pc_prom_label(const char *v, char *buf, size_t len)
{
	size_t o = 0;

	for (; v && *v && o + 3 < len; v++) {
		if (*v == '\\' || *v == '"') {
			buf[o++] = '\\';
			buf[o++] = *v;
		} else if (*v == '\n') {
			buf[o++] = '\\';
			buf[o++] = 'n';
		} else {
			buf[o++] = *v;
		}
	}
	if (len)
		buf[o < len ? o : len - 1] = '\0';
	return buf;
}

char *pc_prom_take(struct pc_prom *b)
{
	return pc_buf_take(&b->buf, NULL);
}

/* ---- process_* (ad-guard, issue 18 point 10) ------------------------------ */

/* The fields of /proc/self/stat after the command name: utime (14), stime
 * (15), starttime (22), vsize (23), rss (24), numbered from 1 as in
 * proc(5). The name is in parentheses and may hold anything: parse from
 * the last ')'. */
static int proc_stat(double *cpu_s, double *start_ticks, double *vsize, double *rss_pages)
{
	char buf[1024], *p;
	unsigned long long v[24] = {0};
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n;
	int field = 3;

	if (!f)
		return PC_EIO;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p)
		return PC_EPARSE;
	p++;
	while (*p && field <= 24) {
		char *end;

		while (*p == ' ')
			p++;
		if (field == 3) { /* state: a letter */
			while (*p && *p != ' ')
				p++;
		} else {
			v[field - 1] = strtoull(p, &end, 10);
			if (end == p)
				return PC_EPARSE;
			p = end;
		}
		field++;
	}
	if (field <= 24)
		return PC_EPARSE;
	*cpu_s = (double)(v[13] + v[14]) / (double)sysconf(_SC_CLK_TCK);
	*start_ticks = (double)v[21];
	*vsize = (double)v[22];
	*rss_pages = (double)v[23];
	return 0;
}

/* Boot time (Unix seconds): "btime" of /proc/stat. */
static double boot_time(void)
{
	char line[256];
	double bt = 0;
	FILE *f = fopen("/proc/stat", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "btime ", 6) == 0) {
			bt = strtod(line + 6, NULL);
			break;
		}
	fclose(f);
	return bt;
}

/* Descriptors open now, or -1 when /proc/self/fd cannot be read. */
static int64_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int64_t n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n ? n - 1 : 0; /* not the directory's own descriptor */
}

void pc_prom_process(struct pc_prom *b)
{
	double cpu = 0, start = 0, vsize = 0, rss = 0;
	struct rlimit rl;
	int64_t fds = open_fds();

	if (proc_stat(&cpu, &start, &vsize, &rss) < 0)
		return; /* no /proc: no process_* (said by their absence) */
	pc_prom_one_f64(b, "process_cpu_seconds_total", "counter",
			"Total user and system CPU time spent in seconds.", cpu);
	if (fds >= 0)
		pc_prom_one_u64(b, "process_open_fds", "gauge", "Number of open file descriptors.",
				(uint64_t)fds);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		pc_prom_one_u64(b, "process_max_fds", "gauge",
				"Maximum number of open file descriptors.", (uint64_t)rl.rlim_cur);
	pc_prom_one_u64(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
			(uint64_t)vsize);
	pc_prom_one_u64(b, "process_resident_memory_bytes", "gauge",
			"Resident memory size in bytes.",
			(uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE));
	pc_prom_one_f64(b, "process_start_time_seconds", "gauge",
			"Start time of the process since unix epoch in seconds.",
			boot_time() + start / (double)sysconf(_SC_CLK_TCK));
}

/* ---- merging expositions (ad-guard) -------------------------------------- */

struct prom_fam {
	size_t text;		 /* which text */
	const char *start, *end; /* its lines, "# HELP" to the last sample */
	char name[128];
};

/* The families of one text, in order (a family starts at "# HELP name"). */
static int fams_of(const char *t, size_t ti, struct prom_fam **v, size_t *n, size_t *cap)
{
	const char *p = t;

	while (*p) {
		const char *eol = strchr(p, '\n');
		const char *next = eol ? eol + 1 : p + strlen(p);

		if (strncmp(p, "# HELP ", 7) == 0) {
			struct prom_fam *f;
			size_t l = strcspn(p + 7, " \n");

			if (*n == *cap) {
				size_t c = *cap ? 2 * *cap : 64;
				struct prom_fam *nv = realloc(*v, c * sizeof(*nv));

				if (!nv)
					return PC_ENOMEM;
				*v = nv;
				*cap = c;
			}
			f = &(*v)[(*n)++];
			f->text = ti;
			f->start = p;
			pc_strlcpy(f->name, p + 7,
				   l + 1 < sizeof(f->name) ? l + 1 : sizeof(f->name));
		}
		if (*n && (*v)[*n - 1].text == ti)
			(*v)[*n - 1].end = next;
		p = next;
	}
	return 0;
}

/* The samples of f (not its comments), each with label added. */
static void samples_labelled(struct pc_buf *o, const struct prom_fam *f, const char *label)
{
	const char *p = f->start;

	while (p < f->end) {
		const char *eol = memchr(p, '\n', (size_t)(f->end - p));
		size_t len = eol ? (size_t)(eol - p) : (size_t)(f->end - p);
		size_t nl = strcspn(p, "{ \n");

		if (p[0] != '#' && len > nl) {
			if (p[nl] == '{')
				pc_buf_printf(o, "%.*s{%s,%.*s\n", (int)nl, p, label,
					      (int)(len - nl - 1), p + nl + 1);
			else
				pc_buf_printf(o, "%.*s{%s}%.*s\n", (int)nl, p, label,
					      (int)(len - nl), p + nl);
		}
		p += len + 1;
	}
}

char *pc_prom_merge(char *const *texts, const char *const *label, size_t n)
{
	struct prom_fam *f = NULL;
	size_t nf = 0, cap = 0;
	struct pc_buf o = {0};
	char *out = NULL;

	for (size_t i = 0; i < n; i++)
		if (texts[i] && fams_of(texts[i], i, &f, &nf, &cap) < 0)
			goto done;
	for (size_t i = 0; i < nf; i++) {
		bool shared = false, seen = false;

		for (size_t j = 0; j < nf; j++) {
			if (j == i || strcmp(f[j].name, f[i].name) != 0)
				continue;
			shared = true;
			seen = seen || j < i;
		}
		if (!shared) {
			pc_buf_printf(&o, "%.*s", (int)(f[i].end - f[i].start), f[i].start);
			continue;
		}
		if (seen)
			continue; /* printed with the first */
		/* its HELP and TYPE lines, then every text's samples, labelled */
		for (const char *p = f[i].start; p < f[i].end && p[0] == '#';) {
			const char *eol = memchr(p, '\n', (size_t)(f[i].end - p));
			size_t len = eol ? (size_t)(eol - p) + 1 : (size_t)(f[i].end - p);

			pc_buf_printf(&o, "%.*s", (int)len, p);
			p += len;
		}
		for (size_t j = i; j < nf; j++)
			if (strcmp(f[j].name, f[i].name) == 0)
				samples_labelled(&o, &f[j], label[f[j].text]);
	}
	out = pc_buf_take(&o, NULL); /* NULL after a failed append */
done:
	free(f);
	if (!out)
		free(pc_buf_take(&o, NULL));
	return out;
}
