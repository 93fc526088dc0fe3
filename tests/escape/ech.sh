# Escape attempts, class "Encrypted Client Hello": on the address shared by
# an allowed name (cdn-good.test) and a disallowed one (cdn-evil.test), a
# held flow is judged by the server_name of its ClientHello. With an
# encrypted_client_hello extension (RFC 9849) that name is only the outer
# one: a client-facing server holding the ECH key decrypts the inner
# ClientHello and serves the name in it, which the guard cannot read. The
# DNS guard strips ech from HTTPS answers, but that only keeps honest
# clients from learning a configuration; a sandbox can bring its own (any
# allowed channel carries the few bytes of a public ECHConfig). The lab's
# nginx (OpenSSL 3.0) has no ECH: it ignores the extension and answers the
# outer name, so what this test shows is the guard's side — the
# ClientHello it approved reached the server — and the refusal. Evidence:
# whether the server answered, the upstream capture, the log.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init ech "Encrypted Client Hello on a held flow"
esc_up 2

ECH_RE='^TLS ClientHello with Encrypted Client Hello'
# A real ClientHello (OpenSSL's, for server_name NAME), with one extension
# of TYPE and 32 random bytes appended (none: as made), sent from SPORT;
# prints "sport N; answer <first byte>" or "sport N; reset|closed|timeout".
ech_client() { # dst name type sport
	lab_sb 1 env PYTHONPATH="$PC_TOP/tests/escape" python3 - "$@" <<-'PY'
	import os, socket, struct, sys
	import craft
	dst, name, typ, sport = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
	ch = bytearray(craft.tls_client_hello(name))
	if typ != "none":
	    ext = struct.pack("!HH", int(typ, 16), 32) + os.urandom(32)
	    off = 5 + 4 + 2 + 32
	    off += 1 + ch[off]
	    off += 2 + struct.unpack("!H", ch[off:off + 2])[0]
	    off += 1 + ch[off]
	    for at, size in ((3, 2), (6, 3), (off, 2)):
	        v = int.from_bytes(ch[at:at + size], "big") + len(ext)
	        ch[at:at + size] = v.to_bytes(size, "big")
	    ch += ext
	fam = socket.AF_INET6 if ":" in dst else socket.AF_INET
	s = socket.socket(fam, socket.SOCK_STREAM)
	s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", sport))
	s.settimeout(4)
	s.connect((dst, 443))
	s.sendall(bytes(ch))
	try:
	    b = s.recv(5)
	    print("sport %d; %s" % (sport, ("answer %02x" % b[0]) if b else "closed"))
	except ConnectionResetError:
	    print("sport %d; reset" % sport)
	except socket.timeout:
	    print("sport %d; timeout" % sport)
	PY
}

t_match "sandbox 1 resolves cdn-good.test (A)" "$LAB_CDN4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test A)"
t_match "sandbox 1 resolves cdn-good.test (AAAA)" "$LAB_CDN6" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test AAAA)"

ech_attempt() { # title dst type sport
	local out n r c
	esc_begin "$1"
	out=$(ech_client "$2" cdn-good.test "$3" "$4" 2>&1)
	t_diag "client: $out"
	t_match "$2 ($3): the connection is reset, the server answered nothing" "^sport $4; reset" "$out"
	# (a ClientHello is some 300 bytes; the handshake's segments under
	# 100: the length works for IPv6 too, where tcp[] offsets do not)
	n=$(esc_upstream "tcp and src port $4 and greater 200")
	t_eq "$2 ($3): the ClientHello did not reach the upstream" 0 "$n"
	r=$(esc_flow_reason "$4")
	t_match "$2 ($3): the refusal is in the log" "$ECH_RE" "$r"
	c=$(esc_flow_code "$4")
	t_eq "$2 ($3): its event.code" tls_ech "$c"
	esc_end "RST at the ClientHello" "client: $out; upstream: $n segments with data; log: \"$r\" ($c)"
}
ech_attempt "(a) a ClientHello naming the allowed cdn-good.test, with an encrypted_client_hello extension (0xfe0d) its server could decrypt to another name (IPv4)" "$LAB_CDN4" fe0d 47560
ech_attempt "(a) the same over IPv6" "$LAB_CDN6" fe0d 47561
ech_attempt "(b) the same with ESNI, ECH's predecessor (0xffce)" "$LAB_CDN4" ffce 47562
ech_attempt "(c) the same with a draft ECH codepoint (0xfe0a)" "$LAB_CDN4" fe0a 47563

# Nothing else changed: the same ClientHello without the extension, and
# with an extension next to ECH's codepoints, is judged by its name.
esc_begin "the same ClientHello without ECH, and with the unassigned 0xfe0e: answered"
t_match "no extension added: the server answers" "^sport 47564; answer 16" \
	"$(ech_client "$LAB_CDN4" cdn-good.test none 47564 2>&1)"
t_match "0xfe0e: the server answers" "^sport 47565; answer 16" \
	"$(ech_client "$LAB_CDN4" cdn-good.test fe0e 47565 2>&1)"
t_match "cdn-evil.test without ECH is still refused" "^sport 47566; reset" \
	"$(ech_client "$LAB_CDN4" cdn-evil.test none 47566 2>&1)"
esc_end "judged by the server name" "as before"

t_done
