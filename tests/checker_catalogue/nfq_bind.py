#!/usr/bin/env python3
# Another program on the engine's queue numbers (issue 23, item 12): binds
# NFQUEUE queues over raw netlink, as `suricata -q N` would, and holds them
# until killed, leaving every queued packet without a verdict.
#   nfq_bind.py QUEUE...
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_CONFIG = 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS = 1, 2
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_PACKET = 2


def attr(t, data):
    n = 4 + len(data)
    return struct.pack("=HH", n, t) + data + b"\0" * ((4 - n % 4) % 4)


def config(sock, seq, queue, attrs):
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    hdr = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_CONFIG,
                      0x1 | 0x4, seq, 0)  # NLM_F_REQUEST | NLM_F_ACK
    sock.send(hdr + body)
    ack = sock.recv(4096)
    err = struct.unpack_from("=i", ack, 16)[0]
    if err:
        sys.exit("nfq_bind: queue %d: error %d" % (queue, err))


socks = []
for i, q in enumerate(int(a) for a in sys.argv[1:]):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    s.bind((0, 0))
    config(s, 1, q, attr(NFQA_CFG_CMD, struct.pack("=BxH", NFQNL_CFG_CMD_BIND, 0)))
    config(s, 2, q, attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0xFFFF, NFQNL_COPY_PACKET)))
    socks.append(s)
print("bound", " ".join(sys.argv[1:]), flush=True)
while True:
    time.sleep(3600)
