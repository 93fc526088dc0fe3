"""Shared code of bench/run and bench/report: reading the printed output of
the bench programs that predate the result protocol (bench/flows, logd,
check, vault) into result objects, and the summary every report shows
(medians, spread, ratio, pass/miss). The protocol is in bench/README.md.

    python3 bench/lib.py adapt NAME COMMAND RAWFILE...   -> result JSON on stdout
"""
import json
import re
import statistics
import sys


def metric(name, label, unit, better, subject, samples, baseline=None, base_samples=None,
           target=None, ceiling=None, ceil_samples=None):
    m = {"name": name, "label": label, "unit": unit, "better": better,
         "subject": {"name": subject, "samples": samples}}
    if baseline is not None:
        m["baseline"] = {"name": baseline, "samples": base_samples}
    if ceiling is not None:
        m["ceiling"] = {"name": ceiling, "samples": ceil_samples}
    if target:
        m["target"] = {"kind": target[0], "value": target[1], "text": target[2]}
    return m


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


# ---- adapters: printed output -> result ------------------------------------

def adapt_flows(texts):
    """bench/flows: one line per round, 'flows: round R: conn/s plain X
    portcullis Y (..); SYN p50 A/B us, p99 C/D us; bulk E/F Gbit/s (..)'."""
    rx = re.compile(r"flows: round \d+: conn/s plain ([\d.]+) portcullis ([\d.]+) .*"
                    r"SYN p50 (\d+)/(\d+) us, p99 (\d+)/(\d+) us; bulk ([\d.]+)/([\d.]+) Gbit/s")
    rx_null = re.compile(r"flows: round \d+: null queue consumer: conn/s ([\d.]+)")
    # the queue consumer's CPU per new flow (on the portcullis line: nullq's, then
    # portcullisd + logd's, both from the same round)
    rx_cpu = re.compile(r"CPU per new flow: null queue consumer ([\d.]+) us, "
                        r"portcullisd \+ logd ([\d.]+) us")
    # the whole machine's CPU per new flow, every process (plain, nullq, portcullis)
    rx_mach = re.compile(r"machine CPU per new flow \(every process, both vCPUs\): "
                         r"plain ([\d.]+) us, null queue consumer ([\d.]+) us, "
                         r"portcullis ([\d.]+) us")
    cols = [[] for _ in range(8)]
    rn = []
    cpu_n, cpu_g = [], []
    mach = [[], [], []]
    notes = []
    for t in texts:
        for line in t.splitlines():
            m = rx.search(line)
            mn = rx_null.search(line)
            if m:
                for i, v in enumerate(m.groups()):
                    cols[i].append(num(v))
                mc = rx_cpu.search(line)
                cpu_n.append(num(mc.group(1)) if mc else None)
                cpu_g.append(num(mc.group(2)) if mc else None)
                mm = rx_mach.search(line)
                for i in range(3):
                    mach[i].append(num(mm.group(i + 1)) if mm else None)
            elif mn:
                rn.append(num(mn.group(1)))
            elif line.startswith("flows: packets the engine saw") or \
                    line.startswith("flows: ") and "round(s) of" in line:
                notes.append(line[len("flows: "):])
    rp, rg, p50p, p50g, p99p, p99g, bp, bg = cols
    return {
        "bench": "flows", "title": "New flows, handshake latency and bulk through the engine",
        "workload": "bench/flows: sandbox 1 to 203.0.113.99 through a cidr rule; iperf3 one TCP "
                    "stream (bulk), flows conn with 16 handshakes in flight, each reset after the "
                    "handshake (rate), then one at a time (latency); plain: the same gateway with "
                    "portcullis' tables deleted; portcullis: tables installed, every new flow "
                    "queued, judged and logged (logd acknowledges before the verdict); null "
                    "queue consumer: the same tables, bench/nullq on the engine's queues in its "
                    "place, letting every packet through unjudged and unlogged; CPU per new "
                    "flow: the queue consumer's threads' run time (/proc/PID/task/*/schedstat; "
                    "portcullis: portcullisd and portcullis-logd) over the rate run, divided "
                    "by the connections it completed",
        "metrics": [
            metric("flows_conn", "new TCP connections/s", "conn/s", "higher", "portcullis", rg,
                   "plain forwarding", rp, ("ratio_min", 0.85, ">= 0.85x"),
                   "null queue consumer", rn),
            # the queue consumer's threads' run time (schedstat) over the rate
            # run, per completed connection; portcullis: portcullisd + logd
            metric("flows_cpu", "new TCP flows: CPU per new flow vs the do-nothing consumer",
                   "us", "lower", "portcullis", cpu_g, "null queue consumer", cpu_n,
                   ("ratio_max", 1.3, "<= 1.3x")),
            # beside it, what a new flow costs the whole machine (/proc/stat),
            # wherever its work ran: the consumer's own account misses the
            # work its verdicts move to other tasks and carries the peers'
            # work their re-injection runs in its thread
            metric("flows_machine", "new TCP flows: the machine's CPU per new flow (every "
                   "process, both vCPUs)", "us", "lower", "portcullis", mach[2],
                   "null queue consumer", mach[1]),
            metric("flows_machine_nullq", "new TCP flows: the machine's CPU per new flow, the "
                   "queue's own cost (null queue consumer)", "us", "lower",
                   "null queue consumer", mach[1], "plain forwarding", mach[0]),
            metric("flows_conn_nullq", "new TCP connections/s, null queue consumer "
                   "(NFQUEUE's ceiling here: no decision, no record)", "conn/s", "higher",
                   "null queue consumer", rn, "plain forwarding", rp),
            metric("flows_conn_vs_nullq", "new TCP connections/s, portcullis against the null "
                   "queue consumer (its own cost)", "conn/s", "higher", "portcullis", rg,
                   "null queue consumer", rn),
            metric("flows_syn_p99", "handshake (SYN) latency p99", "us", "lower", "portcullis",
                   p99g, "plain forwarding", p99p, ("added_max", 200, "added < 200 us")),
            metric("flows_syn_p50", "handshake (SYN) latency p50", "us", "lower", "portcullis",
                   p50g, "plain forwarding", p50p),
            metric("flows_bulk", "bulk throughput, one allowed TCP flow", "Gbit/s", "higher",
                   "portcullis", bg, "plain forwarding", bp, ("ratio_min", 0.95, ">= 0.95x")),
        ],
        "notes": notes,
    }


