/* The TLS server_name extension (RFC 6066 3) as OpenSSL's ClientHello
 * callback hands it over: sandbox bytes, so parsed strictly and fuzzed. */
#include "vault/vault.h"

#include <string.h>

int sni_parse(const uint8_t *ext, size_t len, char *host, size_t hostlen, struct pc_err *err)
{
	struct pc_host h;
	const char *why = "";
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
	/* The engine judges the same name with the same grammar
	 * (dnsguard/clienthello.c): what one refuses, the other does. */
	if (pc_host_parse(ext, 5, 5 + nlen, PC_HOST_SNI, &h, &why) < 0)
		return pc_err_set(err, PC_EPARSE, "server_name is not a valid DNS host name: %s",
				  why);
	if (pc_strlcpy(host, h.name, hostlen) >= hostlen)
		return pc_err_set(err, PC_EINVAL, "server_name too long");
	return 0;
}
