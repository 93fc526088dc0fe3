#!/bin/bash
# Base64 has one spelling in what the guard reads: the modules decode it
# only through common's pc_b64_decode, which takes a text only when it is
# the one encoding of its bytes. libsodium 1.0.18's own decoder reads
# every byte from 0x80 as '/': a checkpoint line, a key or a certificate
# whose bytes changed decoded to the same signature, and verified. The
# vault reads credentials as lenient decoders may, with a reader of its
# own (vault/http.c), so it needs no exception here; tests call libsodium
# directly where they model such a decoder.
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
. tests/lib/tap.sh
call='\bsodium_base642bin[[:space:]]*\('
mods=$(sed -nE 's/^MODULES := //p' Makefile)
t_ok "the Makefile names the modules" test -n "$mods"
hits=""
for m in $mods; do
	for f in "$m"/*.c "$m"/*.h; do
		[ -e "$f" ] && [ "$f" != common/b64.c ] || continue
		h=$(sed -E 's#/\*.*\*/##g' "$f" | grep -nE "$call")
		[ -z "$h" ] || hits+="$f: $h"$'\n'
	done
done
t_eq "no module but common/b64.c calls sodium_base642bin" "" "$hits"
t_ok "common/b64.c does, in pc_b64_decode" grep -qE "$call" common/b64.c
# a check that cannot fail is a bug: the pattern finds the call
t_ok "the pattern finds a call" grep -qE "$call" <<<'if (sodium_base642bin(b, 4, s, 4, NULL, &n, NULL, v) != 0)'
t_done