def adapt_logd(texts):
    """bench/logd, run once per round: rows 'label  per-s  ratio  per-CPU-s  ratio'."""
    rows = {"ed25519 signatures": "sign", "write + seal": "write",
            "accept + seal + write + ack": "accept", "verify": "verify",
            "witnessed: accept": "witnessed"}
    wall = {k: [] for k in rows.values()}
    cpu = {k: [] for k in rows.values()}
    # the acknowledgement latency with a stalled syslog collector and without
    rx_lat = re.compile(r"ack latency p99: stalled collector (\d+) us, none (\d+) us")
    lat_stalled, lat_none = [], []
    # the same two servers' CPU per record (what formatting the export costs)
    rx_xcpu = re.compile(r"CPU per record, the same servers: exporting to the stalled collector "
                         r"([\d.]+) us, no export ([\d.]+) us")
    xcpu_export, xcpu_none = [], []
    # CPU time per record of each accept row (the line under it): logd's
    # threads, the senders', the witness's
    rx_cpu = re.compile(r"(accept \+ seal \+ write \+ ack \(socket\)|witnessed: accept)[^\n]*\n"
                        r"\s*CPU per record: portcullis-logd ([\d.]+) us \(all threads\), "
                        r"senders ([\d.]+) us(?:, witness ([\d.]+) us)?")
    cpu_us = {"logd": [], "logd_witnessed": [], "senders": []}
    # one record at a time through the ring against two bare processes
    rx_rt = re.compile(r"record round trip \([^)]*\): ([\d.]+) us, CPU per round trip "
                       r"portcullis-logd ([\d.]+) us, sender ([\d.]+) us; two processes ringing "
                       r"eventfds: ([\d.]+) us, CPU ([\d.]+) \+ ([\d.]+) us")
    rt = {"wall": [], "cpu": [], "bare_wall": [], "bare_cpu": []}
    for t in texts:
        m = rx_rt.search(t)
        rt["wall"].append(num(m.group(1)) if m else None)
        rt["cpu"].append(num(m.group(2)) + num(m.group(3)) if m else None)
        rt["bare_wall"].append(num(m.group(4)) if m else None)
        rt["bare_cpu"].append(num(m.group(5)) + num(m.group(6)) if m else None)
        m = rx_lat.search(t)
        lat_stalled.append(num(m.group(1)) if m else None)
        lat_none.append(num(m.group(2)) if m else None)
        m = rx_xcpu.search(t)
        xcpu_export.append(num(m.group(1)) if m else None)
        xcpu_none.append(num(m.group(2)) if m else None)
        found = {mm.group(1).startswith("witnessed"): mm for mm in rx_cpu.finditer(t)}
        plain, wit = found.get(False), found.get(True)
        cpu_us["logd"].append(num(plain.group(2)) if plain else None)
        cpu_us["senders"].append(num(plain.group(3)) if plain else None)
        cpu_us["logd_witnessed"].append(
            num(wit.group(2)) + num(wit.group(4) or 0) if wit else None)
        for line in t.splitlines():
            for label, key in rows.items():
                if line.strip().startswith(label):
                    nums = re.findall(r"(?<![\w.])(\d+(?:\.\d+)?)(?:x)?(?=\s|$)", line)
                    vals = [num(x) for x in nums]
                    # per s, ratio, per CPU s, ratio (the sign row's ratios are "1.0")
                    if len(vals) >= 3:
                        wall[key].append(vals[0])
                        cpu[key].append(vals[2])
    sign = "ed25519 signing, same run"
    return {
        "bench": "logd", "title": "The signed log: records/s written, accepted and verified",
        "workload": "bench/logd: records of the engine's kind (a connect verdict per new flow), "
                    "a checkpoint every 1,000 records, files under /tmp; write: the writer alone, "
                    "commits of 64; accept: 2 senders of the engine's user (as its 2 queue "
                    "threads), batches of 64 as the engine sends them (one datagram, one "
                    "acknowledgement) -> the real portcullis-logd -> file -> acknowledgement, "
                    "then again with a real witness (portcullis-logd --witness) on the loopback "
                    "of the bench's own network namespace; verify: log verify of the writer's "
                    "file. The baseline is libsodium's "
                    "raw signing rate in the same run (one signature per record would cap logd "
                    "there)",
        "metrics": [
            metric("logd_accept", "records/s accepted, sealed, written, acknowledged", "records/s",
                   "higher", "portcullis-logd", wall["accept"], sign, wall["sign"],
                   ("min", 200000, ">= 200,000/s")),
            metric("logd_verify", "log verify records/s", "records/s", "higher", "log verify",
                   wall["verify"], sign, wall["sign"], ("min", 1000000, ">= 1,000,000/s")),
            metric("logd_write", "records/s sealed and written (writer alone)", "records/s",
                   "higher", "writer", wall["write"], sign, wall["sign"]),
            metric("logd_accept_witnessed", "records/s accepted ... acknowledged, with a witness "
                   "cosigning checkpoints", "records/s", "higher", "portcullis-logd + witness",
                   wall["witnessed"], sign, wall["sign"], ("min", 200000, ">= 200,000/s")),
            metric("logd_accept_cpu", "records per CPU second, accept (logd's threads and the senders')",
                   "records/CPU s", "higher", "portcullis-logd", cpu["accept"],
                   "signatures per CPU second", cpu["sign"]),
            metric("logd_accept_cpu_us", "CPU per record accepted, portcullis-logd (all threads)",
                   "us", "lower", "portcullis-logd", cpu_us["logd"],
                   "the senders (engine's user)", cpu_us["senders"]),
            metric("logd_accept_witnessed_cpu_us", "CPU per record accepted with a witness, "
                   "portcullis-logd + witness", "us", "lower", "portcullis-logd + witness",
                   cpu_us["logd_witnessed"], "portcullis-logd without a witness", cpu_us["logd"]),
            metric("logd_ack_p99_stalled_syslog",
                   "p99 acknowledgement latency, syslog collector that reads nothing", "us",
                   "lower", "stalled collector", lat_stalled, "no collector", lat_none,
                   ("ratio_max", 1.5, "<= 1.5x")),
            metric("logd_export_cpu_us", "CPU per record accepted, exporting to syslog (the "
                   "stalled collector's server, whole process)", "us", "lower",
                   "with syslog export", xcpu_export, "no export", xcpu_none),
            metric("logd_round_trip", "record round trip: one record through the ring to "
                   "portcullis-logd, then its acknowledgement", "us", "lower",
                   "portcullis-logd and a ring sender", rt["wall"],
                   "two processes ringing eventfds", rt["bare_wall"]),
            metric("logd_round_trip_cpu", "CPU per record round trip, both sides", "us", "lower",
                   "portcullis-logd + the sender", rt["cpu"],
                   "two processes ringing eventfds", rt["bare_cpu"]),
        ],
        "notes": [],
    }


