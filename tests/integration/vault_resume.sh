# portcullis-vault resumes its TLS sessions with an upstream, and only where
# the first handshake's verification stands for the next: the same sandbox,
# the same host name, the same address. The upstream — real nginx — says
# which handshakes it resumed ($ssl_session_reused in its access log), an
# oracle that does not share the vault's bookkeeping; the vault's own
# counter must agree with it.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

vault_up

# one request on a connection of its own (curl is a new process each time);
# no placeholder: which sessions are offered does not depend on secrets
get() { # sandbox host path
	vcurl "$1" -o /dev/null -w '%{http_code}' "https://$2/$3"
}
# nginx's "r" (resumed) or "." (full) for each request of a path prefix, in order
reused() { v_upstream_log | sed -n "s/.*\"GET \/$1[^ ]* HTTP[^\"]*\" .* reused=\"\(.\)\".*/\1/p" | tr -d '\n'; }
metric() {
	"$V_BIN/portcullis" -c "$V/portcullis.yaml" metrics 2>/dev/null |
		sed -n "s/^portcullis_vault_upstream_handshakes_total{kind=\"$1\"} //p"
}

codes=
for i in 1 2 3; do codes="$codes$(get 1 api.github.test "resume-a$i")"; done
t_eq "sandbox 1: three requests on three connections served" 200200200 "$codes"
t_eq "the upstream saw one full handshake, then two resumed" .rr "$(reused resume-a)"

# the same address, another name (nginx serves both): its own handshake
t_eq "sandbox 1, www.github.test at the same address: served" 200 \
	"$(get 1 www.github.test resume-w1)"
t_eq "... with a full handshake: a session is offered only for its name" . "$(reused resume-w)"

# the same name at another address (its IPv6 one): a session is offered
# only where it was earned — an address bound to the name by a forged
# answer would have to show a certificate of its own
t_eq "sandbox 1, api.github.test over IPv6: served" 200 "$(vcurl 1 -6 -o /dev/null -w '%{http_code}' https://api.github.test/resume-v1)"
t_eq "... with a full handshake: a session is offered only to its address" . "$(reused resume-v)"

# another sandbox, the same name and address: a ticket links the
# connections that use it, and one sandbox's are not another's
t_eq "sandbox 2, api.github.test: served" 200 "$(get 2 api.github.test resume-b1)"
t_eq "... with a full handshake: sessions are not shared between sandboxes" . \
	"$(reused resume-b)"
t_eq "sandbox 2's second connection resumes its own session" 200 \
	"$(get 2 api.github.test resume-b2)"
t_eq "... as the upstream says" .r "$(reused resume-b)"

t_eq "the vault counts the resumed handshakes the upstream saw" 3 "$(metric resumed)"
t_eq "... and the full ones" 4 "$(metric full)"

t_done
