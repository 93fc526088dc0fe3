/* One NFQUEUE queue, one thread: receive a batch of packets (recvmmsg),
 * decide each, hand the batch's records to logd, and while logd has not
 * acknowledged them receive and decide the next batches (a window of
 * QWINDOW); a batch's verdicts go out, in order, once the acknowledgement
 * covers its last record (batched where the ids allow). A record logd did
 * not acknowledge turns its verdict into a refusal (docs/engine.md, "The
 * pipeline"). */
#include "engine/engine_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

/* Headers plus the first data bytes: a whole DNS message or TLS
 * ClientHello record (16 KiB) with room for IP/TCP options. */
#define COPY_RANGE   (16384 + 256)
#define MSG_SLOT     (COPY_RANGE + 512)
#define BATCH_MAX    64
#define LOG_FLUSH_MS 1000
#define VBUF_SIZE    (BATCH_MAX * 128 + COPY_RANGE + 1024)
/* Batches awaiting logd's acknowledgement at most: enough that the thread
 * reads while logd writes, few enough that a stalled logd holds up (and a
 * timeout refuses) a bounded number of packets. */
#define QWINDOW 4
/* The hold before a read under load (queue_gather_hold_us): its length,
 * the packets held reads must gather on average to hold again, the weight
 * of the average (the newest read counts 1/GATHER_WEIGHT), and, once the
 * holding stopped, when and for how many reads it is tried again. */
#define GATHER_HOLD_US	   100
#define GATHER_GAIN	   16
#define GATHER_WEIGHT	   8
#define GATHER_PROBE_MS	   100
#define GATHER_PROBE_HOLDS 16

/* A batch read and decided, its records handed to logd. */
struct qbatch {
	size_t n;	      /* packets */
	uint64_t want;	      /* logc_sent_total once its records were in */
	uint64_t deadline_ms; /* its records unacknowledged by then: refused */
	uint64_t now_ms;      /* when it was decided */
	struct policy *pol;   /* it was decided with */
	struct rulehits *hits;
	struct decision *dec; /* t->dec + slot * BATCH_MAX */
	struct pkt_in *pin;
	bool gates;   /* holds a held flow's judgement (window_gated) */
	uint64_t seq; /* batches read by the thread before it, and it */
};

struct qbufs {
	struct mmsghdr msgs[QWINDOW][BATCH_MAX];
	struct iovec iov[QWINDOW][BATCH_MAX];
	struct qbatch win[QWINDOW];
	unsigned head, count; /* the window: win[head], ... in arrival order */
	uint64_t gathered;    /* the want of the batch await gathered for */
	uint8_t vbuf[VBUF_SIZE];
	size_t voff;
	bool drop_pending; /* a send failed: drop every queued id up to drop_upto */
	uint32_t drop_upto;
	size_t last_read; /* packets the last read returned */
	struct qgather gather;
	uint64_t seq;	 /* batches read */
	bool short_read; /* the last read was QREAD_SHORT, begun at short_ms */
	uint64_t short_ms;
	uint32_t last_id; /* id of the last packet given a verdict */
	bool have_last;
	uint64_t last_warn_ms;
};

/* One message to the kernel, again after EINTR and a transient lack of
 * buffers (3 tries); -1 with errno. */
static int send_raw(struct qthread *t, const void *buf, size_t len)
{
	for (int tries = 0; tries < 3; tries++) {
		if (mnl_socket_sendto(t->nl, buf, len) >= 0)
			return 0;
		if (errno != EINTR && errno != ENOBUFS && errno != EAGAIN)
			break;
	}
	return -1;
}

/* Is packet id a after b (ids wrap)? */
static bool id_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/* A verdict message the kernel did not take (ENOBUFS when it cannot
 * allocate) leaves its packets queued, and a later VERDICT_BATCH, which
 * covers every queued id up to its own, would give them its verdict: a
 * refusal whose message failed passed with the next run of accepted
 * packets (tests/faults/verdict_send.sh). So a failed send becomes a
 * pending NF_DROP batch up to the highest id it held, sent before anything
 * else, and tried again once a second while no verdict goes out; while it
 * is not taken nothing else is sent (what would have been joins it).
 * Batches are emitted in arrival order, so every id still queued at or
 * below it is one whose verdict failed. */