def adapt_check(texts):
    """bench/check: 'check: N rules, each run: a b c d e ms' per size."""
    runs = {}
    for t in texts:
        for line in t.splitlines():
            m = re.match(r"check:\s+(\d+) rules, each run: ([\d ]+) ms", line)
            if m:
                runs.setdefault(int(m.group(1)), []).extend(num(x) for x in m.group(2).split())
    r100, r1k, r10k = runs.get(100, []), runs.get(1000, []), runs.get(10000, [])
    return {
        "bench": "check", "title": "Time to prove containment (portcullis check)",
        "workload": "bench/check: the engine's ruleset installed in the lab gateway plus 100, 1,000 "
                    "or 10,000 rules in another table (ip filler, prerouting and forward, each "
                    "matching another interface and a TCP port); the whole `portcullis check` "
                    "command timed, 5 runs per size",
        "metrics": [
            metric("check_10k", "check with 10,000 foreign rules", "ms", "lower", "10,000 rules",
                   r10k, "100 rules", r100, ("max", 1000, "< 1 s")),
            metric("check_linear", "time growth for 100x the rules", "ms", "lower",
                   "10,000 rules", r10k, "100 rules", r100,
                   ("ratio_max", 100, "<= 100x (not worse than linear)")),
            metric("check_1k", "check with 1,000 foreign rules", "ms", "lower", "1,000 rules",
                   r1k, "100 rules", r100),
        ],
        "notes": [],
    }


