/* Prometheus text exposition format (version 0.0.4): the metric families
 * the daemons serve on their control sockets and `portcullis metrics`
 * prints (docs/operations.md, "Metrics"). */
#include "common/pc.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