static int send_verdicts(struct qthread *t, struct qbufs *qb)
{
	if (!qb->voff && !qb->drop_pending)
		return 0;
	if (qb->drop_pending) {
		char buf[128];
		struct nlmsghdr *v = nfq_nlmsg_put(buf, NFQNL_MSG_VERDICT_BATCH, t->num);

		nfq_nlmsg_verdict_put(v, (int)qb->drop_upto, NF_DROP);
		if (send_raw(t, buf, v->nlmsg_len) == 0)
			qb->drop_pending = false;
	}
	if (!qb->drop_pending && (!qb->voff || send_raw(t, qb->vbuf, qb->voff) == 0)) {
		qb->voff = 0;
		return 0;
	}
	pc_log(PC_LOG_ERR,
	       "queue %u: sending verdicts: %s (those packets stay queued, and are dropped "
	       "when the kernel takes a verdict again)",
	       t->num, strerror(errno));
	/* verdicts are put in id order, so last_id is the highest in vbuf */
	if (qb->voff && (!qb->drop_pending || id_after(qb->last_id, qb->drop_upto)))
		qb->drop_upto = qb->last_id;
	qb->drop_pending = true;
	qb->have_last = false;
	qb->voff = 0;
	return PC_EIO;
}

/* Drop a packet seen before the queue was fully set up. */
static void drop_early(struct mnl_socket *nl, uint16_t num, const struct nlmsghdr *nlh)
{
	struct nlattr *attr[NFQA_MAX + 1] = {0};
	char buf[256];
	struct nlmsghdr *v;

	if (nfq_nlmsg_parse(nlh, attr) < 0 || !attr[NFQA_PACKET_HDR])
		return;
	v = nfq_nlmsg_put(buf, NFQNL_MSG_VERDICT, num);
	nfq_nlmsg_verdict_put(
	    v,
	    (int)ntohl(((struct nfqnl_msg_packet_hdr *)mnl_attr_get_payload(attr[NFQA_PACKET_HDR]))
			   ->packet_id),
	    NF_DROP);
	mnl_socket_sendto(nl, v, v->nlmsg_len);
}

/* Send one config message and wait for its ack. */
static int cfg_send(struct mnl_socket *nl, uint16_t num, struct nlmsghdr *nlh, const char *what,
		    struct pc_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint32_t seq = nlh->nlmsg_seq = (uint32_t)pc_now_mono_ns();

	nlh->nlmsg_flags |= NLM_F_ACK;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return pc_err_errno(err, PC_EIO, "queue %u: %s", num, what);
	for (;;) {
		ssize_t n = recv(mnl_socket_get_fd(nl), buf, sizeof(buf), 0);
		struct nlmsghdr *m = (struct nlmsghdr *)buf;
		int len = (int)n;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return pc_err_errno(err, PC_EIO, "queue %u: %s (no answer)", num, what);
		}
		for (; mnl_nlmsg_ok(m, len); m = mnl_nlmsg_next(m, &len)) {
			if (m->nlmsg_type == NLMSG_ERROR && m->nlmsg_seq == seq) {
				const struct nlmsgerr *e = mnl_nlmsg_get_payload(m);

				if (e->error == 0)
					return 0;
				errno = -e->error;
				/* nfnetlink_queue answers EPERM when another socket
				 * owns the queue (we are root here) */
				return pc_err_errno(
				    err,
				    e->error == -EPERM || e->error == -EBUSY ? PC_EEXIST : PC_EIO,
				    "queue %u: %s%s", num, what,
				    e->error == -EPERM || e->error == -EBUSY
					? " (is another engine bound to it?)"
					: "");
			}
			if (m->nlmsg_type == ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET))
				drop_early(nl, num, m);
		}
	}
}

int queue_open(struct qthread *t, struct pc_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct timeval tv = {0, 250000};
	uint32_t maxlen = t->e->cfg.queue.maxlen;
	int one = 1, rcv, rc;

	t->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!t->nl)
		return pc_err_errno(err, PC_EIO, "queue %u: netlink socket", t->num);
	if (mnl_socket_bind(t->nl, 0, MNL_SOCKET_AUTOPID) < 0)
		return pc_err_errno(err, PC_EIO, "queue %u: netlink bind", t->num);
	t->portid = mnl_socket_get_portid(t->nl);
	/* A packet the kernel cannot deliver to us is dropped by the kernel
	 * (counted in user_dropped): ENOBUFS would tell us nothing more, so
	 * it is switched off deliberately instead of being a read error. */
	if (setsockopt(mnl_socket_get_fd(t->nl), SOL_NETLINK, NETLINK_NO_ENOBUFS, &one,
		       sizeof(one)) < 0)
		return pc_err_errno(err, PC_EIO, "queue %u: NETLINK_NO_ENOBUFS", t->num);
	/* Room for a full kernel queue of MTU-sized packets, bounded. */
	rcv = (int)(maxlen > 16384 ? 16384 * 4096 : maxlen * 4096);
	if (rcv < (1 << 20))
		rcv = 1 << 20;
	if (setsockopt(mnl_socket_get_fd(t->nl), SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0)
		setsockopt(mnl_socket_get_fd(t->nl), SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	/* The loop wakes up to notice shutdown and expire held flows. */
	setsockopt(mnl_socket_get_fd(t->nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

	/* Zeroed before each message: libmnl 1.0.4 leaves an attribute's
	 * alignment padding unwritten (the 5-byte copy parameters have 3). */
	memset(buf, 0, sizeof(buf));
	nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, t->num);
	nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND);
	rc = cfg_send(t->nl, t->num, nlh, "bind", err);
	if (rc)
		return rc;
	memset(buf, 0, sizeof(buf));
	nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, t->num);
	nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_PACKET, COPY_RANGE);
	nfq_nlmsg_cfg_put_qmaxlen(nlh, maxlen);
	/* Flags explicitly off: never FAIL_OPEN (a full queue drops), and no
	 * GSO (the kernel segments, we judge MTU-sized packets). */
	mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(0));
	mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO));
	rc = cfg_send(t->nl, t->num, nlh, "configure", err);
	if (rc)
		return rc;
	t->bufs = calloc(1, sizeof(struct qbufs));
	t->rx = malloc((size_t)QWINDOW * BATCH_MAX * MSG_SLOT);
	t->dec = calloc((size_t)QWINDOW * BATCH_MAX, sizeof(*t->dec));
	t->pin = calloc((size_t)QWINDOW * BATCH_MAX, sizeof(*t->pin));
	if (!t->bufs || !t->rx || !t->dec || !t->pin)
		return pc_err_set(err, PC_ENOMEM, "queue %u: out of memory", t->num);
	return 0;
}