def adapt_vault(texts):
    """bench/vault, run once per round: two sections, rows 'label req/s p50 p99 CPU
    ratio' (CPU: microseconds of the measured tree per request, '-' where none
    is measured), and in the keep-alive section logd's CPU per vault request."""
    keys = {"direct TLS (baseline)": "direct", "vault with injection": "vault",
            "squid ssl-bump adding the header": "squid",
            "nginx reverse proxy with the header": "nginx"}
    data = {}  # (section, row) -> {"rps": [], "p50": [], "p99": [], "cpu": []}
    logd_cpu = []
    # the whole machine's CPU per keep-alive request (direct, vault, nginx)
    mach = [[], [], []]
    rx_mach = re.compile(r"\s+machine CPU per request\s+direct ([\d.]+) us, "
                         r"vault ([\d.]+) us, nginx ([\d.]+) us")
    for t in texts:
        mm = rx_mach.search(t)
        for i in range(3):
            mach[i].append(num(mm.group(i + 1)) if mm else None)
        section = None
        for line in t.splitlines():
            if line.startswith("keep-alive connections"):
                section = "ka"
            elif line.startswith("a new TLS connection"):
                section = "new"
            elif section:
                m = re.match(r"\s+logd, for the vault's records\s+-\s+-\s+-\s+(\S+)", line)
                if m and section == "ka":
                    logd_cpu.append(num(m.group(1)))
                for label, key in keys.items():
                    m = re.match(r"\s+" + re.escape(label) +
                                 r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)(?:\s+(\S+))?", line)
                    if m:
                        d = data.setdefault((section, key),
                                            {"rps": [], "p50": [], "p99": [], "cpu": []})
                        d["rps"].append(num(m.group(1)))
                        d["p50"].append(num(m.group(2)))
                        d["p99"].append(num(m.group(3)))
                        d["cpu"].append(num(m.group(4)))

    def col(sec, key, c):
        return data.get((sec, key), {}).get(c, [])
    notes = []
    if not col("ka", "squid", "rps"):
        notes.append("squid rows missing: " + " ".join(
            l for t in texts for l in t.splitlines() if l.startswith("squid: not measured")))
    return {
        "bench": "vault",
        "title": "HTTPS through the vault, against direct TLS, Squid and nginx",
        "workload": "bench/vault: bench/vault_load in a sandbox, 8 concurrent clients, GET to "
                    "the lab's nginx; direct: TLS to paste.evil.test, not redirected; vault: to "
                    "api.github.test with a placeholder the vault replaces (TLS terminated, "
                    "request logged with logd's acknowledgement, upstream verified); squid: "
                    "Debian's squid-openssl ssl-bump intercepting, adding the same header; "
                    "nginx: a TLS-terminating reverse proxy in the gateway adding the same "
                    "header, upstream verified and kept alive (keep-alive only); "
                    "keep-alive, then a new TLS connection per request",
        "metrics": [
            metric("vault_keepalive", "HTTPS requests/s, keep-alive", "req/s", "higher",
                   "vault", col("ka", "vault", "rps"), "direct TLS", col("ka", "direct", "rps"),
                   ("ratio_min", 0.7, ">= 0.7x")),
            metric("vault_newconn_squid", "new HTTPS connections/s, against Squid", "req/s",
                   "higher", "vault", col("new", "vault", "rps"), "squid ssl-bump",
                   col("new", "squid", "rps"), ("ratio_min", 2.0, ">= 2x")),
            metric("vault_newconn_p99_squid", "new connection request latency p99, against Squid",
                   "ms", "lower", "vault", col("new", "vault", "p99"), "squid ssl-bump",
                   col("new", "squid", "p99"), ("ratio_max", 1.0, "below Squid's")),
            metric("vault_keepalive_squid", "HTTPS requests/s keep-alive, against Squid",
                   "req/s", "higher", "vault", col("ka", "vault", "rps"), "squid ssl-bump",
                   col("ka", "squid", "rps")),
            metric("vault_keepalive_nginx", "HTTPS requests/s keep-alive, nginx reverse proxy "
                   "(a peer's ceiling here: same TLS work, no checks, no record)", "req/s",
                   "higher", "nginx proxy", col("ka", "nginx", "rps"), "direct TLS",
                   col("ka", "direct", "rps")),
            metric("vault_keepalive_vs_nginx", "HTTPS requests/s keep-alive, vault against the "
                   "nginx reverse proxy", "req/s", "higher", "vault", col("ka", "vault", "rps"),
                   "nginx proxy", col("ka", "nginx", "rps")),
            # issue 34: CPU per keep-alive request of every process and thread
            # of the vault (monitor, CA, workers) against nginx's master and
            # workers, same run; logd's share of the vault's records beside it
            metric("vault_cpu_vs_nginx", "vault keep-alive: CPU per request vs nginx", "us",
                   "lower", "vault", col("ka", "vault", "cpu"), "nginx proxy",
                   col("ka", "nginx", "cpu"), ("ratio_max", 1.2, "<= 1.2x")),
            # the whole machine's busy time per request (every process on
            # both vCPUs: the load, the upstream, logd): reported
            metric("vault_machine_vs_nginx", "vault keep-alive: the machine's CPU per request "
                   "(every process, both vCPUs; logd included) vs nginx", "us", "lower", "vault",
                   mach[1], "nginx proxy", mach[2]),
            metric("vault_machine_direct", "keep-alive: the machine's CPU per request, direct "
                   "TLS (no proxy)", "us", "lower", "direct TLS", mach[0]),
            metric("vault_logd_cpu", "logd's CPU per vault keep-alive request (its records; "
                   "not in the vault's column)", "us", "lower", "logd", logd_cpu),
            metric("vault_keepalive_p99", "keep-alive request latency p99", "ms", "lower",
                   "vault", col("ka", "vault", "p99"), "direct TLS", col("ka", "direct", "p99")),
            metric("vault_newconn", "new HTTPS connections/s, against direct TLS", "req/s",
                   "higher", "vault", col("new", "vault", "rps"), "direct TLS",
                   col("new", "direct", "rps")),
        ],
        "notes": notes,
    }


