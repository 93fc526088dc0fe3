/* EVA driver for vault/http.c, the code that reads the bytes the sandbox
 * sends the vault: the request head (http_request_parse: the line
 * splitter, the request line, the header fields, their framing and
 * semantics) with the vault's default head limit (vault.max_header_bytes,
 * 32768), on len unknown bytes for every len the vault's input buffer
 * holds (that limit + CONN_IO_BUF); the incremental request parse the
 * vault runs as records arrive (http_request_parse_more: the first half,
 * then the whole); the chunked body framing (http_chunked_feed) on the
 * same bytes from its initial state; and Basic credentials as decoders read
 * them (http_basic_plain, http_basic_read in each reading), written to a
 * buffer of the size inject.c gives them. */
#include "tests/prove/prove.h"

#include "vault/vault_int.h"

#ifndef PROVE_MAX_HEAD
#define PROVE_MAX_HEAD 32768
#endif

int main(void)
{
	size_t len = prove_len();
	struct http_request req;
	struct http_chunked c;
	struct http_scan sc;
	struct pc_err err;
	size_t cons, off, dl;
	unsigned status;
	const char *buf;
	int rc;
	static uint8_t bout[PROVE_HI / 4 * 3 + 2 + 1];

#ifdef PROVE_EXACT
	//@ split len;
#endif
	buf = prove_buf(len);
	rc = http_request_parse(buf, len, PROVE_MAX_HEAD, &req, &status, &err);
	rc = http_request_parse(buf, len, PROVE_MAX_HEAD, &req, &status, NULL);
	http_scan_init(&sc);
	rc = http_request_parse_more(&sc, buf, len / 2, PROVE_MAX_HEAD, &req, &status, &err);
	if (rc == PC_EAGAIN)
		rc = http_request_parse_more(&sc, buf, len, PROVE_MAX_HEAD, &req, &status, &err);
	http_chunked_init(&c);
	rc = http_chunked_feed(&c, buf, len, &cons, &off, &dl, &err);
	//@ assert rc == 0 || rc == 1 || rc == PC_EPARSE;
	(void)http_basic_plain(buf, len);
	/* what is proved here is the writes' bounds: the count returned is
	 * a relation with len EVA does not keep */
	for (unsigned r = 0; r < HTTP_BASIC_READINGS; r++)
		(void)http_basic_read(buf, len, r, bout, len / 4 * 3 + 2);
	return 0;
}
