/* checker: the readable rendering of a certificate (Markdown or HTML) in
 * three parts: what was proven, what the proof relies on, what it does not
 * cover. Everything shown is escaped: the statement is input. */
#include <stdio.h>
#include <string.h>

#include "checker/checker_int.h"

static void text(struct pc_buf *b, bool html, const char *s)
{
	for (const char *p = s ? s : ""; *p; p++) {
		const char *r = NULL;

		if (html) {
			switch (*p) {
			case '<':
				r = "&lt;";
				break;
			case '>':
				r = "&gt;";
				break;
			case '&':
				r = "&amp;";
				break;
			case '"':
				r = "&quot;";
				break;
			}
		} else if (strchr("\\`*_[]<>|#", *p)) {
			char e[2] = {'\\', *p};

			pc_buf_put(b, e, 2);
			continue;
		}
		if (r)
			pc_buf_put(b, r, strlen(r));
		else if ((unsigned char)*p >= 0x20 || *p == '\t')
			pc_buf_put(b, p, 1);
	}
}

static void head(struct pc_buf *b, bool html, int level, const char *s)
{
	if (html) {
		pc_buf_printf(b, "<h%d>", level);
		text(b, html, s);
		pc_buf_printf(b, "</h%d>\n", level);
	} else {
		pc_buf_printf(b, "\n%.*s ", level, "####");
		text(b, html, s);
		pc_buf_printf(b, "\n\n");
	}
}

static void item(struct pc_buf *b, bool html, const char *label, const char *s)
{
	pc_buf_printf(b, html ? "<li>" : "- ");
	if (label) {
		pc_buf_printf(b, html ? "<b>" : "**");
		text(b, html, label);
		pc_buf_printf(b, html ? "</b>: " : "**: ");
	}
	text(b, html, s);
	pc_buf_printf(b, html ? "</li>\n" : "\n");
}

static void list_open(struct pc_buf *b, bool html)
{
	if (html)
		pc_buf_printf(b, "<ul>\n");
}

static void list_close(struct pc_buf *b, bool html)
{
	pc_buf_printf(b, html ? "</ul>\n" : "\n");
}

static void strlist(struct pc_buf *b, bool html, const struct jv *v)
{
	list_open(b, html);
	for (size_t i = 0; v && v->type == JV_ARRAY && i < v->n; i++)
		item(b, html, NULL, jv_str(v->items[i]));
	list_close(b, html);
}