ADAPTERS = {"flows": adapt_flows, "logd": adapt_logd, "check": adapt_check,
            "vault": adapt_vault}


# ---- summary ----------------------------------------------------------------

def _vals(side):
    return [x for x in (side or {}).get("samples") or [] if x is not None]


def summarize(m):
    """Medians, spread, ratio and verdict of one metric (dict, added keys)."""
    s, b = _vals(m.get("subject")), _vals(m.get("baseline"))
    out = {"n": len(s)}
    if s:
        out.update(s_med=statistics.median(s), s_min=min(s), s_max=max(s))
    if b:
        out.update(b_med=statistics.median(b), b_min=min(b), b_max=max(b))
    if s and b and out["b_med"] > 0:
        out["ratio"] = out["s_med"] / out["b_med"]
        ss, bb = (m["subject"]["samples"], m["baseline"]["samples"])
        pairs = [x / y for x, y in zip(ss, bb) if x is not None and y]
        if len(ss) == len(bb) and pairs:
            out.update(r_min=min(pairs), r_max=max(pairs))
    # the do-nothing consumer's ratio to the same baseline: the ceiling
    c = _vals(m.get("ceiling"))
    if c and b and out["b_med"] > 0:
        out["c_ratio"] = statistics.median(c) / out["b_med"]
    t = m.get("target")
    if not t:
        out["status"] = "report"
    elif not s or (t["kind"] in ("ratio_min", "ratio_max", "added_max") and "ratio" not in out
                   and not b):
        out["status"] = "not measured"
    else:
        k, v = t["kind"], t["value"]
        if k == "ratio_min":
            ok = out.get("ratio", float("nan")) >= v
        elif k == "ratio_max":
            ok = out.get("ratio", float("inf")) <= v
        elif k == "added_max":
            ok = out["s_med"] - out["b_med"] < v
        elif k == "min":
            ok = out["s_med"] >= v
        elif k == "max":
            ok = out["s_med"] <= v
        else:
            ok = None
        out["status"] = "pass" if ok else ("miss" if ok is False else "report")
    return out


def main(argv):
    if len(argv) >= 4 and argv[1] == "adapt" and argv[2] in ADAPTERS:
        texts = [open(f, errors="replace").read() for f in argv[4:]]
        r = ADAPTERS[argv[2]](texts)
        r.update(command=argv[3], rounds=len(texts) if argv[2] in ("logd", "vault") else None)
        json.dump(r, sys.stdout)
        print()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
