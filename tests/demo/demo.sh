#!/usr/bin/env bash
# `make demo`: the whole portcullis story in network namespaces — a gateway,
# a sandbox running an "agent", and a simulated internet — from one command.
# It grows with the product; each act prints a heading, what it shows, and
# what happened. Leaves nothing behind (the lab's EXIT trap).
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$PC_TOP/tests/lab/lab.sh"

bold=$'\e[1m' dim=$'\e[2m' off=$'\e[0m'
[ -t 1 ] || bold= dim= off=
act() { printf '\n%s== %s ==%s\n' "$bold" "$*" "$off"; }
say() { printf '%s%s%s\n' "$dim" "$*" "$off"; }
SUMMARY=()
result() { printf '  %-60s %s\n' "$1" "$2"; SUMMARY+=("$(printf '%-60s %s' "$1" "$2")"); }

act "1. The lab"
say "A gateway namespace with the sandbox bridge pcbr0, one sandbox (standing in"
say "for an agent's VM) and an upstream 'internet' on TEST-NET addresses with a"
say "real resolver (dnsmasq) and real HTTPS servers (nginx)."
lab_up 1 2>/dev/null
result "lab up ($LAB_ID)" "ok"

act "2. The sandbox reaches the simulated internet (no guard yet)"
ans=$(lab_sb 1 dig +short +time=2 +tries=1 api.github.test A)
result "dig api.github.test" "${ans:-FAILED}"
page=$(lab_sb 1 curl -sS --max-time 5 --cacert "$LAB_CA" https://api.github.test/ 2>&1)
result "curl https://api.github.test/" "${page:-FAILED}"

act "Summary"
printf '%s\n' "${SUMMARY[@]}"
[ "$ans" = "$LAB_API4" ] && [ "$page" = "api.github.test ok" ]
