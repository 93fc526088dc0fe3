/* EVA driver for vault/http.c, the parts that read every byte the sandbox
 * sends the vault: the head's line splitter (head_split, static: this
 * file includes http.c to reach it) with the vault's default head limit
 * (vault.max_header_bytes, 32768), on len unknown bytes for every len the
 * vault's input buffer holds (that limit + CONN_IO_BUF), from any number of
 * skipped empty lines; and the chunked body framing (http_chunked_feed) on
 * the same bytes from its initial state. What is not yet analysed, and
 * why: docs/prove.md. */
#include "tests/prove/prove.h"

#include "vault/http.c"

#ifndef PROVE_MAX_HEAD
#define PROVE_MAX_HEAD 32768
#endif

int main(void)
{
	size_t len = prove_len();
	struct head_lines hl;
	struct http_chunked c;
	struct pc_err err;
	size_t cons, off, dl, skip;
	unsigned status;
	const char *buf;
	int rc;

#ifdef PROVE_EXACT
	//@ split len;
#endif
	buf = prove_buf(len);
	skip = Frama_C_size_t_interval(0, len);
	(void)head_split(buf, len, PROVE_MAX_HEAD, skip, &hl, &status, &err);
	http_chunked_init(&c);
	rc = http_chunked_feed(&c, buf, len, &cons, &off, &dl, &err);
	//@ assert rc == 0 || rc == 1 || rc == PC_EPARSE;
	return 0;
}