void queue_close(struct qthread *t)
{
	if (t->nl)
		mnl_socket_close(t->nl); /* unbinds: the kernel drops what is still queued */
	t->nl = NULL;
	if (t->bufs)
		for (unsigned k = 0; k < QWINDOW; k++) {
			policy_unref(t->bufs->win[k].pol);
			rulehits_unref(t->bufs->win[k].hits);
		}
	free(t->bufs);
	free(t->rx);
	if (t->dec)
		for (size_t i = 0; i < (size_t)QWINDOW * BATCH_MAX; i++)
			decision_clear(&t->dec[i]);
	free(t->dec);
	free(t->pin);
	t->bufs = NULL;
	t->rx = NULL;
	t->dec = NULL;
	t->pin = NULL;
}

/* Parse one packet message into pin; false if it is not one. */
static bool parse_packet(const struct nlmsghdr *nlh, struct pkt_in *pin)
{
	struct nlattr *attr[NFQA_MAX + 1] = {0};
	const struct nfqnl_msg_packet_hdr *ph;

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET))
		return false;
	if (nfq_nlmsg_parse(nlh, attr) < 0 || !attr[NFQA_PACKET_HDR] ||
	    mnl_attr_get_payload_len(attr[NFQA_PACKET_HDR]) < sizeof(*ph))
		return false;
	memset(pin, 0, sizeof(*pin));
	ph = mnl_attr_get_payload(attr[NFQA_PACKET_HDR]);
	pin->id = ntohl(ph->packet_id);
	pin->hook = ph->hook;
	if (attr[NFQA_MARK])
		pin->mark = ntohl(mnl_attr_get_u32(attr[NFQA_MARK]));
	if (attr[NFQA_HWADDR] &&
	    mnl_attr_get_payload_len(attr[NFQA_HWADDR]) >= sizeof(struct nfqnl_msg_packet_hw)) {
		const struct nfqnl_msg_packet_hw *hw = mnl_attr_get_payload(attr[NFQA_HWADDR]);

		if (ntohs(hw->hw_addrlen) == 6) {
			pin->has_mac = true;
			memcpy(pin->mac, hw->hw_addr, 6);
		}
	}
	if (attr[NFQA_PAYLOAD]) {
		pin->data = mnl_attr_get_payload(attr[NFQA_PAYLOAD]);
		pin->len = mnl_attr_get_payload_len(attr[NFQA_PAYLOAD]);
	}
	return true;
}

/* The kernel verdict and mark for a decision. */
static void verdict_of(const struct decision *d, uint32_t *verdict, uint32_t *mark)
{
	*mark = 0;
	*verdict = NF_REPEAT; /* our chain sees the mark and acts on it */
	switch (d->v) {
	case VK_PASS:
		*mark = d->held_tls ? NFT_MARK_PASS | NFT_MARK_TLS : NFT_MARK_PASS;
		break;
	case VK_ALLOW:
		*mark = NFT_MARK_ALLOW;
		break;
	case VK_ALLOW_VAULT:
		*mark = NFT_MARK_ALLOW | NFT_MARK_VAULT;
		break;
	case VK_HELD:
		*mark = NFT_MARK_HELD;
		break;
	case VK_REJECT:
		*mark = NFT_MARK_REJECT;
		break;
	default:
		*verdict = NF_DROP;
		break;
	}
}

