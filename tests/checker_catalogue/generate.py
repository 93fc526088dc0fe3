#!/usr/bin/env python3
# The checker's configuration generator (issue 31, deliverable 4): composes
# gateway configurations from a grammar — nftables chains of every family,
# hook and priority; xt targets through iptables-nft; policy rules and
# routes in every table with every selector; links of the kinds this kernel
# builds, in the gateway's namespace or another; tc filters and actions;
# sysctls; bridge port flags — as shell fragments that
# tests/integration/checker_generated.sh applies to a running gateway.
#
#   generate.py probes                     capability probes: "CAP<TAB>command"
#                                     lines, run in a scratch namespace
#   generate.py sysctls                    the sysctl keys the grammar may write
#   generate.py config --caps F --seed S --index I [--keep 0,2,k]
#                                     one configuration as shell (gen_* vars
#                                     and functions); --keep: only those atoms
#                                     (k: the engine-killed mode) — shrinking
#   generate.py entry ... --baseline F     the same as a tests/checker_catalogue
#                                     entry, ready to paste
#
# A configuration is a list of atoms, each one object of the kernel with
# its apply and revert commands (gw: the gateway's namespace, ox: the other
# namespace, sb 1: sandbox 1), plus a mode: the engine left running, or
# killed with the ruleset flushed after the check (what the routing half of
# the proof claims to survive). Values are drawn with a bias toward what
# matters to containment (the engine's mark bits, the sandbox bridge and
# its ports as parents, the probes' destinations) so that a bounded run
# meets the dangerous corners, and the same seed always gives the same run.
import argparse
import random
import sys

X4NET = "203.0.113.64/26"  # the probes' IPv4 destinations (runner: X4 = .77, hops .80+)
X6NET = "2001:db8:77::/64"
UP4, UP6 = "192.0.2.2", "2001:db8:ff::2"
MARKS = ["0x80000000", "0x80000000", "0x80000000", "0x20000000", "0x10000000", "0x40000000", "0x00000100"]
PORTS = ["pcv1", "pcv2"]

PROBES = [
    ("link:veth", "ip link add ckp0 type veth peer name ckp1"),
    ("link:macvlan", "ip link add link br0 name ckp0 type macvlan mode bridge"),
    ("link:macvtap", "ip link add link br0 name ckp0 type macvtap mode bridge"),
    ("link:ipvlan", "ip link add link br0 name ckp0 type ipvlan mode l2"),
    ("link:vlan", "ip link add link br0 name ckp0 type vlan id 5"),
    ("link:vxlan", "ip link add ckp0 type vxlan id 5 dstport 4789 local 192.0.2.1 remote 192.0.2.2"),
    ("link:gretap", "ip link add ckp0 type gretap local 192.0.2.1 remote 192.0.2.2"),
    ("link:tap", "ip tuntap add ckp0 mode tap"),
    ("link:ifb", "ip link add ckp0 type ifb"),
    ("link:bridge", "ip link add ckp0 type bridge"),
    ("xt:MARK", "iptables-nft -t mangle -A PREROUTING -j MARK --set-mark 1"),
    ("xt:CONNMARK", "iptables-nft -t mangle -A PREROUTING -j CONNMARK --save-mark"),
    ("xt:HMARK", "iptables-nft -t mangle -A PREROUTING -j HMARK --hmark-tuple src --hmark-mod 1 --hmark-offset 1 --hmark-rnd 1"),
    ("xt:TEE", "iptables-nft -t mangle -A PREROUTING -j TEE --gateway 192.0.2.2"),
    ("xt:NFQUEUE", "iptables-nft -t mangle -A PREROUTING -j NFQUEUE --queue-num 7"),
    ("xt:CT", "iptables-nft -t raw -A PREROUTING -j CT --notrack"),
    ("xt:DSCP", "iptables-nft -t mangle -A PREROUTING -j DSCP --set-dscp 1"),
    ("xt:TPROXY", "iptables-nft -t mangle -A PREROUTING -p tcp -j TPROXY --on-port 1 --tproxy-mark 1"),
    ("xt:DNAT", "iptables-nft -t nat -A PREROUTING -p tcp -j DNAT --to-destination 192.0.2.2"),
    ("xt:NFLOG", "iptables-nft -t mangle -A PREROUTING -j NFLOG"),
    ("tc:mirred", "tc qdisc add dev br0 clsact && tc filter add dev br0 ingress protocol all u32 match u32 0 0 action mirred egress mirror dev br0"),
    ("tc:pedit", "tc qdisc add dev br0 clsact; tc filter add dev br0 ingress protocol ip u32 match u32 0 0 action pedit ex munge ip dst set 192.0.2.2"),
    ("tc:skbedit", "tc qdisc add dev br0 clsact; tc filter add dev br0 ingress protocol all u32 match u32 0 0 action skbedit mark 1"),
    ("tc:gact", "tc qdisc add dev br0 clsact; tc filter add dev br0 ingress protocol all u32 match u32 0 0 action gact pass"),
    ("tc:matchall", "tc qdisc add dev br0 clsact; tc filter add dev br0 ingress protocol all matchall action mirred egress mirror dev br0"),
    ("qdisc:htb", "tc qdisc add dev br0 root handle 1: htb"),
    ("block:shared", "tc qdisc add dev br0 ingress_block 9 clsact"),
    ("cls:bpf", "tc qdisc add dev br0 clsact; tc filter add dev br0 ingress protocol all bpf bytecode '1,6 0 0 4294967295'"),
]

