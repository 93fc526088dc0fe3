/* EVA driver for dnsguard/clienthello.c: tls_clienthello_sni on len unknown
 * bytes, for every len up to what the engine gathers for a held flow
 * (engine/engine_int.h HELD_BUF_MAX, 16384), into an SNI buffer of the
 * engine's size and into none. */
#include "tests/prove/prove.h"

#include "dnsguard/dnsguard.h"

int main(void)
{
	size_t len = prove_len();
	char sni[POLICY_HOST_MAX];
	const uint8_t *buf;
	size_t need;
	int rc;

#ifdef PROVE_EXACT
	//@ split len;
#endif
	buf = prove_buf(len);
	rc = tls_clienthello_sni(buf, len, sni, sizeof(sni), &need);
	/*@ assert rc == 0 || rc == 1 || rc == PC_EAGAIN || rc == PC_EPARSE ||
		   rc == PC_EINVAL || rc == PC_EREFUSED; */
	rc = tls_clienthello_sni(buf, len, NULL, 0, NULL);
	/*@ assert rc == 0 || rc == PC_EAGAIN || rc == PC_EPARSE || rc == PC_EINVAL ||
		   rc == PC_EREFUSED; */
	return 0;
}