static void put_verdict(struct qthread *t, struct qbufs *qb, uint16_t type, uint32_t id,
			uint32_t verdict, uint32_t mark, const struct decision *d)
{
	struct nlmsghdr *nlh;
	size_t need = 128 + (d && d->new_pkt ? d->new_pkt_len : 0);

	if (VBUF_SIZE - qb->voff < need)
		send_verdicts(t, qb);
	nlh = nfq_nlmsg_put((char *)qb->vbuf + qb->voff, type, t->num);
	nfq_nlmsg_verdict_put(nlh, (int)id, (int)verdict);
	if (verdict == NF_REPEAT)
		nfq_nlmsg_verdict_put_mark(nlh, mark);
	if (d && d->new_pkt)
		nfq_nlmsg_verdict_put_pkt(nlh, d->new_pkt, (uint32_t)d->new_pkt_len);
	qb->voff += MNL_ALIGN(nlh->nlmsg_len);
}

/* Verdicts in id order; a run of equal verdicts whose ids follow the last
 * verdict without a gap becomes one VERDICT_BATCH (which covers every
 * queued id up to its own: only safe when we know them all). Batches are
 * emitted in arrival order, so the ids of a later batch of the window,
 * still awaiting its acknowledgement, are all above this one's. */
static void emit_verdicts(struct qthread *t, struct qbufs *qb, const struct qbatch *B)
{
	for (size_t i = 0; i < B->n;) {
		uint32_t v, m, v2, m2;
		size_t j = i + 1;

		verdict_of(&B->dec[i], &v, &m);
		if (!B->dec[i].new_pkt && qb->have_last && B->pin[i].id == qb->last_id + 1) {
			while (j < B->n && !B->dec[j].new_pkt &&
			       B->pin[j].id == B->pin[j - 1].id + 1) {
				verdict_of(&B->dec[j], &v2, &m2);
				if (v2 != v || m2 != m)
					break;
				j++;
			}
		}
		if (j - i > 1)
			put_verdict(t, qb, NFQNL_MSG_VERDICT_BATCH, B->pin[j - 1].id, v, m, NULL);
		else
			put_verdict(t, qb, NFQNL_MSG_VERDICT, B->pin[i].id, v, m, &B->dec[i]);
		for (size_t k = i; k < j; k++) {
			if (v == NF_DROP || m == NFT_MARK_REJECT)
				atomic_fetch_add(&t->st.refused, 1);
			else
				atomic_fetch_add(&t->st.accepted, 1);
		}
		qb->last_id = B->pin[j - 1].id;
		qb->have_last = true;
		i = j;
	}
	send_verdicts(t, qb);
}

/* No record, no connection: what logd did not take becomes a refusal. A
 * held flow or DNS-over-TCP stream whose judged bytes it concerned fails
 * with it: resent, the same bytes would otherwise pass as judged before
 * (docs/engine.md). */
static void refuse_unlogged(struct qthread *t, struct decision *d)
{
	d->learn = false; /* a DNS answer whose record is not in teaches nothing */
	if (d->held_judged) {
		struct held_flow *hf = held_get(t->held, &d->key);

		if (hf)
			hf->failed = true;
	}
	if (d->dnstcp_judged)
		dnstcp_fail(t->dnstcp, &d->dnstcp_key, pc_now_mono_ms());
	if (d->v == VK_DROP || d->v == VK_REJECT)
		return;
	/* a promotion is a reply's verdict (forward): no RST from there */
	d->v = d->rec.action == LOGREC_CONNECT && !d->promote ? VK_REJECT : VK_DROP;
	d->register_flow = false;
	free(d->new_pkt);
	d->new_pkt = NULL;
}

/* A DNS answer whose record was its query's deferred one, and that record
 * not acknowledged: the answer is dropped, but the query left long ago,
 * so its record is owed again, for the control thread to write once logd
 * takes records (docs/dnsguard.md, "One record per query"). Without it a
 * logd killed between a query and its answer lost the query's record. A
 * logd that wrote it after all (stalled, not dead) writes it twice: a
 * record twice rather than none. */
static void reowe_unlogged(struct qthread *t, struct decision *d)
{
	if (!d->has_rec || !d->ans.query_owed || d->rec.action != LOGREC_DNS_QUERY)
		return;
	d->ans.query_owed = false;
	if (dnsguard_owed_again(t->e->dg, &d->ans.query,
				"its answer was dropped: logd did not take its record") < 0)
		pc_log(PC_LOG_ERR,
		       "queue %u: DNS query record not logged (out of memory): sandbox %s asked "
		       "%s",
		       t->num, d->ans.query.sandbox, d->ans.query.qname);
}

static void log_debug(struct qthread *t, const struct decision *d)
{
	char s[64], dst[64];

	pc_endpoint_str(&d->rec.src, s, sizeof(s));
	pc_endpoint_str(&d->rec.dst, dst, sizeof(dst));
	pc_log(PC_LOG_DEBUG, "queue %u: %s %s %s -> %s proto %u sandbox %s rule %s: %s%s%s", t->num,
	       logrec_action_name(d->rec.action), logrec_verdict_name(d->rec.verdict), s, dst,
	       d->rec.transport, d->rec.sandbox ? d->rec.sandbox : "-",
	       d->rec.rule ? d->rec.rule : "-", d->rec.reason ? d->rec.reason : "",
	       d->rec.dns_name ? " name " : "", d->rec.dns_name ? d->rec.dns_name : "");
}