SYSCTLS = [
    "net.ipv4.conf.all.forwarding", "net.ipv4.conf.pcbr0.forwarding", "net.ipv4.conf.up0.forwarding",
    "net.ipv4.conf.all.rp_filter", "net.ipv4.conf.pcbr0.rp_filter",
    "net.ipv4.conf.pcbr0.proxy_arp", "net.ipv4.conf.pcv1.proxy_arp",
    "net.ipv4.conf.all.accept_local", "net.ipv4.conf.pcbr0.accept_local",
    "net.ipv4.conf.pcbr0.route_localnet",
    "net.ipv4.conf.all.accept_source_route", "net.ipv4.conf.pcbr0.accept_source_route",
    "net.ipv6.conf.all.forwarding", "net.ipv6.conf.pcbr0.forwarding",
    "net.ipv6.conf.pcbr0.accept_ra", "net.ipv6.conf.all.accept_source_route",
    "net.ipv6.conf.pcv1.disable_ipv6", "net.ipv6.conf.pcbr0.disable_ipv6",
    "net.mpls.conf.pcbr0.input",  # only where the kernel routes MPLS
]
SYSCTL_VALUES = {"rp_filter": ["0", "1", "2"], "accept_ra": ["0", "1", "2"],
                 "accept_source_route": ["0", "1"]}


class Atom:
    def __init__(self, kind, desc, apply, revert=(), hops4=(), hops6=(), other=False, name=""):
        self.kind, self.desc, self.name = kind, desc, name
        self.apply, self.revert = list(apply), list(revert)
        self.hops4, self.hops6, self.other = list(hops4), list(hops6), other
        self.vx = []  # "MAC:VNI" of a VXLAN device: the battery tunnels to it


