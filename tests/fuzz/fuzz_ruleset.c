/* libFuzzer target: netlink messages (as an nftables dump returns them:
 * tables, chains, rules, sets, elements, objects) screened and parsed into
 * the checker's ruleset model and walked by the path model for a synthetic
 * sandbox bridge (and by the pass-restricted walk); also the rtnetlink and tc parsers. */
#include <stdint.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#include "checker/checker_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct pc_addr resolvers[] = {
    {.family = AF_INET, .a = {198, 51, 100, 53}},
    {.family = AF_INET6, .a = {0x20, 0x01, 0x0d, 0xb8, 0, 0x53, [15] = 0x53}},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ck_state st;
	struct checker_expect ex;
	struct checker_result *res = calloc(1, sizeof(*res));
	struct ck_link *br, *p;
	void *buf = malloc(size ? size : 1);

	if (!res || !buf)
		goto out;
	memcpy(buf, data, size); /* aligned copy, as a socket buffer would be */
	memset(&st, 0, sizeof(st));
	memset(&ex, 0, sizeof(ex));
	strcpy(ex.table, "portcullis");
	ex.mark_mask = 0xff000000u;
	ex.mark_decided = 0xb0000000u;
	ex.queue_lo = 100;
	ex.queue_hi = 101;
	ex.br_nf_call = 0;
	/* the pass-restricted walk (pass.c) runs too: PASS, ALLOW|HELD, one
	 * resolver of each family */
	ex.mark_pass = 0x10000000u;
	ex.ct_exempt = 0xa0000000u;
	ex.resolvers = resolvers;
	ex.n_resolvers = 2;
	br = ck_grow(&st.links, &st.n_links, &st.cap_links, sizeof(*br));
	if (!br)
		goto out;
	br->ifindex = 3;
	strcpy(br->name, "pcbr0");
	strcpy(br->kind, "bridge");
	p = ck_grow(&st.links, &st.n_links, &st.cap_links, sizeof(*p));
	if (!p)
		goto out;
	p->ifindex = 4;
	p->master = 3;
	p->isolated = 1;
	strcpy(p->name, "pcv1");
	strcpy(p->kind, "veth");
	/* Every message type, chains and rules (with their expressions)
	 * included: ck_nft_parse screens each message (nft_screen.c) before
	 * libnftnl, which would exit() or read past a bad one, sees it. */
	(void)ck_nft_parse(&st.nft, buf, size, NULL);
	(void)ck_rtnl_parse(&st, buf, size, NULL);
	(void)ck_tc_parse(&st, buf, size, NULL);
	(void)ck_analyze(&st, &ex, "pcbr0", res, NULL);
	{
		struct pc_buf b = {0};

		ck_nft_canon(&st.nft, 0, NULL, &b);
		ck_state_canon(&st, "pcbr0", &b);
		pc_buf_free(&b);
	}
	ck_state_free(&st);
out:
	checker_result_free(res);
	free(buf);
	return 0;
}
