#!/bin/bash
# The transparency-log core (tlog/) does no I/O and keeps no daemon state
# (docs/layout.md, issue 32 point 7): an auditor reads it as functions over
# buffers. Its C files call nothing that opens, reads, writes, maps, sends,
# logs or reads a clock or the environment; the callers hand every byte and
# every time in. (Threads that hash a large buffer in parallel and sysconf
# for their number compute, they do not read.)
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
. tests/lib/tap.sh
io='\b(open|openat|fopen|fdopen|freopen|fread|fwrite|fgets|getline|read|pread|write|pwrite|mmap|munmap|socket|connect|accept|send|recv|sendmsg|recvmsg|time|clock_gettime|gettimeofday|getenv|printf|fprintf|vfprintf|puts|fputs|perror|stat|fstat|lstat|access|unlink|rename|mkdir|opendir|syslog|pc_log|pc_file_[a-z_]+|pc_unix_[a-z_]+)[[:space:]]*\('
# comments are not calls: drop /* ... */ on a line and lines inside one
strip() { sed -E 's#/\*.*\*/##g; /^[[:space:]]*\*/d; /^[[:space:]]*\/\*/d' "$1"; }
hits=""
for f in tlog/*.c tlog/*.h; do
	h=$(strip "$f" | grep -nE "$io")
	[ -z "$h" ] || hits+="$f: $h"$'\n'
done
t_eq "tlog/ calls no I/O, clock or environment function" "" "$hits"
inc=$(grep -hE '^#include' tlog/*.c tlog/*.h | grep -vE '"(common/pc|tlog/tlog|tlog/tlog_int)\.h"|<(errno|pthread|sodium|stdarg|stdbool|stddef|stdint|stdio|stdlib|string|time|unistd)\.h>|<openssl/sha\.h>')
t_eq "tlog/ includes only common/pc.h, its own headers and libc, libsodium, SHA-256" "" "$inc"
# a check that cannot fail is a bug: the pattern finds each kind of call
for call in 'fd = open(path, O_RDONLY);' 'n = read(fd, b, 4);' 'fprintf(stderr, "x");' \
	'now = time(NULL);' 'pc_file_read(p, 4, &t, &l, e);' 'map = mmap(NULL, n, 1, 2, fd, 0);'; do
	t_ok "the pattern finds: $call" grep -qE "$io" <<<"$call"
done
t_ok "the pattern leaves snprintf alone" bash -c "! grep -qE '$io' <<<'n = snprintf(b, 4, \"x\");'"
t_done