static struct qbatch *win_at(struct qbufs *qb, unsigned k)
{
	return &qb->win[(qb->head + k) % QWINDOW];
}

static void warn_unlogged(struct qthread *t, struct qbufs *qb, const struct pc_err *err)
{
	char buf[600];

	if (pc_now_mono_ms() - qb->last_warn_ms <= 5000)
		return;
	qb->last_warn_ms = pc_now_mono_ms();
	pc_log(PC_LOG_WARN, "queue %u: logd did not take the records (%s): refusing", t->num,
	       pc_err_str(err, buf, sizeof(buf)));
}

/* A held flow's judgement gates the window: a later segment of the flow
 * would be released as judged before on the strength of a record not yet
 * in the log, and if that record fails the flow must fail before the
 * segment is decided (docs/engine.md, "The pipeline"). */
static bool window_gated(struct qbufs *qb)
{
	for (unsigned k = 0; k < qb->count; k++)
		if (win_at(qb, k)->gates)
			return true;
	return false;
}

/* May this thread pledge in its ring? Yes while no new logd session was
 * seen since the ring was last found alive; after one, only when a poll of
 * it finds no hang-up (a syscall once per new session, not per pledge). */
static bool pledge_ring_alive(struct qthread *t, struct pc_err *err)
{
	uint64_t g = atomic_load(&t->e->logd_gen);

	if (g == t->ring_gen)
		return true;
	if (!logc_alive(t->lc)) {
		/* refused; the thread's next send makes a new ring */
		pc_err_set(err, PC_EIO, "its logd session ended (a new logd runs)");
		return false;
	}
	t->ring_gen = g;
	return true;
}

/* Read one batch into the window's next slot: decide each packet and hand
 * the records to logd. A record not handed over is refused now, before
 * the next packet is decided (a held flow it judged fails first). */
static void take_batch(struct qthread *t, struct qbufs *qb, unsigned slot, int nmsg)
{
	struct engine *e = t->e;
	struct qbatch *B = &qb->win[slot];
	const struct logrec *recs[BATCH_MAX];
	struct decision *of[BATCH_MAX];
	bool sent[BATCH_MAX], failed = false;
	struct pc_err err = {0};
	struct decide_ctx c;
	size_t n = 0, nr = 0, ok;

	/* counted before the policy is read: a reload that swapped it before
	 * this read waits for this batch (engine.c, wait_batches) */
	atomic_fetch_add(&t->begun, 1);
	B->pol = engine_policy_get(e);
	B->hits = engine_hits_get(e);
	B->now_ms = pc_now_mono_ms();
	B->dec = t->dec + (size_t)slot * BATCH_MAX;
	B->pin = t->pin + (size_t)slot * BATCH_MAX;
	B->seq = ++qb->seq;
	held_batch_begin(t->held, B->seq);
	c = (struct decide_ctx){.cfg = &e->cfg,
				.policy = B->pol,
				.dg = e->dg,
				.ports = &e->ports,
				.held = t->held,
				.now_ms = B->now_ms,
				.dns_defer = t->log_ok,
				.dnstcp = t->dnstcp};
	for (int i = 0; i < nmsg; i++) {
		struct nlmsghdr *nlh = qb->iov[slot][i].iov_base;
		int len = (int)qb->msgs[slot][i].msg_len;

		for (; mnl_nlmsg_ok(nlh, len) && n < BATCH_MAX; nlh = mnl_nlmsg_next(nlh, &len)) {
			if (!parse_packet(nlh, &B->pin[n]))
				continue;
			if (!B->pol || !B->pin[n].data)
				decision_clear(&B->dec[n]); /* VK_DROP */
			else
				decide_packet(&c, &B->pin[n], &B->dec[n]);
			n++;
		}
	}
	B->n = n;
	atomic_fetch_add(&t->st.queued, n);
	for (size_t i = 0; i < n; i++) {
		struct decision *d = &B->dec[i];

		/* published before its query is released, never waited for
		 * (docs/logd.md, "Pledges"); not handed over: the query
		 * does not leave. A ring whose logd died is read by nobody,
		 * and the control thread has pledged what was owed to the
		 * new logd already: such a pledge would be the only copy. */
		if (d->pledged &&
		    (!pledge_ring_alive(t, &err) || logc_pledge(t->lc, &d->rec, &err) < 0)) {
			atomic_fetch_add(&t->st.log_failed, 1);
			refuse_unlogged(t, d);
			failed = true;
		}
		if (!d->has_rec)
			continue;
		if (e->verbose)
			log_debug(t, d);
		of[nr] = d;
		recs[nr++] = &d->rec;
	}
	ok = nr ? logc_send_batch(t->lc, recs, nr, sent, &err) : 0;
	for (size_t k = 0; k < nr; k++) {
		if (!sent[k]) {
			atomic_fetch_add(&t->st.log_failed, 1);
			reowe_unlogged(t, of[k]);
			refuse_unlogged(t, of[k]);
			of[k]->has_rec = false; /* not sent: not waited for */
			failed = true;
		}
	}
	atomic_fetch_add(&t->st.log_sent, ok);
	B->gates = false;
	for (size_t k = 0; k < nr; k++)
		B->gates |= of[k]->held_judged && of[k]->has_rec;
	if (failed) {
		t->log_ok = false; /* DNS query records are deferred only while true */
		warn_unlogged(t, qb, &err);
	}
	/* acknowledgements are cumulative: this batch is covered once they
	 * reach what has been sent so far */
	B->want = logc_sent_total(t->lc);
	B->deadline_ms = pc_now_mono_ms() + LOG_FLUSH_MS;
}