class Gen:
    def __init__(self, caps, seed, index):
        self.r = random.Random("%s:%s" % (seed, index))
        self.caps = caps
        self.n = 0
        self.hop = 0

    def pick(self, *opts):
        return self.r.choice(opts)

    def chance(self, p):
        return self.r.random() < p

    def new_hop(self):
        self.hop += 1
        return self.hop

    # -- nftables -------------------------------------------------------
    def nft(self):
        fam = self.pick("ip", "ip6", "inet", "inet", "bridge", "netdev", "arp")
        hooks = {"ip": ["prerouting", "input", "forward", "output", "postrouting"],
                 "bridge": ["prerouting", "input", "forward", "output", "postrouting"],
                 "netdev": ["ingress", "ingress", "egress"], "arp": ["input", "output"]}
        hooks["ip6"] = hooks["ip"]
        hooks["inet"] = hooks["ip"] + ["ingress"]
        hook = self.pick(*hooks[fam])
        prio = self.pick(-400, -300, -200, -150, -100, -1, 0, 10, 100, 300)
        dev = ""
        if hook in ("ingress", "egress"):
            dev = ' device "%s"' % self.pick("pcv1", "pcbr0", "up0")
        ctype = "filter"
        matches = []
        for m in self.r.sample([
                'iifname "up0"', 'iifname "pcbr0"', 'iifname "pcv1"', "meta l4proto tcp",
                "tcp sport 443", "tcp dport 443", "ct state established", "ct direction reply",
                "meta mark 0", "udp dport 5353"], self.pick(0, 0, 1, 1, 2)):
            if hook in ("output", "postrouting", "egress") and m.startswith("iifname"):
                continue
            matches.append(m)
        stmts = [("meta mark set %s" % self.pick(*MARKS)), ("meta mark set mark or %s" % self.pick(*MARKS)),
                 ("ct mark set %s" % self.pick(*MARKS)), "meta mark set ct mark",
                 "meta mark set ct mark and 0x0000ff00", "ct mark set meta mark", "counter", "accept",
                 "drop", "meta pkttype set host", "queue num 7", "queue num 100 bypass", "log",
                 "meta priority set 1:1"]
        if fam == "netdev":
            stmts += ['dup to "up0"', 'fwd to "up0"', 'dup to "up0"']
        elif fam in ("ip", "inet") and hook != "ingress":
            stmts += ["dup to %s device \"up0\"" % UP4]
        if fam in ("ip", "ip6", "inet") and hook in ("prerouting", "output") and prio in (-400, -300, -200):
            stmts.append("notrack")
        if fam in ("ip", "inet") and hook in ("prerouting", "output", "input", "postrouting") and self.chance(0.2):
            ctype = "nat"
            stmts = ["redirect to :8443", "dnat to %s" % UP4, "masquerade", "accept"] if fam == "ip" else \
                ["redirect to :8443", "dnat ip to %s" % UP4, "accept"]
            if hook in ("input", "postrouting"):
                stmts = ["masquerade", "accept"] if hook == "postrouting" else ["accept"]
        stmt = self.pick(*stmts)
        self.n += 1
        t = "ckg%d" % self.n
        rule = " ".join(matches + [stmt])
        body = "type %s hook %s%s priority %d; %s" % (ctype, hook, dev, prio, rule)
        return Atom("nft", "nft %s %s: %s" % (fam, t, body),
                    ["gw nft add table %s %s" % (fam, t),
                     "gw nft 'add chain %s %s c { %s; }'" % (fam, t, "type %s hook %s%s priority %d" % (ctype, hook, dev, prio)),
                     "gw nft add rule %s %s c %s" % (fam, t, rule)],
                    ["gw nft delete table %s %s" % (fam, t)], name="table %s %s" % (fam, t))

    # -- xt targets through iptables-nft ----------------------------------
    def xt(self):
        six = self.chance(0.25)
        cmd = "ip6tables-nft" if six else "iptables-nft"
        targets = [c.split(":", 1)[1] for c in self.caps if c.startswith("xt:")]
        if not targets:
            return None
        # the mark writers weigh more: they are the class the model must close
        tgt = self.pick(*(targets + [t for t in targets if t in ("MARK", "CONNMARK", "HMARK")] * 2))
        table, chains = "mangle", ["PREROUTING"] * 4 + ["FORWARD", "INPUT", "OUTPUT", "POSTROUTING"]
        extra = ""
        val = self.pick(*MARKS)
        if tgt == "MARK":
            arg = self.pick("--set-mark %s" % val, "--set-xmark %s/0xff000000" % val, "--or-mark %s" % val,
                            "--set-mark 0x1")
        elif tgt == "CONNMARK":
            arg = self.pick("--set-mark %s" % val, "--save-mark", "--restore-mark",
                            "--save-mark --mask 0x0000ff00", "--restore-mark --mask 0x0000ff00",
                            "--save-mark --left-shift-mark 31", "--restore-mark --left-shift-mark 31")
        elif tgt == "HMARK":
            tup = "src" if self.chance(0.7) else "src,dst,sport,dport,proto"
            arg = "--hmark-tuple %s --hmark-mod 1 --hmark-offset %s --hmark-rnd 1" % (tup, val)
        elif tgt == "TEE":
            arg = "--gateway %s" % (UP6 if six else UP4)
        elif tgt == "NFQUEUE":
            arg = self.pick("--queue-num 7", "--queue-num 100 --queue-bypass", "--queue-num 7 --queue-bypass")
        elif tgt == "CT":
            table, chains, arg = "raw", ["PREROUTING", "OUTPUT"], self.pick("--notrack", "--zone 5")
        elif tgt == "DSCP":
            arg = "--set-dscp 1"
        elif tgt == "TPROXY":
            chains, extra = ["PREROUTING"], "-p tcp "
            arg = "--on-port 8443 --tproxy-mark %s" % val
        elif tgt == "DNAT":
            table, chains, extra = "nat", ["PREROUTING", "OUTPUT"], "-p tcp "
            arg = "--to-destination %s" % ("[%s]" % UP6 if six else UP4)
        else:
            arg = ""
        chain = self.pick(*chains)
        m = ""
        if chain in ("PREROUTING", "FORWARD", "INPUT"):
            m = self.pick("-i up0 ", "-i up0 ", "-i up0 ", "-i pcbr0 ", "-i pcv1 ", "")
        if not extra and self.chance(0.4):
            m += self.pick("-p tcp --sport 443 ", "-p tcp --dport 443 ", "-m conntrack --ctstate ESTABLISHED ")
        line = "%s -t %s -A %s %s%s-j %s %s" % (cmd, table, chain, m, extra, tgt, arg)
        return Atom("xt", line.strip(), ["gw " + line.strip()], ["gw " + line.strip().replace(" -A ", " -D ", 1)],
                    name="table ip6? %s chain %s" % (table, chain))

    # -- policy rules -----------------------------------------------------
    def rule(self):
        v = self.pick("4", "4", "6")
        pref = self.pick(50, 500, 999, 1001, 1005, 1011, 5000)
        sels = {"4": ["iif pcbr0", "iif pcbr0", "not iif lo", "from 10.203.0.0/24", "to 203.0.113.0/24", "tos 0x10",
                      "fwmark 0x80000000/0x80000000", "fwmark 0x1/0x1", "oif up0", "uidrange 0-0",
                      "ipproto tcp", "dport 80", "sport 1024-65535"],
                "6": ["iif pcbr0", "iif pcbr0", "not iif lo", "from fd00:203::/64", "to 2001:db8:77::/64",
                      "fwmark 0x80000000/0x80000000", "oif up0", "ipproto tcp", "dport 443"]}[v]
        sel = " ".join(self.r.sample(sels, self.pick(0, 1, 1, 2)))
        act = self.pick("lookup main", "lookup local", "lookup 100", "lookup 100", "lookup 28771", "lookup default",
                        "blackhole", "unreachable", "prohibit")
        spec = "pref %d %s %s" % (pref, sel, act)
        spec = " ".join(spec.split())
        return Atom("rule", "ip -%s rule add %s" % (v, spec), ["gw ip -%s rule add %s" % (v, spec)],
                    ["gw ip -%s rule del %s" % (v, spec)], name="rule %d" % pref)

    # -- routes in every table ----------------------------------------------
    def route(self):
        v = self.pick("4", "4", "6")
        table = self.pick("main", "local", "local", "100", "28771", "default")
        if table == "28771" and self.chance(0.3):
            # the blackhole default replaced by one that a selector narrows
            new = "blackhole default tos 0x10" if v == "4" else "blackhole ::/0 from 2001:db8::/32"
            old = "blackhole default" if v == "4" else "blackhole ::/0"
            return Atom("route", "ip -%s route: table 28771's %s replaced by %s" % (v, old, new),
                        ["gw ip -%s route del %s table 28771" % (v, old),
                         "gw ip -%s route add %s table 28771" % (v, new)],
                        ["gw ip -%s route del %s table 28771" % (v, new),
                         "gw ip -%s route add %s table 28771 2>/dev/null || true" % (v, old)], name="28771")
        if v == "4":
            dst = self.pick("default", "203.0.113.0/24", X4NET, X4NET, "0.0.0.0/1", "128.0.0.0/1")
        else:
            dst = self.pick("default", "2001:db8::/32", X6NET, X6NET, "::/1", "8000::/1")
        typ = self.pick("unicast", "unicast", "unicast", "blackhole", "unreachable", "prohibit", "throw")
        spec = ("%s via %s dev up0" % (dst, UP4 if v == "4" else UP6)) if typ == "unicast" else "%s %s" % (typ, dst)
        if v == "4" and self.chance(0.15):
            spec += " tos 0x10"
        if v == "6" and self.chance(0.15):
            spec += " from 2001:db8::/32"
        if self.chance(0.15):
            spec += " metric 5"
        spec += " table %s" % table
        # (in table 28771 a default replaces the engine's blackhole one)
        op = "replace" if table == "28771" and dst in ("default",) else "add"
        return Atom("route", "ip -%s route %s %s" % (v, op, spec), ["gw ip -%s route %s %s" % (v, op, spec)],
                    ["gw ip -%s route del %s" % (v, spec)], name="%s|table %s" % (dst, table))

    # -- links ------------------------------------------------------------
    def link(self):
        kinds = [c.split(":", 1)[1] for c in self.caps if c.startswith("link:")]
        if not kinds:
            return None
        stacked = [k for k in ("macvlan", "macvtap", "ipvlan", "vlan") if k in kinds]
        kind = self.pick(*(kinds + stacked * 2))
        self.n += 1
        name = "ck%s%d" % (kind[:2], self.n)
        ap, rv = [], ["gw ip link del %s 2>/dev/null || true" % name]
        other = self.chance(0.5)
        desc = kind
        if kind in ("macvlan", "macvtap", "ipvlan", "vlan"):
            parent = self.pick("pcbr0", "pcbr0", "pcbr0", "pcv1", "up0")
            mode = {"macvlan": self.pick("bridge", "private", "vepa", "passthru"),
                    "macvtap": self.pick("bridge", "private", "vepa"), "ipvlan": self.pick("l2", "l3"),
                    "vlan": ""}[kind]
            spec = {"vlan": "id 42"}.get(kind, "mode %s" % mode)
            ap.append("gw ip link add link %s name %s type %s %s" % (parent, name, kind, spec))
            desc = "%s %s (%s) on %s" % (kind, name, spec, parent)
        elif kind == "veth":
            peer = "%sp" % name
            ap.append("gw ip link add %s type veth peer name %s" % (name, peer))
            if self.chance(0.5):
                fl = self.pick("on", "off")
                ap += ["gw ip link set %s master pcbr0" % peer,
                       "gw ip link set %s type bridge_slave isolated %s" % (peer, fl), "gw ip link set %s up" % peer]
                desc = "veth %s, its peer %s a port of pcbr0 (isolated %s)" % (name, peer, fl)
            else:
                ap.append("gw ip link set %s up" % peer)
                desc = "veth %s (peer %s)" % (name, peer)
        elif kind in ("vxlan", "gretap"):
            spec = {"vxlan": "id %d dstport 4789 local 192.0.2.1 remote %s" % (self.n, UP4),
                    "gretap": "local 192.0.2.1 remote %s" % UP4}[kind]
            # a MAC of its own, as a configuration may set it: the battery
            # sends it tunnelled frames (a sandbox cannot learn a random one)
            mac = "02:00:00:00:77:%02x" % self.n
            ap.append("gw ip link add %s address %s type %s %s" % (name, mac, kind, spec))
            other = False
            if self.chance(0.5):
                ap.append("gw ip link set %s master pcbr0" % name)
                desc = "%s %s (%s), a port of pcbr0" % (kind, name, spec)
            else:
                desc = "%s %s (%s)" % (kind, name, spec)
        elif kind == "tap":
            ap.append("gw ip tuntap add %s mode tap" % name)
            other = False
            if self.chance(0.5):
                ap.append("gw ip link set %s master pcbr0" % name)
                desc = "tap %s, a port of pcbr0" % name
            else:
                desc = "tap %s" % name
        elif kind == "bridge":
            # a second bridge of the gateway (libvirt's, docker0), a sandbox
            # port moved onto it or not
            ap.append("gw ip link add %s type bridge" % name)
            other = False
            desc = "bridge %s" % name
            if self.chance(0.3):
                p = self.pick(*PORTS)
                ap.append("gw ip link set %s master %s" % (p, name))
                rv.insert(0, "gw ip link set %s master pcbr0" % p)
                desc += " with sandbox port %s moved onto it" % p
        else:  # ifb and the rest: a plain device
            ap.append("gw ip link add %s type %s" % (name, kind))
            other = False
            desc = "%s %s" % (kind, name)
        ns = "gw"
        if other:
            ap.append('gw ip link set %s netns "$LAB_ID-ckx"' % name)
            ns = "ox"
            desc += ", moved to another namespace"
            rv = []
        h4, h6 = [], []
        if self.chance(0.85):
            h = self.new_hop()
            ap.append("%s ip addr add 10.99.%d.1/24 dev %s" % (ns, h, name))
            h4.append(h)
            desc += " with 10.99.%d.1/24" % h
            if self.chance(0.5):
                ap.append("%s ip -6 addr add fd00:99:%d::1/64 dev %s nodad" % (ns, h, name))
                h6.append(h)
                desc += " and fd00:99:%d::1/64" % h
        ap.append("%s ip link set %s up" % (ns, name))
        a = Atom("link", desc, ap, rv, h4, h6, other, name=name)
        if kind == "vxlan":
            a.vx = ["02:00:00:00:77:%02x/%d/%d" % (self.n, self.n, h4[0] if h4 else self.n)]
        return a

    # -- tc ---------------------------------------------------------------
    def tc(self):
        acts = [c.split(":", 1)[1] for c in self.caps if c.startswith("tc:")]
        if not acts:
            return None
        dev = self.pick("pcv1", "pcbr0", "up0")
        d = self.pick("ingress", "egress")
        act = self.pick(*acts)
        tgt = self.pick("up0", "pcbr0", "pcv1")
        a = {"mirred": "mirred egress %s dev %s" % (self.pick("redirect", "mirror"), tgt),
             "pedit": "pedit ex munge ip dst set %s" % UP4, "skbedit": "skbedit mark %s" % self.pick(*MARKS),
             "gact": "gact pass", "matchall": "mirred egress mirror dev %s" % tgt}[act]
        cls = "matchall" if act == "matchall" else "u32 match u32 0 0"
        proto = "ip" if act == "pedit" else "all"
        if d == "egress" and "qdisc:htb" in self.caps and self.chance(0.5):
            # On an inner class of an HTB root: a block of its own, which
            # a dump of the qdisc's filters does not list (u32 excepted:
            # its hash tables are the qdisc's), reached through a root
            # filter that only classifies. IPv4 only: ARP still flows.
            if act != "matchall" and "cls:bpf" in self.caps and self.chance(0.7):
                cls = "bpf bytecode '1,6 0 0 4294967295'"
            return Atom("tc", "HTB on %s egress, on inner class 1:10: %s action %s" % (dev, cls, a),
                        ["gw tc qdisc add dev %s root handle 1: htb default 20" % dev,
                         "gw tc class add dev %s parent 1: classid 1:10 htb rate 1gbit" % dev,
                         "gw tc class add dev %s parent 1:10 classid 1:11 htb rate 1gbit" % dev,
                         "gw tc class add dev %s parent 1: classid 1:20 htb rate 1gbit" % dev,
                         "gw tc filter add dev %s parent 1: protocol ip u32 match u32 0 0 classid 1:10" % dev,
                         "gw tc filter add dev %s parent 1:10 protocol ip %s action %s" % (dev, cls, a)],
                        ["gw tc qdisc del dev %s root 2>/dev/null || true" % dev],
                        name="tc filter on [a-z ]*%s" % dev)
        if "block:shared" in self.caps and self.chance(0.3):
            # the hook bound to a shared block, the filter added to the
            # block: the kernel lists it under the block, not the device
            blk = 22 if d == "ingress" else 23
            return Atom("tc", "tc on %s %s via shared block %d: %s action %s" % (dev, d, blk, cls, a),
                        ["gw tc qdisc add dev %s %s_block %d clsact" % (dev, d, blk),
                         "gw tc filter add block %d protocol %s %s action %s" % (blk, proto, cls, a)],
                        ["gw tc qdisc del dev %s clsact 2>/dev/null || true" % dev],
                        name="tc filter on [a-z ]*%s" % dev)
        return Atom("tc", "tc on %s %s: %s action %s" % (dev, d, cls, a),
                    ["gw tc qdisc add dev %s clsact 2>/dev/null || true" % dev,
                     "gw tc filter add dev %s %s protocol %s %s action %s" % (dev, d, proto, cls, a)],
                    ["gw tc qdisc del dev %s clsact 2>/dev/null || true" % dev], name="tc filter on [a-z ]*%s" % dev)

    # -- sysctls and bridge port flags ---------------------------------------
    def sysctl(self):
        k = self.pick(*SYSCTLS)
        val = self.pick(*SYSCTL_VALUES.get(k.rsplit(".", 1)[1], ["0", "1"]))
        return Atom("sysctl", "sysctl %s=%s" % (k, val), ["gw sysctl -qw %s=%s" % (k, val)], [], (),
                    name=k.rsplit(".", 1)[1])

    def brport(self):
        p = self.pick(*PORTS)
        f, undo = self.pick(("isolated off", "isolated on"), ("learning off", "learning on"),
                            ("flood off", "flood on"), ("hairpin on", "hairpin off"),
                            ("proxy_arp on", "proxy_arp off"), ("neigh_suppress on", "neigh_suppress off"),
                            ("mcast_flood off", "mcast_flood on"), ("bcast_flood off", "bcast_flood on"),
                            ("state 0", "state 3"), ("state 1", "state 3"))
        return Atom("brport", "bridge port %s: %s" % (p, f),
                    ["gw ip link set %s type bridge_slave %s" % (p, f)],
                    ["gw ip link set %s type bridge_slave %s 2>/dev/null || true" % (p, undo)], name=p)

    def config(self):
        fams = [(self.nft, 20), (self.xt, 20), (self.rule, 12), (self.route, 14), (self.link, 22), (self.tc, 7),
                (self.sysctl, 5), (self.brport, 4)]
        atoms = []
        for _ in range(self.pick(1, 1, 2, 2, 3, 4)):
            f = self.r.choices([f for f, _ in fams], [w for _, w in fams])[0]
            a = f()
            if a is not None:
                atoms.append(a)
        routing = any(a.kind in ("rule", "route", "sysctl", "link") for a in atoms)
        kill = self.chance(0.5 if routing else 0.1)
        return atoms, kill


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def select(atoms, kill, keep):
    if keep is None:
        return list(range(len(atoms))), kill
    ks = [k for k in keep.split(",") if k]
    return [int(k) for k in ks if k != "k" and int(k) < len(atoms)], kill and "k" in ks


