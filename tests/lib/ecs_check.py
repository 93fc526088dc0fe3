#!/usr/bin/env python3
"""ecs_check.py TEMPLATE PIPELINE [FILE...]

Each line of each FILE (stdin without one) is a JSON object as portcullis
writes it: a line of the log file, or the JSON MSG of an exported message.
Each is taken through the renames of the shipped ingest pipeline (as
Elasticsearch would: flat dotted names), then checked against the shipped
index template:

- the template declares the ECS version it maps (_meta.ecs_version), and
  every record declares the same (ecs.version);
- every field present has a mapping (the template is "dynamic": false, so
  an unmapped field would be kept in _source but never searchable);
- its JSON type fits the mapping (keyword/text: strings, ip: an address,
  date: an RFC 3339 time, long: an integer; arrays item by item);
- the mapping of each ECS field is the type ECS gives it.

Prints one line per problem and "checked N documents" at the end; exit 1
when there is a problem.
"""
import ipaddress
import json
import re
import sys

# ECS 8.11 types of the ECS fields the records use (ecs.elastic.co, field
# reference): the template must map each as ECS does.
ECS_TYPES = {
    "@timestamp": "date",
    "message": "match_only_text",
    "ecs.version": "keyword",
    "error.message": "match_only_text",
    "event.kind": "keyword",
    "event.category": "keyword",
    "event.type": "keyword",
    "event.action": "keyword",
    "event.outcome": "keyword",
    "event.reason": "keyword",
    "event.code": "keyword",
    "event.module": "keyword",
    "event.dataset": "keyword",
    "event.original": "keyword",
    "event.sequence": "long",
    "event.hash": "keyword",
    "rule.name": "keyword",
    "source.ip": "ip",
    "source.port": "long",
    "destination.ip": "ip",
    "destination.port": "long",
    "destination.domain": "keyword",
    "network.transport": "keyword",
    "network.protocol": "keyword",
    "network.direction": "keyword",
    "network.iana_number": "keyword",
    "dns.question.name": "keyword",
    "dns.question.type": "keyword",
    "dns.resolved_ip": "ip",
    "dns.response_code": "keyword",
    "tls.client.server_name": "keyword",
    "http.request.method": "keyword",
    "http.response.status_code": "long",
    "url.path": "wildcard",
    "observer.hostname": "keyword",
    "observer.product": "keyword",
    "observer.vendor": "keyword",
    "observer.type": "keyword",
}

STRINGS = {"keyword", "wildcard", "match_only_text", "text", "constant_keyword"}
INTEGERS = {"long": 63, "integer": 31, "short": 15, "byte": 7}
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$")


def flatten(props, prefix, out):
    for name, m in props.items():
        path = prefix + name
        if "properties" in m:
            out[path] = "object"
            flatten(m["properties"], path + ".", out)
        else:
            out[path] = m.get("type", "object")


def fits(t, v):
    """None when v fits a field of type t, else why not."""
    if isinstance(v, list):
        for item in v:
            why = fits(t, item)
            if why:
                return "item %r: %s" % (item, why)
        return None
    if isinstance(v, dict):
        return "an object, not a value"
    if t in STRINGS:
        return None if isinstance(v, str) else "a JSON %s, not a string" % type(v).__name__
    if t == "ip":
        try:
            ipaddress.ip_address(v)
            return None
        except (ValueError, TypeError):
            return "not an IP address"
    if t == "date":
        return None if isinstance(v, str) and RFC3339.match(v) else "not an RFC 3339 time"
    if t in INTEGERS:
        if isinstance(v, bool) or not isinstance(v, int):
            return "a JSON %s, not an integer" % type(v).__name__
        return None if -(1 << INTEGERS[t]) <= v < (1 << INTEGERS[t]) else "out of range"
    if t == "boolean":
        return None if isinstance(v, bool) else "not a boolean"
    return "mapped as %s, which takes no value" % t


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    tpl = json.load(open(sys.argv[1]))
    pipe = json.load(open(sys.argv[2]))
    fields = {}
    flatten(tpl["template"]["mappings"]["properties"], "", fields)
    renames = [
        (p["rename"]["field"], p["rename"]["target_field"])
        for p in pipe["processors"]
        if "rename" in p and p["rename"]["field"] != "message"
    ]
    problems = []
    version = tpl.get("_meta", {}).get("ecs_version")
    if not version:
        problems.append("template: no _meta.ecs_version: the ECS version it maps is not declared")
    for name, t in sorted(ECS_TYPES.items()):
        if fields.get(name, t) != t:
            problems.append("template: %s is mapped as %s, ECS says %s" % (name, fields[name], t))
    n = 0
    files = sys.argv[3:] or ["-"]
    for fn in files:
        f = sys.stdin if fn == "-" else open(fn)
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = "%s:%d" % (fn, lineno)
            try:
                doc = json.loads(line)
            except ValueError as e:
                problems.append("%s: not JSON: %s" % (where, e))
                continue
            n += 1
            for old, new in renames:
                if old in doc:
                    doc[new] = doc.pop(old)
            if "event.sequence" in doc:
                where += " (seq %s)" % doc["event.sequence"]
            elif "portcullis.checkpoint" in doc:
                where += " (checkpoint)"
            if "ecs.version" in doc and doc["ecs.version"] != version:
                said = "ecs.version %s, the template maps %s" % (doc["ecs.version"], version)
                if not any(p.endswith(said) for p in problems):  # once, at its first
                    problems.append("%s: %s" % (where, said))
            for k, v in doc.items():
                t = fields.get(k)
                if t is None:
                    problems.append("%s: %s has no mapping in the template" % (where, k))
                    continue
                why = fits(t, v)
                if why:
                    problems.append("%s: %s (%s) = %s: %s" % (where, k, t, json.dumps(v)[:80], why))
    for p in problems:
        print(p)
    print("checked %d documents" % n)
    sys.exit(1 if problems or not n else 0)


if __name__ == "__main__":
    main()