/* The oldest batch's verdicts. acked false: the window failed, and every
 * verdict of the batch is refused, a packet without a record of its own
 * too: it was decided while records before it were unacknowledged (a
 * segment released as judged before, a DNS query deferred while logd
 * seemed well), and what those records said may not be in the log. */
static void finish_batch(struct qthread *t, struct qbufs *qb, struct qbatch *B, bool acked)
{
	struct engine *e = t->e;
	bool had = false;

	for (size_t i = 0; i < B->n; i++) {
		if (B->dec[i].has_rec) {
			had = true;
			if (!acked)
				atomic_fetch_add(&t->st.log_failed, 1);
		}
		if (!acked) {
			reowe_unlogged(t, &B->dec[i]);
			refuse_unlogged(t, &B->dec[i]);
		}
	}
	if (had && acked)
		t->log_ok = true;
	for (size_t i = 0; i < B->n; i++) {
		struct decision *d = &B->dec[i];

		/* learned only now that its record is in the log */
		if (decision_commit(e->dg, d, B->now_ms) < 0)
			refuse_unlogged(t, d);
		if (d->register_flow && flow_registry_put(e->flows, &d->key, &d->meta) < 0)
			refuse_unlogged(t, d); /* allocation failure refuses too */
		/* the verdict is final here: count it */
		metrics_count_verdict(t, d);
		rulehits_count(B->hits, d);
		if (d->quota)
			quota_stats_count(&e->quota, decision_sandbox(d), d->quota);
		if (d->given_up[0])
			quota_stats_count(&e->quota, d->given_up, d->given_up_kind);
	}
	emit_verdicts(t, qb, B);
	/* the ct mark of each promotion in B acts from here on (a verdict
	 * that did not go out leaves the flow HELD: its entry going early
	 * then refuses its later packets, fail closed) */
	held_verdicts_sent(t->held, B->seq, pc_now_mono_ms());
	for (size_t i = 0; i < B->n; i++) {
		struct pc_err err = {0};
		struct decision *d = &B->dec[i];

		if (d->send_reply && dnsreply_send(&e->dnsr, &d->reply_from, &d->reply_to, d->reply,
						   d->reply_len, &err) < 0)
			pc_log(PC_LOG_DEBUG, "queue %u: %s", t->num, err.msg);
		decision_clear(d);
	}
	rulehits_unref(B->hits);
	policy_unref(B->pol);
	B->hits = NULL;
	B->pol = NULL;
	B->n = 0;
	atomic_fetch_add(&t->done, 1);
}

/* Verdicts for the batches the acknowledgements cover, oldest first. When
 * records were lost, or the oldest batch's wait ran out, every batch of
 * the window fails: each later one was decided after it, and the
 * acknowledgement of its records would follow the missing ones. */
static void settle(struct qthread *t, struct qbufs *qb)
{
	struct pc_err err = {0};
	uint64_t acked = 0;
	bool lost;

	if (!qb->count)
		return;
	lost = logc_acked_total(t->lc, &acked, &err) < 0;
	if (!lost && acked < win_at(qb, 0)->want &&
	    pc_now_mono_ms() >= win_at(qb, 0)->deadline_ms) {
		pc_err_set(&err, PC_ETIMEOUT, "logd did not acknowledge %llu records within %d ms",
			   (unsigned long long)(logc_sent_total(t->lc) - acked), LOG_FLUSH_MS);
		logc_abandon(t->lc);
		lost = true;
	}
	while (qb->count && (lost || acked >= win_at(qb, 0)->want)) {
		finish_batch(t, qb, win_at(qb, 0), !lost);
		qb->head = (qb->head + 1) % QWINDOW;
		qb->count--;
	}
	if (lost) {
		t->log_ok = false;
		warn_unlogged(t, qb, &err);
	}
}