def emit_config(atoms, kill, idx):
    sel = [atoms[i] for i in idx]
    print("gen_atoms=%s" % sh_quote(",".join(str(i) for i in idx) + (",k" if kill else "")))
    print("gen_n=%d" % len(atoms))
    print("gen_kill=%d" % (1 if kill else 0))
    print("gen_other=%d" % (1 if any(a.other for a in sel) else 0))
    print("gen_nft=%d" % (1 if any(a.kind in ("nft", "xt", "rule", "route", "tc") for a in sel) else 0))
    print("gen_hops4=%s" % sh_quote(" ".join(str(h) for a in sel for h in a.hops4)))
    print("gen_hops6=%s" % sh_quote(" ".join(str(h) for a in sel for h in a.hops6)))
    print("gen_vx=%s" % sh_quote(",".join(v for a in sel for v in a.vx)))
    print("gen_desc=%s" % sh_quote("; ".join(a.desc for a in sel) + ("; then engine killed, ruleset flushed" if kill else "")))
    print("gen_apply() {")
    for a in sel:
        for c in a.apply:
            print("\t%s || return 1" % c)
    print("\treturn 0\n}")
    print("gen_revert() {")
    for a in reversed(sel):
        for c in a.revert:
            print("\t%s 2>/dev/null" % c)
    print("\treturn 0\n}")


