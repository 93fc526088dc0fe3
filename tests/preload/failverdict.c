/* Test-only, LD_PRELOADed into portcullisd by tests/faults/verdict_send.sh:
 * a refusal's verdict message on the NFQUEUE socket fails the way the
 * kernel fails it when it cannot allocate (ENOBUFS, three times, so the
 * engine's retries fail too), once each time the file PC_TEST_FAILVERDICT
 * names is written (its mtime changes). Never built into a shipped
 * binary. */
#include <dlfcn.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>

#include "nft/nft.h"

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
	       socklen_t tolen);

/* Does buf hold a verdict that refuses (NF_DROP, or the REJECT mark)? */
static int refuses(const void *buf, size_t len)
{
	const struct nlmsghdr *m = buf;
	int rest = (int)len;

	for (; mnl_nlmsg_ok(m, rest); m = mnl_nlmsg_next(m, &rest)) {
		const struct nlattr *a;
		uint32_t verdict = NF_ACCEPT, mark = 0;

		if (m->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT) &&
		    m->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT_BATCH))
			continue;
		mnl_attr_for_each(a, m, sizeof(struct nfgenmsg))
		{
			if (mnl_attr_get_type(a) == NFQA_VERDICT_HDR &&
			    mnl_attr_get_payload_len(a) >= sizeof(struct nfqnl_msg_verdict_hdr)) {
				const struct nfqnl_msg_verdict_hdr *h = mnl_attr_get_payload(a);

				verdict = ntohl(h->verdict);
			} else if (mnl_attr_get_type(a) == NFQA_MARK)
				mark = ntohl(mnl_attr_get_u32(a));
		}
		if (verdict == NF_DROP || (mark & NFT_MARK_MASK) == NFT_MARK_REJECT)
			return 1;
	}
	return 0;
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
	       socklen_t tolen)
{
	static ssize_t (*real)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	static __thread int failing;
	static struct timespec fired; /* the trigger's mtime when it last fired */
	const char *trigger = getenv("PC_TEST_FAILVERDICT");
	struct stat st;

	if (!real)
		real = (ssize_t(*)(int, const void *, size_t, int, const struct sockaddr *,
				   socklen_t))dlsym(RTLD_NEXT, "sendto");
	if (trigger && to && to->sa_family == AF_NETLINK &&
	    (failing ||
	     (stat(trigger, &st) == 0 &&
	      (st.st_mtim.tv_sec != fired.tv_sec || st.st_mtim.tv_nsec != fired.tv_nsec) &&
	      refuses(buf, len)))) {
		if (!failing)
			fired = st.st_mtim;
		if (++failing == 3)
			failing = 0;
		errno = ENOBUFS;
		return -1;
	}
	return real(fd, buf, len, flags, to, tolen);
}
