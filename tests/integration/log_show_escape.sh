# What a record's strings bring cannot reach the reader of `portcullis log
# show` as it is: every code point that does not print (C0 controls, DEL,
# C1 controls, the bidi controls, U+2028/U+2029) is shown escaped, as
# \u{XXXX} in the text form and \uxxxx in --json, whose lines stay JSON
# with the same values (docs/logd.md, "Display escaping"). The records
# come through a real logd, the strings in a DNS name, the message and the
# sandbox, as a sandbox can get them into a record.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "log show escaping" "$B/portcullis-logd" "$B/tests/helpers/logd_client" "$B/portcullis"
lg_init log-show-escape
lg_config
export LC_ALL=C.UTF-8

u8() { printf "$1"; } # octal escapes -> bytes
ESC=$(u8 '\033') DEL=$(u8 '\177') CSI=$(u8 '\302\233') NEL=$(u8 '\302\205')
RLO=$(u8 '\342\200\256') LRI=$(u8 '\342\201\246') PDI=$(u8 '\342\201\251')
RLM=$(u8 '\342\200\217') ALM=$(u8 '\330\234') LSEP=$(u8 '\342\200\250')
PSEP=$(u8 '\342\200\251')
name="a${ESC}[2J${CSI}31m${RLO}moc.evil${PDI}.example"
msg="x${DEL}${NEL}${LRI}${RLM}${ALM}${LSEP}${PSEP}y\\z"
sb="agent${ESC}]0;pwned${ESC}\\"

logd_start || t_diag "logd did not start: $(cat "$D/logd.err")"
t_match "a connect record whose DNS name carries controls is written" "^acked" \
	"$(lg_client -a connect -V allowed -d "$name")"
t_match "a sandbox record whose message and sandbox carry them too" "^acked" \
	"$(lg_client -a sandbox -V none -m "$msg" -s "$sb")"
logd_stop_ok
t_ok "the log verifies (the file keeps its bytes)" PC log verify

out=$(PC log show 2>&1)
t_eq "log show: no C0 control, DEL or raw byte >= 0x80 that is a control" "" \
	"$(printf '%s' "$out" | LC_ALL=C grep -P '[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xaa-\xae\xa8\xa9]|\xe2\x81[\xa6-\xa9]|\xd8\x9c' | head -3)"
t_match "... the DNS name with its escapes" \
	'allowed CONNECT a\\u\{001B\}\[2J\\u\{009B\}31m\\u\{202E\}moc\.evil\\u\{2069\}\.example:443' "$out"
t_match "... the message: DEL, C1, bidi, U+2028/9 escaped, a backslash doubled" \
	'SANDBOX x\\u\{007F\}\\u\{0085\}\\u\{2066\}\\u\{200F\}\\u\{061C\}\\u\{2028\}\\u\{2029\}y\\\\z' "$out"

json=$(PC log show --json 2>&1)
t_eq "log show --json: none of them raw either" "" \
	"$(printf '%s' "$json" | LC_ALL=C grep -P '[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xaa-\xae\xa8\xa9]|\xe2\x81[\xa6-\xa9]|\xd8\x9c' | head -3)"
t_match "... escaped as JSON does" '"destination.domain":"a\\u001b\[2J\\u009b31m\\u202emoc\.evil\\u2069\.example"' "$json"
check=$(printf '%s\n' "$json" | NAME="$name" MSG="$msg" SB="$sb" python3 -c '
import json, os, sys
recs = [json.loads(l) for l in sys.stdin if l.strip()]
names = [r.get("destination.domain") for r in recs]
msgs = [r.get("message") for r in recs]
sbs = [r.get("portcullis.sandbox") for r in recs]
print("ok" if os.environ["NAME"] in names and os.environ["MSG"] in msgs and os.environ["SB"] in sbs
      else "values differ: %r %r %r" % (names, msgs, sbs))' 2>&1)
t_eq "... every line is JSON, with the values the records have" ok "$check"
t_done