/* Sleep until logd acknowledges, a packet comes (when the window takes
 * one), or the oldest batch's deadline. The first sleep for a batch waits
 * for logd alone, up to GATHER_MS, before the thread reads again: the
 * packets that come meanwhile are read together once it answers, one
 * wake-up for many. Reading at once instead (and on each packet's
 * wake-up) made batches of one and cost more CPU per verdict than no
 * window at all (bench/report-notes.md). A logd slower than that
 * (stalled, or a loaded machine) no longer holds up the reading. */
#define GATHER_MS 1
static void await(struct qthread *t, struct qbufs *qb, bool can_read)
{
	const struct qbatch *B = win_at(qb, 0);
	uint64_t now = pc_now_mono_ms();
	int ms = B->deadline_ms > now ? (int)(B->deadline_ms - now) : 0;
	struct pc_err err = {0};

	if (ms > 250)
		ms = 250; /* shutdown and held flows' expiry are looked at */
	if (can_read && qb->gathered != B->want) {
		qb->gathered = B->want;
		if (ms > GATHER_MS)
			ms = GATHER_MS;
		can_read = false;
	}
	logc_wait_acked(t->lc, B->want, can_read ? mnl_socket_get_fd(t->nl) : -1, ms, NULL, &err);
}

/* Packets per held read, averaged; GATHER_GAIN before the first. */
static unsigned gather_avg(const struct qgather *g)
{
	return g->primed ? g->avgw / GATHER_WEIGHT : GATHER_GAIN;
}

/* Each read pays a wake-up of the thread, a verdict message, and the
 * record round trip's bell and wake-up of logd and back, and each verdict
 * message re-injects its packets into sockets whose readers slept since the
 * last one: all per batch, not per packet. Under load those batches were a
 * few packets (about 5 per read through the DNS bench, bench/nullq's 4), so
 * per packet the thread paid them almost whole. After a read of two or
 * more packets that did not fill a batch (more came while the last was
 * decided: the queue is busy, but not faster than the thread), the thread
 * holds its next read GATHER_HOLD_US and reads what came meanwhile in one
 * batch. A lone packet (a SYN on a quiet guard) does not start a hold, and
 * a full batch (more are queued) is read on at once.
 *
 * A hold pays only when many packets arrive during it: through the DNS
 * bench (hundreds of queries outstanding) a held read gathered 35-52
 * packets; through 16 TLS handshakes in flight, 12, each handshake's next
 * packet waiting for the verdict on its last, so every hold added its
 * length (and the timer's slack) to each of a held flow's four queued
 * packets and cost a timer wake-up, while saving few reads: 35 % fewer
 * host-entry flows per second, no less CPU per flow. So when held reads
 * gather fewer than GATHER_GAIN packets on average the holding stops, and
 * is tried again GATHER_PROBE_MS later for GATHER_PROBE_HOLDS reads before
 * the average is judged: the large reads are a state the holding itself
 * brings about (packets pile up while the thread holds and awaits logd),
 * and one hold after a spell without gathers only what came in its 100 µs.
 * The threshold sits between the two loads, and the average moves slowly:
 * at 24 with a quarter weight the DNS load fell out of holding in some
 * rounds (bench/report-notes.md, "The hold only while it pays"). The
 * added latency is at most GATHER_HOLD_US, and only under load that fills
 * the holds. */
unsigned queue_gather_hold_us(struct qgather *g, size_t last, uint64_t now_ms)
{
	g->held = false;
	if (last < 2 || last >= BATCH_MAX)
		return 0;
	if (!g->probe_left && gather_avg(g) < GATHER_GAIN) {
		if (now_ms < g->probe_ms)
			return 0;
		g->probe_left = GATHER_PROBE_HOLDS;
	}
	g->held = true;
	return GATHER_HOLD_US;
}

void queue_gather_note(struct qgather *g, int n, uint64_t now_ms)
{
	unsigned got = n > 0 ? (unsigned)n : 0;

	if (!g->held)
		return;
	g->held = false;
	/* a moving average (an eighth the new read), so that a few small
	 * reads among large ones do not stop the holding */
	g->avgw = gather_avg(g) * (GATHER_WEIGHT - 1) + got;
	g->primed = true;
	if (g->probe_left && --g->probe_left)
		return;
	if (gather_avg(g) < GATHER_GAIN)
		g->probe_ms = now_ms + GATHER_PROBE_MS;
}

enum qread queue_read_kind(int n, int err)
{
	if (n >= BATCH_MAX)
		return QREAD_FULL;
	if (n > 0)
		return QREAD_SHORT;
	if (n == 0 || err == EAGAIN || err == EWOULDBLOCK)
		return QREAD_EMPTY;
	return err == ENOBUFS ? QREAD_OVERFLOW : QREAD_NOTHING;
}

/* A promoted entry is kept for the flow's packets queued before its
 * promoting verdict set the ct mark; once a read begun after that (and
 * HELD_DRAIN_MIN_MS) found the socket empty, all of them were read and
 * decided, so the entry goes then instead of at HELD_GRACE_MS (docs/
 * engine.md, "Held flows"). recvmmsg ends a short read at an empty queue
 * or at an overflow it reports on the next read, so a short read counts
 * only once the next read reported none. */
