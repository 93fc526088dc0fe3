/* The TLS server_name extension (RFC 6066 3) as OpenSSL's ClientHello
 * callback hands it over: sandbox bytes, so parsed strictly and fuzzed. */
#include "vault/vault.h"

#include <ctype.h>
#include <string.h>

static bool host_valid(const uint8_t *p, size_t n)
{
	size_t label = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = p[i];

		if (c == '.') {
			if (label == 0 || p[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!(isalnum(c) && c < 0x80) && c != '-' && c != '_')
			return false;
		if (c == '-' && label == 0)
			return false;
		if (++label > 63)
			return false;
	}
	return label > 0 && p[n - 1] != '-';
}

int sni_parse(const uint8_t *ext, size_t len, char *host, size_t hostlen, struct pc_err *err)
{
	size_t list, nlen;

	if (len < 2)
		return pc_err_set(err, PC_EPARSE, "server_name extension too short");
	list = (size_t)ext[0] << 8 | ext[1];
	if (list != len - 2)
		return pc_err_set(err, PC_EPARSE, "server_name list length mismatch");
	if (list < 3 || ext[2] != 0)
		return pc_err_set(err, PC_EPARSE, "server_name without a host_name entry");
	nlen = (size_t)ext[3] << 8 | ext[4];
	if (nlen + 3 != list)
		return pc_err_set(err, PC_EPARSE, "server_name must hold exactly one host name");
	if (!host_valid(ext + 5, nlen))
		return pc_err_set(err, PC_EPARSE, "server_name is not a valid DNS host name");
	if (nlen + 1 > hostlen)
		return pc_err_set(err, PC_EINVAL, "server_name too long");
	for (size_t i = 0; i < nlen; i++)
		host[i] = (char)tolower(ext[5 + i]);
	host[nlen] = '\0';
	return 0;
}
