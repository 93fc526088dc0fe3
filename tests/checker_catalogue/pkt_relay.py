#!/usr/bin/env python3
# A packet socket in the gateway (issue 31): bound to IN_IF, it reads every
# frame there (ETH_P_ALL: a socket of one protocol on a bridge port gets
# nothing, the bridge takes the frame first); with OUT_IF and a next hop's MAC it is a userspace
# relay, sending each frame toward DST out of OUT_IF (what a sandbox's
# frames need to leave unjudged); without, a capture (tcpdump, dhclient).
#   pkt_relay.py IN_IF [OUT_IF NEXT_HOP_MAC DST]
import socket
import sys

ETH_P_ALL = 0x0003
rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
rx.bind((sys.argv[1], ETH_P_ALL))
tx = None
if len(sys.argv) == 5:
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    tx.bind((sys.argv[2], 0))
    hop = bytes.fromhex(sys.argv[3].replace(":", ""))
    me = open("/sys/class/net/%s/address" % sys.argv[2]).read().strip()
    me = bytes.fromhex(me.replace(":", ""))
    dst = socket.inet_aton(sys.argv[4])
print("bound", flush=True)
while True:
    frame, where = rx.recvfrom(65535)
    if (tx and where[2] != socket.PACKET_OUTGOING and frame[12:14] == b"\x08\x00"
            and frame[30:34] == dst):
        tx.send(hop + me + frame[12:])