static void note_read(struct qthread *t, struct qbufs *qb, uint64_t start_ms, int n, int err)
{
	/* what the next hold is sized by: a read that found nothing (a
	 * timeout on a quiet queue) starts none */
	qb->last_read = n > 0 ? (size_t)n : 0;
	switch (queue_read_kind(n, err)) {
	case QREAD_EMPTY:
		held_drained(t->held, start_ms);
		qb->short_read = false;
		break;
	case QREAD_SHORT:
	case QREAD_FULL:
		if (qb->short_read)
			held_drained(t->held, qb->short_ms);
		qb->short_read = n < BATCH_MAX;
		qb->short_ms = start_ms;
		break;
	case QREAD_OVERFLOW:
		qb->short_read = false;
		break;
	case QREAD_NOTHING:
		break;
	}
}

static void gather_hold(struct qbufs *qb)
{
	unsigned us = queue_gather_hold_us(&qb->gather, qb->last_read, pc_now_mono_ms());
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)us * 1000};

	/* not a wait for an event: the packets that come meanwhile do not
	 * end it, which is the point (EINTR: read early, harmless) */
	if (us)
		nanosleep(&ts, NULL);
}

void *queue_thread_main(void *arg)
{
	struct qthread *t = arg;
	struct qbufs *qb = t->bufs;
	uint64_t next_gc = 0;

	for (int k = 0; k < QWINDOW; k++)
		for (int i = 0; i < BATCH_MAX; i++) {
			qb->iov[k][i].iov_base =
			    t->rx + ((size_t)k * BATCH_MAX + (size_t)i) * MSG_SLOT;
			qb->iov[k][i].iov_len = MSG_SLOT;
			memset(&qb->msgs[k][i], 0, sizeof(qb->msgs[k][i]));
			qb->msgs[k][i].msg_hdr.msg_iov = &qb->iov[k][i];
			qb->msgs[k][i].msg_hdr.msg_iovlen = 1;
		}
	while (!atomic_load(&t->e->stop)) {
		int fd = mnl_socket_get_fd(t->nl), n = -1;
		unsigned slot;
		bool can_read;
		uint64_t now;

		settle(t, qb);
		slot = (qb->head + qb->count) % QWINDOW;
		can_read = qb->count < QWINDOW && !window_gated(qb);
		if (qb->count == 0) { /* waits up to SO_RCVTIMEO */
			gather_hold(qb);
			now = pc_now_mono_ms();
			n = recvmmsg(fd, qb->msgs[slot], BATCH_MAX, MSG_WAITFORONE, NULL);
			queue_gather_note(&qb->gather, n, now);
			note_read(t, qb, now, n, errno);
		} else if (can_read && qb->gathered == win_at(qb, 0)->want) {
			/* logd is slow: read on, never a sleep while packets wait */
			now = pc_now_mono_ms();
			n = recvmmsg(fd, qb->msgs[slot], BATCH_MAX, MSG_DONTWAIT, NULL);
			note_read(t, qb, now, n, errno);
		} else
			errno = EAGAIN;
		if (n > 0) {
			take_batch(t, qb, slot, n);
			qb->count++;
		} else if (n < 0 && errno == ENOBUFS) {
			atomic_fetch_add(&t->st.enobufs, 1);
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			if (qb->count)
				await(t, qb, can_read);
		} else if (n < 0) {
			pc_log(PC_LOG_ERR, "queue %u: receive: %s", t->num, strerror(errno));
			usleep(10000);
		}
		now = pc_now_mono_ms();
		if (now >= next_gc) {
			held_expire(t->held, now);
			next_gc = now + 1000;
			/* a failed send's drop, again, without waiting for a
			 * packet to carry it: its packets hold queue places */
			if (qb->drop_pending)
				(void)send_verdicts(t, qb);
		}
		atomic_store(&t->held_n, held_count(t->held));
	}
	return NULL;
}

int queue_kernel_stats(int proc_fd, uint16_t num, uint64_t *queue_dropped, uint64_t *user_dropped)
{
	unsigned q, portid, total, mode, range;
	unsigned long long qd, ud, seq;
	char buf[8192], *line, *save = NULL;
	ssize_t n;

	/* Opened before the privilege drop: a non-dumpable process may not
	 * open its own /proc/self/net files afterwards. */
	if (proc_fd < 0)
		return PC_EIO;
	n = pread(proc_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return PC_EIO;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "%u %u %u %u %u %llu %llu %llu", &q, &portid, &total, &mode,
			   &range, &qd, &ud, &seq) == 8 &&
		    q == num) {
			*queue_dropped = qd;
			*user_dropped = ud;
			return 0;
		}
	}
	return PC_ENOENT;
}