def emit_entry(atoms, kill, idx, args, baseline):
    sel = [atoms[i] for i in idx]
    other = any(a.other for a in sel)
    h4 = [h for a in sel for h in a.hops4]
    h6 = [h for a in sel for h in a.hops6]
    print("# Found by tests/integration/checker_generated.sh (seed %s, configuration %s), shrunk" % (args.seed, args.index))
    print("# to atoms %s of %d: proven by the checker, yet the probes reached the upstream." % (
        ",".join(map(str, idx)) + (",k" if kill else ""), len(atoms)))
    print("desc=%s" % sh_quote("; ".join(a.desc for a in sel) + ("; engine killed, ruleset flushed" if kill else "")))
    print("expect=hole")
    print("names=%s  # (the objects: adjust to what the fixed checker says)" % sh_quote(
        "|".join(a.name.replace(".", "\\.") for a in sel if a.name)))
    if other:
        print('ox() { lab_in "$LAB_ID-ckx" "$@"; }')
    print("apply() {")
    if other:
        # another namespace (a container's) with its own way to the upstream
        print('\t_lab_ns_add "$LAB_ID-ckx"')
        print('\tip -n "$LAB_ID-ckx" link add ckxu type veth peer name ckx0 netns "$LAB_UP"')
        print('\tox ip addr add 10.97.0.2/30 dev ckxu')
        print('\tox ip link set ckxu up')
        print('\tox ip route add default via 10.97.0.1')
        print('\tox sysctl -qw net.ipv4.ip_forward=1')
        print('\tlab_upstream ip addr add 10.97.0.1/30 dev ckx0')
        print('\tlab_upstream ip link set ckx0 up')
    for a in sel:
        for c in a.apply:
            print("\t%s" % c)
    print("}")
    print("traffic() {")
    for h in h4[:1]:
        print("\tsb 1 ip addr add 10.99.%d.2/24 dev eth0" % h)
        print("\tsb 1 ip route add $X4/32 via 10.99.%d.1" % h)
    for h in h6[:1]:
        print("\tsb 1 ip -6 addr add fd00:99:%d::2/64 dev eth0 nodad" % h)
        print("\tsb 1 ip -6 route add $X6/128 via fd00:99:%d::1" % h)
    if any(a.kind == "xt" or a.kind == "nft" for a in sel) and not kill:
        print("\t# the held-flow probe: a ClientHello naming cdn-evil.test on a flow held for")
        print("\t# cdn-good.test (shared address); needs agent-1 to allow cdn-good.test:443 and")
        print("\t# counts as arrived when the ClientHello reaches the upstream")
        print("\tsb 1 timeout 1 getent ahostsv4 cdn-good.test >/dev/null || true")
        print("\tsb 1 curl -sk --max-time 1.2 --resolve cdn-evil.test:443:$LAB_CDN4 https://cdn-evil.test/ >/dev/null 2>&1 || true")
    if kill:
        print("\tguard_engine_stop KILL")
        print("\tgw nft flush ruleset")
        print("\tgw ip link set pcv1 up")
    print("\tprobe 1")
    print("}")
    print("revert() {")
    for a in reversed(sel):
        for c in a.revert:
            print("\t%s 2>/dev/null" % c)
    for a in sel:
        if a.kind == "sysctl":
            k = a.apply[0].split()[2].split("=")[0]
            if k in baseline:
                print("\tgw sysctl -qw %s=%s" % (k, baseline[k]))
    if h6:
        print("\tsb 1 ip -6 route del $X6/128 2>/dev/null; sb 1 ip -6 addr flush dev eth0 to fd00:99::/32")
    if other:
        print('\t_lab_ns_del "$LAB_ID-ckx"')
    if kill:
        print("\tguard_engine_start")
    print("}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["probes", "sysctls", "config", "entry"])
    ap.add_argument("--caps")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--keep")
    ap.add_argument("--baseline")
    args = ap.parse_args()
    if args.what == "probes":
        for c, cmd in PROBES:
            print("%s\t%s" % (c, cmd))
        return
    if args.what == "sysctls":
        print("\n".join(SYSCTLS))
        return
    caps = [l.strip() for l in open(args.caps)] if args.caps else []
    atoms, kill = Gen(caps, args.seed, args.index).config()
    idx, kill = select(atoms, kill, args.keep)
    if args.what == "config":
        emit_config(atoms, kill, idx)
    else:
        baseline = {}
        if args.baseline:
            for l in open(args.baseline):
                if "=" in l:
                    k, v = l.strip().split("=", 1)
                    baseline[k.strip()] = v.strip()
        emit_entry(atoms, kill, idx, args, baseline)


if __name__ == "__main__":
    sys.exit(main())