char *cert_render(const struct jv *st, bool html)
{
	const struct jv *p = jv_get(st, "predicate"), *v;
	struct pc_buf b = {0};
	char line[600];

	if (!p || p->type != JV_OBJECT)
		return NULL;
	if (html)
		pc_buf_printf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>"
				  "portcullis containment certificate</title></head><body>\n");
	snprintf(line, sizeof(line), "Containment certificate: sandbox %s",
		 jv_str(jv_get(p, "sandbox")) ?: "?");
	head(&b, html, 1, line);
	list_open(&b, html);
	item(&b, html, "Sandbox", jv_str(jv_get(p, "sandbox")));
	item(&b, html, "Bridge", jv_str(jv_get(p, "bridge")));
	item(&b, html, "Issued", jv_str(jv_get(p, "issued")));
	item(&b, html, "Policy", jv_str(jv_get(p, "policy")));
	if (jv_str(jv_get(p, "spec"))) /* (certificates before the spec have none) */
		item(&b, html, "Spec (docs/spec.md)", jv_str(jv_get(p, "spec")));
	if (jv_str(jv_get(p, "model"))) /* (certificates before model versions have none) */
		item(&b, html, "Containment model", jv_str(jv_get(p, "model")));
	item(&b, html, "Result", jv_str(jv_get(p, "result")));
	list_close(&b, html);

	head(&b, html, 2, "1. What was proven");
	text(&b, html,
	     "Every packet entering from a sandbox port is queued to the engine, sent to "
	     "the guard's own listeners, or dropped. Each obligation below held, with the "
	     "evidence read from the live kernel state:");
	pc_buf_printf(&b, html ? "\n" : "\n\n");
	v = jv_get(p, "obligations");
	for (size_t i = 0; v && v->type == JV_ARRAY && i < v->n; i++) {
		const struct jv *o = v->items[i];

		snprintf(line, sizeof(line), "%s (%s)", jv_str(jv_get(o, "statement")) ?: "?",
			 jv_str(jv_get(o, "id")) ?: "?");
		head(&b, html, 3, line);
		strlist(&b, html, jv_get(o, "evidence"));
	}
	head(&b, html, 3, "Approved destinations");
	list_open(&b, html);
	v = jv_get(p, "approved_destinations");
	for (size_t i = 0; v && v->type == JV_ARRAY && i < v->n; i++) {
		const struct jv *d = v->items[i];

		snprintf(line, sizeof(line), "%s ports %s (%s)",
			 jv_str(jv_get(d, "host")) ?: jv_str(jv_get(d, "cidr")) ?: "?",
			 jv_str(jv_get(d, "ports")) ?: "?", jv_str(jv_get(d, "proto")) ?: "?");
		item(&b, html, NULL, line);
	}
	list_close(&b, html);
	head(&b, html, 3, "Secret bindings (names and hosts; values never leave the vault)");
	list_open(&b, html);
	v = jv_get(p, "secret_bindings");
	for (size_t i = 0; v && v->type == JV_ARRAY && i < v->n; i++) {
		const struct jv *d = v->items[i];

		snprintf(line, sizeof(line), "%s bound to %s (header %s)",
			 jv_str(jv_get(d, "name")) ?: "?", jv_str(jv_get(d, "host")) ?: "?",
			 jv_str(jv_get(d, "header")) ?: "?");
		item(&b, html, NULL, line);
	}
	list_close(&b, html);

	head(&b, html, 2, "2. What the proof relies on");
	strlist(&b, html, jv_get(p, "assumptions"));
	head(&b, html, 3, "Subjects (what was measured)");
	list_open(&b, html);
	v = jv_get(st, "subject");
	for (size_t i = 0; v && v->type == JV_ARRAY && i < v->n; i++) {
		snprintf(line, sizeof(line), "sha256:%s",
			 jv_str(jv_get(jv_get(v->items[i], "digest"), "sha256")) ?: "?");
		item(&b, html, jv_str(jv_get(v->items[i], "name")), line);
	}
	list_close(&b, html);

	head(&b, html, 2, "3. What it does not cover");
	strlist(&b, html, jv_get(p, "not_covered"));

	/* The certificate proves the path; the log's audit is the other half:
	 * that each decision on it was one the spec allows (docs/logd.md,
	 * "Audit"). */
	head(&b, html, 2, "4. How to audit the log");
	v = jv_get(p, "log_seq");
	snprintf(line, sizeof(line),
		 "This certificate was recorded in the gateway's signed log (seq %s) under "
		 "policy %s. To check that every verdict the guard logged is one docs/spec.md "
		 "allows under the policy in force, run on the log's files:",
		 v && v->type == JV_NUMBER ? v->s : "?", jv_str(jv_get(p, "policy")) ?: "?");
	text(&b, html, line);
	pc_buf_printf(&b, html ? "\n" : "\n\n");
	list_open(&b, html);
	item(&b, html, NULL,
	     "portcullis log audit [FILE...] [--policies DIR]: the log is verified first (as "
	     "portcullis log verify), then replayed through the spec's model under each policy "
	     "the records name, read from the policy store DIR (default: the state "
	     "directory's policies/); exit 0 only when every verdict is confirmed");
	item(&b, html, NULL,
	     "what it cannot prove: it trusts the facts each record states, and it cannot see "
	     "traffic that was never logged; that is what section 1 and the guard's fail-closed "
	     "rules are for");
	list_close(&b, html);
	if (html)
		pc_buf_printf(&b, "</body></html>\n");
	return pc_buf_take(&b, NULL); /* NULL after a failure */
}
