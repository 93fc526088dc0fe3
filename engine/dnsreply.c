/* Synthesized DNS answers for refused UDP queries: sent on raw IP sockets
 * opened (and marked NFT_MARK_DNSREPLY) while still root, from the address
 * the sandbox asked, so its resolver library accepts the REFUSED at once.
 * Our output chains let exactly this mark through to the bridge. */
#include "engine/engine_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef IPV6_HDRINCL
#define IPV6_HDRINCL 36
#endif

int dnsreply_open(struct dnsreply *d, struct pc_err *err)
{
	uint32_t mark = NFT_MARK_DNSREPLY;
	int one = 1;

	d->fd4 = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW); /* implies IP_HDRINCL */
	if (d->fd4 < 0)
		return pc_err_errno(err, PC_EPERM, "raw IPv4 socket");
	d->fd6 = socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	if (d->fd6 < 0) {
		close(d->fd4);
		d->fd4 = -1;
		return pc_err_errno(err, PC_EPERM, "raw IPv6 socket");
	}
	if (setsockopt(d->fd4, SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) < 0 ||
	    setsockopt(d->fd6, SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) < 0 ||
	    setsockopt(d->fd6, IPPROTO_IPV6, IPV6_HDRINCL, &one, sizeof(one)) < 0) {
		pc_err_errno(err, PC_EPERM, "marking the raw sockets");
		dnsreply_close(d);
		return PC_EPERM;
	}
	/* Never read: an unbound IPPROTO_RAW socket receives nothing anyway;
	 * a zero receive buffer makes sure of it. */
	one = 0;
	setsockopt(d->fd4, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
	setsockopt(d->fd6, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
	return 0;
}

void dnsreply_close(struct dnsreply *d)
{
	if (d->fd4 >= 0)
		close(d->fd4);
	if (d->fd6 >= 0)
		close(d->fd6);
	d->fd4 = d->fd6 = -1;
}

int dnsreply_send(struct dnsreply *d, const struct pc_endpoint *from, const struct pc_endpoint *to,
		  const uint8_t *msg, size_t len, struct pc_err *err)
{
	uint8_t pkt[40 + 8 + DNSG_REPLY_MAX];
	int n = pkt_build_udp(from, to, msg, len, pkt, sizeof(pkt));
	ssize_t w;

	if (n < 0)
		return pc_err_set(err, PC_EINVAL, "DNS answer does not fit (%zu bytes)", len);
	if (to->addr.family == AF_INET) {
		struct sockaddr_in sin = {.sin_family = AF_INET};

		memcpy(&sin.sin_addr, to->addr.a, 4);
		w = sendto(d->fd4, pkt, (size_t)n, 0, (struct sockaddr *)&sin, sizeof(sin));
	} else {
		struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};

		memcpy(&sin6.sin6_addr, to->addr.a, 16);
		w = sendto(d->fd6, pkt, (size_t)n, 0, (struct sockaddr *)&sin6, sizeof(sin6));
	}
	if (w != n)
		return pc_err_errno(err, PC_EIO, "sending the DNS answer");
	return 0;
}
