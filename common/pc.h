/* common: what every portcullis module shares — the error convention,
 * daemon logging, addresses, UNIX sockets and privilege dropping.
 *
 * Conventions (docs/layout.md): library functions return 0 or a
 * negative PC_E* code and describe the failure in a caller-provided
 * struct pc_err; they never print or exit. Out-parameters are written only
 * on success. Free functions accept NULL. */
#ifndef PC_COMMON_H
#define PC_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#ifndef PC_VERSION
#define PC_VERSION "0.0.0"
#endif

#define PC_PATH_MAX 256
#define PC_IFNAMSIZ 16 /* IFNAMSIZ, without pulling in net/if.h */

/* ---- errors ------------------------------------------------------------ */

enum {
	PC_OK = 0,
	PC_EINVAL = -1, /* bad argument or bad input */
	PC_ENOMEM = -2, /* allocation failed */
	PC_EIO = -3,	/* read/write/socket failure (see errno text) */
	PC_EPARSE = -4, /* malformed input; location in pc_err */
	PC_EPERM = -5,	/* permission or credential check failed */
	PC_ENOENT = -6, /* no such object */
	PC_EEXIST = -7, /* already exists */
	PC_EAGAIN = -8, /* would block / try again */
	PC_ETIMEOUT = -9,
	PC_EREFUSED = -10, /* a security check said no */
	PC_EUNSUPP = -11,  /* kernel or peer lacks a feature */
	PC_ETAMPER = -12,  /* integrity verification failed */
};

/* An error description. file/line/col locate it in an input file when the
 * error is about input (line and col are 1-based; 0 means unknown). */
struct pc_err {
	int code;
	char msg[512];
	char file[PC_PATH_MAX];
	unsigned line, col;
};

/* Fill err (may be NULL) and return code. Always returns code, so
 * `return pc_err_set(err, PC_EINVAL, "...")` reads naturally. */
int pc_err_set(struct pc_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* As pc_err_set, with an input location. */
int pc_err_set_at(struct pc_err *err, int code, const char *file, unsigned line, unsigned col,
		  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* As pc_err_set, appending ": strerror(errno)". */
int pc_err_errno(struct pc_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix the message already in err with more context ("loading X: "). */
void pc_err_prefix(struct pc_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Render "file:line:col: msg" (or just msg) into buf; returns buf. */
const char *pc_err_str(const struct pc_err *err, char *buf, size_t len);
/* Short name of a PC_E* code ("invalid input", ...). */
const char *pc_strerror(int code);

/* Exit codes of every portcullis program (documented in the man pages). */
enum {
	PC_EXIT_OK = 0,	   /* success; for checks: proven / intact / valid */
	PC_EXIT_FAIL = 1,  /* a negative answer: lint errors, tampered log,
			      unproven containment, invalid certificate */
	PC_EXIT_USAGE = 2, /* bad command line */
	PC_EXIT_ERROR = 3, /* could not do the job: unreadable file, daemon
			      unreachable, no permission */
};
/* The exit code of a check of input that failed with code (a daemon's -t,
 * lint): PC_EXIT_FAIL when the input was read and is invalid (PC_EPARSE,
 * PC_EINVAL, PC_EREFUSED, PC_ETAMPER), PC_EXIT_ERROR when it could not be
 * read or the check not done (PC_ENOENT, PC_EIO, PC_EPERM, PC_ENOMEM ...). */
int pc_exit_for_check(int code);
/* A daemon's exit status for what its work returned (0 or a PC_E* code),
 * the one place each daemon's main turns a code into a status (the man
 * pages' EXIT STATUS): with -t (test), pc_exit_for_check; serving, every
 * failure is PC_EXIT_ERROR. Never negative. */
int pc_daemon_exit(int code, bool test);

/* ---- daemon logging (stderr; "<N>" level prefixes for the journal only) -- */

enum pc_loglevel {
	PC_LOG_ERR = 3,
	PC_LOG_WARN = 4,
	PC_LOG_NOTICE = 5,
	PC_LOG_INFO = 6,
	PC_LOG_DEBUG = 7
};

/* Set the program name used as prefix and the most verbose level shown,
 * and whether lines carry "<N>" priority prefixes: only when stderr is the
 * journal (pc_log_stderr_is_journal). Called once from main before threads
 * start, after stderr is where it stays. */
void pc_log_init(const char *prog, enum pc_loglevel max);
/* Is stderr the journal's stream: $JOURNAL_STREAM ("DEV:INODE", set by
 * systemd) names stderr's st_dev:st_ino. */
bool pc_log_stderr_is_journal(void);
void pc_log(enum pc_loglevel lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* CLI error: "portcullis: <what>: <why>" on stderr. */
void pc_cli_error(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- addresses --------------------------------------------------------- */

/* An IPv4 or IPv6 address; IPv4 uses the first 4 bytes of a. */
struct pc_addr {
	uint8_t family; /* AF_INET, AF_INET6, or 0 for "none" */
	uint8_t a[16];
};

/* Address and port (port in host byte order). */
struct pc_endpoint {
	struct pc_addr addr;
	uint16_t port;
};

/* A prefix: address + length in bits. */
struct pc_prefix {
	struct pc_addr addr;
	uint8_t len;
};

#define PC_ADDRSTRLEN 46 /* INET6_ADDRSTRLEN */

int pc_addr_parse(const char *s, struct pc_addr *out);
/* "1.2.3.4:53", "[2001:db8::1]:53"; a missing port is an error unless
 * default_port is non-zero. */
int pc_endpoint_parse(const char *s, uint16_t default_port, struct pc_endpoint *out);
/* "10.0.0.0/8", "2001:db8::/32"; a bare address means a host prefix.
 * Host bits set below the prefix length are an error (ambiguous intent). */
int pc_prefix_parse(const char *s, struct pc_prefix *out);
const char *pc_addr_str(const struct pc_addr *a, char *buf, size_t len);
const char *pc_endpoint_str(const struct pc_endpoint *e, char *buf, size_t len);
int pc_addr_eq(const struct pc_addr *x, const struct pc_addr *y);
int pc_prefix_contains(const struct pc_prefix *p, const struct pc_addr *a);
/* 1 when the two prefixes share at least one address. */
int pc_prefix_overlap(const struct pc_prefix *x, const struct pc_prefix *y);
size_t pc_addr_len(const struct pc_addr *a); /* 4, 16 or 0 */
/* Parse "02:00:5e:10:00:01" into 6 bytes. */
int pc_mac_parse(const char *s, uint8_t mac[6]);

/* Special-purpose address blocks (common/special.c): the IANA IPv4 and
 * IPv6 Special-Purpose Address Registries plus multicast and a few
 * deprecated blocks. name is short ("link-local"), rfc cites the entry
 * ("RFC 3927"); all static. */
struct pc_special {
	struct pc_prefix prefix;
	const char *text; /* the prefix as the registry writes it */
	const char *name;
	const char *rfc;
};
size_t pc_special_count(void);
const struct pc_special *pc_special_at(size_t i); /* NULL past the end */
/* The most specific entry containing a, or NULL. */
const struct pc_special *pc_special_find(const struct pc_addr *a);
/* When a is an IPv6 address that carries an IPv4 one in its last 32 bits
 * and is delivered to it (IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96),
 * writes it to *v4 (may be NULL) and says which ("IPv4-mapped", "NAT64");
 * NULL otherwise. */
const char *pc_addr_v4_embedded(const struct pc_addr *a, struct pc_addr *v4);

/* ---- host names (common/hostname.c) ----------------------------------- */

/* The one grammar of host names (docs/policy.md, "Host names"): at most
 * 253 characters, labels of 1 to 63 letters, digits, '-' and '_', none
 * starting or ending with '-', the last one not all digits; folded to
 * lower case. Where the forms differ, the form says which: */
enum pc_host_form {
	PC_HOST_NAME,	/* a DNS name (a query's, one looked up in the policy):
			   one trailing dot, the absolute form, is dropped */
	PC_HOST_POLICY, /* as a rule writes it: PC_HOST_NAME, or "*." and a
			   name of two labels or more */
	PC_HOST_SNI,	/* a TLS server_name as sent (RFC 6066 3): a trailing
			   dot is refused, not dropped */
	PC_HOST_HTTP,	/* an HTTP Host header: PC_HOST_NAME and an optional
			   ":port" (1..65535); no "[...]" literal */
};

#define PC_HOST_MAX 253 /* characters of a name without its trailing dot */

struct pc_host {
	char name[PC_HOST_MAX + 1]; /* lower case, without "*." or trailing dot */
	size_t len;		    /* strlen(name): 1..PC_HOST_MAX */
	uint16_t port;		    /* PC_HOST_HTTP: the port given, 0 when none */
	bool wildcard;		    /* PC_HOST_POLICY: it was "*.name" */
};

/* Check the name p[start..end) (not NUL-terminated; indices rather than a
 * pointer and a length so that EVA bounds every read by the enclosing
 * buffer, docs/prove.md) as a host name of the given form into *out.
 * Returns 0, PC_EINVAL for NULL arguments or end < start, PC_EPARSE when
 * the name is not one; then *why (may be NULL) is a static phrase saying
 * why ("it has an empty label ..."), for the caller to put in context. */
int pc_host_parse(const uint8_t *p, size_t start, size_t end, enum pc_host_form form,
		  struct pc_host *out, const char **why);
/* The same on a NUL-terminated string. */
int pc_host_parse_str(const char *s, enum pc_host_form form, struct pc_host *out, const char **why);

/* ---- UNIX SOCK_SEQPACKET sockets ---------------------------------------- */

/* Create, bind and listen on a SOCK_SEQPACKET socket at path, replacing a
 * stale socket file (never one a running process serves: PC_EEXIST); the
 * path appears only once the socket listens. mode is applied to the socket
 * file and owner/group set when not (uid_t)-1 / (gid_t)-1. fd or <0. */
int pc_unix_listen(const char *path, mode_t mode, uid_t owner, gid_t group, struct pc_err *err);
/* Connect a SOCK_SEQPACKET socket; non-blocking when nonblock. fd or <0. */
int pc_unix_connect(const char *path, int nonblock, struct pc_err *err);
/* The peer's credentials of a connected UNIX socket. */
int pc_unix_peercred(int fd, pid_t *pid, uid_t *uid, gid_t *gid, struct pc_err *err);

/* ---- privileges ---------------------------------------------------------- */

/* Look up a user; fills uid/gid. */
int pc_user_lookup(const char *user, uid_t *uid, gid_t *gid, struct pc_err *err);

/* Drop from root to user: supplementary groups, gid, uid, and then keep only
 * the capabilities in keep_caps (a bitmask of 1ULL << CAP_*; 0 keeps none) in
 * the permitted and effective sets; the bounding set is cleared of all others
 * and no_new_privs is set. Fails (and the caller must exit) if any step
 * fails or if root can be regained. */
int pc_privdrop(const char *user, uint64_t keep_caps, struct pc_err *err);
/* The same, also keeping keep_permitted in the permitted set only (not
 * effective): capabilities the process hands on to children it starts
 * (ambient), as the vault's monitor does with CAP_SETUID/CAP_SETGID for its
 * workers, without being able to use them itself unless it raises them. */
int pc_privdrop_permitted(const char *user, uint64_t keep_caps, uint64_t keep_permitted,
			  struct pc_err *err);

/* ---- small helpers --------------------------------------------------------- */

/* strlcpy: returns strlen(src); truncation when >= size. */
size_t pc_strlcpy(char *dst, const char *src, size_t size);
/* The name of v in a table of {value, name} pairs, dflt when it has none:
 * what would otherwise be a switch of returns, one per enum. */
struct pc_name {
	long v;
	const char *name;
};
const char *pc_name_of(const struct pc_name *t, size_t n, long v, const char *dflt);
#define PC_NAME_OF(t, v, dflt) pc_name_of((t), sizeof(t) / sizeof((t)[0]), (long)(v), (dflt))
/* The value of the hex digit c (either case), or -1 for any other character. */
int pc_hex_digit(char c);
/* Standard base64 with padding (RFC 4648 section 4) into out: 0 and
 * *outlen only when in is the one encoding of the bytes it decodes to,
 * else PC_EPARSE. libsodium 1.0.18's decoder reads every byte from 0x80
 * as '/', so two texts decoded to one signature or hash: a checkpoint line
 * whose bytes changed still verified. Every base64 the guard reads from a
 * file or a peer goes through here (tests/static/base64_strict.sh); only
 * the vault reads credentials as lenient decoders may (vault/http.c). */
int pc_b64_decode(void *out, size_t cap, const char *in, size_t len, size_t *outlen);
/* The n characters at s as an unsigned decimal with one spelling (digits
 * only: no sign, blank or leading zero; at most UINT64_MAX): 0 and *out,
 * else PC_EPARSE (common/decimal.c). */
int pc_dec_u64(const char *s, size_t n, uint64_t *out);
/* Read a whole file of at most max bytes; *buf is NUL-terminated, caller
 * frees. A file larger than max is an error, not a truncation. */
int pc_file_read(const char *path, size_t max, char **buf, size_t *len, struct pc_err *err);
/* va-holes: as pc_file_read, for files an administrator drops into a
 * directory the daemons read (rules.d, the secret store): only a regular
 * file is read; a FIFO, socket or device is an error naming the file. It
 * is opened with O_NONBLOCK, so that neither the open (a FIFO without a
 * writer) nor a read can wait, whatever the file is. */
int pc_file_read_regular(const char *path, size_t max, char **buf, size_t *len, struct pc_err *err);
/* Write all len bytes to fd, again after EINTR and short writes; -1 with
 * errno set (EIO for a write that makes no progress). */
int pc_write_all(int fd, const void *data, size_t len);
/* Write a file atomically (temp file + fsync + rename) with mode. */
int pc_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
			 struct pc_err *err);
/* Monotonic and wall clocks in milliseconds / nanoseconds. */
uint64_t pc_now_mono_ms(void);
uint64_t pc_now_mono_ns(void);
uint64_t pc_now_real_ms(void);
/* RFC 3339 UTC with milliseconds, "2026-11-29T14:02:13.123Z"; buf >= 25. */
const char *pc_time_rfc3339(uint64_t real_ms, char *buf, size_t len);

/* 32-bit FNV-1a, a byte at a time: the hash of the in-memory tables keyed
 * by short strings (names, event codes). Not keyed: only for tables whose
 * keys the sandbox does not choose, or that bound their probes. */
#define PC_FNV1A_INIT 2166136261u
static inline uint32_t pc_fnv1a_step(uint32_t h, unsigned char c)
{
	return (h ^ c) * 16777619u;
}

/* ---- text: growable buffer (common/buf.c) and JSON (common/json.c) ----- */

/* A byte and text buffer. Appends never return an error: the first failure
 * (PC_ENOMEM, or PC_EINVAL when the text would pass its limit) is kept in
 * err and every later append is a no-op, so a caller checks err once at
 * the end. A growable buffer's text is NUL-terminated after len. A
 * zeroed struct pc_buf is an empty growable buffer with the default limit.
 * PC_BUF_SECRET: the memory is wiped before it is freed or moved (growing
 * does not realloc), for buffers that may hold credentials. */
#define PC_BUF_MAX_DEFAULT ((size_t)64 << 20)
enum { PC_BUF_SECRET = 1 };
struct pc_buf {
	char *p;
	size_t len, cap;
	size_t max; /* the most bytes it may hold; 0: PC_BUF_MAX_DEFAULT */
	int err;    /* sticky: 0 or the first failure */
	unsigned flags;
	bool fixed; /* over caller memory (pc_buf_init_fixed) */
};
/* An empty growable buffer of at most max bytes (0: the default limit). */
void pc_buf_init(struct pc_buf *b, size_t max, unsigned flags);
/* A buffer over the caller's mem of size bytes: it never grows; a write
 * that does not fit fails (and is not made). The text is NUL-terminated
 * only while it is shorter than size. */
void pc_buf_init_fixed(struct pc_buf *b, void *mem, size_t size, unsigned flags);
/* Room for n more bytes (and a NUL) at p + len: 0, or the buffer's error.
 * A caller may write up to n bytes there itself and advance len (logd
 * formats a record straight into its batch); the text is then unterminated
 * until the next append. */
int pc_buf_reserve(struct pc_buf *b, size_t n);
/* pc_buf_put's path when the bytes and a NUL do not fit as things are. */
void pc_buf_put_grow(struct pc_buf *b, const void *data, size_t n);
/* Inline: logd formats every record with these (cross-file calls cost it a
 * third of its rate). The room check is enough: a buffer never has more
 * than its limit and a NUL allocated. */
static inline void pc_buf_put(struct pc_buf *b, const void *data, size_t n)
{
	if (!b->err && n < b->cap - b->len) {
		memcpy(b->p + b->len, data, n);
		b->len += n;
		b->p[b->len] = '\0';
		return;
	}
	pc_buf_put_grow(b, data, n);
}
static inline void pc_buf_puts(struct pc_buf *b, const char *s)
{
	pc_buf_put(b, s, strlen(s));
}
static inline void pc_buf_putc(struct pc_buf *b, char c)
{
	pc_buf_put(b, &c, 1);
}
void pc_buf_printf(struct pc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pc_buf_vprintf(struct pc_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
void pc_buf_u64(struct pc_buf *b, uint64_t v);		       /* decimal */
void pc_buf_hex(struct pc_buf *b, const void *data, size_t n); /* lower-case */
/* The text so far ("" when none, or a full fixed buffer's is unterminated). */
const char *pc_buf_str(const struct pc_buf *b);
/* Empty it (wiped when secret) and clear its error; keeps the memory. */
void pc_buf_reset(struct pc_buf *b);
/* The malloc'ed NUL-terminated text ("" when empty; caller frees) and its
 * length in *len (may be NULL); NULL after a failure or for a fixed
 * buffer. The buffer is empty (and growable) afterwards. */
char *pc_buf_take(struct pc_buf *b, size_t *len);
/* Release the memory (wiped first when secret); the buffer is an empty
 * growable one with the same limit and flags afterwards. NULL is a no-op. */
void pc_buf_free(struct pc_buf *b);
/* The same over a (malloc'ed string, length) pair, for callers that pass
 * those around (the engine's status JSON): append printf output, or s as a
 * JSON string literal (quotes included; NULL as ""). 0 or PC_ENOMEM; on
 * failure *buf is still valid. */
int pc_buf_appendf(char **buf, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int pc_buf_append_json(char **buf, size_t *len, const char *s);

/* The one JSON string escaper: the bytes of s (n of them) as the inside of
 * a JSON string. Quote and backslash by a backslash, newline, tab and
 * carriage return as \n \t \r, other control characters and DEL as
 * \u00xx (lower-case hex); every other byte as it is (the caller passes
 * UTF-8). The policy hash and the log's leaf hashes depend on these bytes:
 * they are pinned by tests/unit/check_checker_golden.c. */
void pc_json_escape(struct pc_buf *b, const char *s, size_t n);
/* s escaped between quotes; NULL as "". */
void pc_json_quote(struct pc_buf *b, const char *s);

/* A JSON writer: values, keys and containers in order; it places commas
 * and colons. Misuse (unbalanced ends, deeper than PC_JSON_DEPTH) sets the
 * buffer's error. */
#define PC_JSON_DEPTH 31
struct pc_json {
	struct pc_buf *b;
	unsigned depth;
	uint32_t more; /* bit d: the container at depth d has an item */
	bool after_key;
};
void pc_json_init(struct pc_json *j, struct pc_buf *b);
void pc_json_obj(struct pc_json *j);
void pc_json_obj_end(struct pc_json *j);
void pc_json_arr(struct pc_json *j);
void pc_json_arr_end(struct pc_json *j);
void pc_json_key(struct pc_json *j, const char *key);
void pc_json_str(struct pc_json *j, const char *s); /* NULL as "" */
void pc_json_strn(struct pc_json *j, const char *s, size_t n);
void pc_json_u64(struct pc_json *j, uint64_t v);
void pc_json_i64(struct pc_json *j, int64_t v);
void pc_json_bool(struct pc_json *j, bool v);
void pc_json_null(struct pc_json *j);
/* A value that is already JSON text, written as it is. */
void pc_json_raw(struct pc_json *j, const char *json);
/* A member: the key and its string / number value. */
void pc_json_kstr(struct pc_json *j, const char *key, const char *s);
void pc_json_ku64(struct pc_json *j, const char *key, uint64_t v);

/* ---- control sockets (common/ctlsock.c) --------------------------------- */

/* The reply to one request word ("metrics"): a malloc'ed string, or NULL to
 * close the connection without one. Runs on the control thread. */
typedef char *(*pc_ctl_fn)(void *ctx, const char *req);
struct pc_ctl;
/* Serve the listening socket fd (pc_unix_listen; ownership taken) on a
 * thread of its own: each connection sends one request within a second and
 * gets one reply, then is closed. root_only: peers other than uid 0 are
 * closed at once. Start it after pc_privdrop (no thread may exist then). */
int pc_ctl_start(int fd, bool root_only, pc_ctl_fn fn, void *ctx, struct pc_ctl **out,
		 struct pc_err *err);
void pc_ctl_stop(struct pc_ctl *c);
/* The client side: one request on the control socket at path, one reply
 * (at most max bytes, NUL-terminated, caller frees). */
int pc_ctl_request(const char *path, const char *req, int timeout_ms, size_t max, char **reply,
		   struct pc_err *err);

/* ---- typed local messages (common/msg.c, common/engmsg.c) -------------
 * The framing of every local binary protocol (logd.sock, engine.sock, the
 * engine's check helper channel): one message per SOCK_SEQPACKET record (or,
 * for logd, several back to back), an 8-byte header then the body, all
 * integers big-endian:
 *   u8 version | u8 type | u16 protocol id | u32 length (header included)
 * The protocol id tells the protocols apart (logd's is 0: its wire predates
 * the others and must not change). A body is fixed fields read at their
 * place, strings (u32 length, then that many bytes, no NUL) and, for logd,
 * tag-length-value fields (u8 tag, u16 length, value). Every read is
 * bounds-checked; a short message, a length past the end, another protocol
 * (PC_EPARSE) or another version (PC_EUNSUPP) is refused. */
#define PC_MSG_HDR_LEN 8

void pc_msg_put16(uint8_t *p, uint16_t v);
void pc_msg_put32(uint8_t *p, uint32_t v);
uint16_t pc_msg_get16(const uint8_t *p);
uint32_t pc_msg_get32(const uint8_t *p);

/* A message being written into buf (cap bytes; borrowed). The put calls
 * never fail: a field that does not fit sets overflow, which pc_msg_finish
 * reports. */
struct pc_msg_w {
	uint8_t *p;
	size_t cap, off;
	bool overflow;
};
void pc_msg_w_init(struct pc_msg_w *w, uint8_t *buf, size_t cap);
void pc_msg_put_u8(struct pc_msg_w *w, uint8_t v);
void pc_msg_put_u16(struct pc_msg_w *w, uint16_t v);
void pc_msg_put_u32(struct pc_msg_w *w, uint32_t v);
void pc_msg_put_u64(struct pc_msg_w *w, uint64_t v);
void pc_msg_put_str(struct pc_msg_w *w, const char *s, size_t n);
void pc_msg_put_tlv(struct pc_msg_w *w, uint8_t tag, const void *v, size_t n);
/* Write the header; the message's length, or PC_EINVAL when it overflowed
 * the buffer or is longer than max. */
int pc_msg_finish(struct pc_msg_w *w, uint16_t proto, uint8_t version, uint8_t type, size_t max);

/* A message being read (borrows buf). pc_msg_open checks the header against
 * len, proto and version and gives the type (the caller checks it). */
struct pc_msg_r {
	const uint8_t *p;
	size_t len, off;
};
int pc_msg_open(struct pc_msg_r *r, const uint8_t *buf, size_t len, uint16_t proto, uint8_t version,
		uint8_t *type, struct pc_err *err);
int pc_msg_get_u8(struct pc_msg_r *r, uint8_t *v, struct pc_err *err);
int pc_msg_get_u16(struct pc_msg_r *r, uint16_t *v, struct pc_err *err);
int pc_msg_get_u32(struct pc_msg_r *r, uint32_t *v, struct pc_err *err);
int pc_msg_get_u64(struct pc_msg_r *r, uint64_t *v, struct pc_err *err);
/* A string of at most max bytes without NUL: *s points into the message
 * (not NUL-terminated), *n is its length. */
int pc_msg_get_str(struct pc_msg_r *r, size_t max, const char **s, size_t *n, struct pc_err *err);
/* A string copied NUL-terminated into out (at most size - 1 bytes). */
int pc_msg_get_strcpy(struct pc_msg_r *r, char *out, size_t size, struct pc_err *err);
int pc_msg_get_tlv(struct pc_msg_r *r, uint8_t *tag, const uint8_t **v, size_t *n,
		   struct pc_err *err);
bool pc_msg_more(const struct pc_msg_r *r);
/* PC_EPARSE if bytes are left after the last field. */
int pc_msg_end(const struct pc_msg_r *r, struct pc_err *err);

/* engine.sock (<run_dir>/engine.sock; docs/engine.md, "Control socket").
 * Here, not in engine/, because the checker (below the engine) asks it too.
 * A request is a header alone (its type says what is asked); the reply is
 * one message of the matching reply type, or PC_ENG_ERROR. */
#define PC_ENGINE_SOCK	   "engine.sock"
#define PC_ENG_PROTO	   0x4543 /* "EC" */
#define PC_ENG_VERSION	   1
#define PC_ENG_MAX	   (1u << 22) /* largest reply (the metrics text; 1,000 sandboxes: ~3 MiB) */
#define PC_ENG_POLICY_MAX  128	      /* "sha256:<64 hex>", with room */
#define PC_ENG_MESSAGE_MAX 4096
enum pc_eng_type {
	PC_ENG_STATUS = 1, /* requests */
	PC_ENG_RELOAD = 2,
	PC_ENG_METRICS = 3,
	PC_ENG_RECHECK = 4,	     /* root: check containment again now (a cut-off may end) */
	PC_ENG_ERROR = 0x80,	     /* replies: code, message */
	PC_ENG_STATUS_REPLY = 0x81,  /* policy, check running, the status JSON */
	PC_ENG_RELOAD_REPLY = 0x82,  /* policy now in force */
	PC_ENG_METRICS_REPLY = 0x83, /* Prometheus text */
	PC_ENG_RECHECK_REPLY = 0x84, /* policy in force (a check was asked for) */
};
/* A reply. Strings are NUL-terminated; after pc_eng_reply_decode they point
 * into strings (freed by pc_eng_reply_free); for encoding they are
 * borrowed. Those the type does not carry are NULL. */
struct pc_eng_reply {
	enum pc_eng_type type;
	int code;	     /* ERROR: a negative PC_E* */
	const char *message; /* ERROR */
	const char *policy;  /* STATUS_REPLY, RELOAD_REPLY: "sha256:..." or "" */
	bool check_running;  /* STATUS_REPLY: a containment check is running */
	const char *json;    /* STATUS_REPLY: the status object, docs/engine.md */
	const char *text;    /* METRICS_REPLY */
	char *strings;
};
/* A request into buf (PC_MSG_HDR_LEN bytes at least): its length, or
 * PC_EINVAL. */
int pc_eng_request_encode(enum pc_eng_type type, uint8_t *buf, size_t len);
/* The request's type. PC_EUNSUPP: another version of the protocol;
 * PC_EPARSE: malformed or not a request type. */
int pc_eng_request_decode(const uint8_t *buf, size_t len, enum pc_eng_type *type,
			  struct pc_err *err);
/* A reply into a malloc'ed *buf of *len bytes. */
int pc_eng_reply_encode(const struct pc_eng_reply *r, uint8_t **buf, size_t *len,
			struct pc_err *err);
int pc_eng_reply_decode(const uint8_t *buf, size_t len, struct pc_eng_reply *out,
			struct pc_err *err);
void pc_eng_reply_free(struct pc_eng_reply *r);
/* One request on the engine's socket in run_dir, one reply (of the type
 * answering req, or PC_ENG_ERROR: the caller looks). <0 when the engine
 * could not be asked or its reply is malformed. */
int pc_engine_call(const char *run_dir, enum pc_eng_type req, int timeout_ms,
		   struct pc_eng_reply *out, struct pc_err *err);

/* ---- metrics: Prometheus text exposition format 0.0.4 (common/prom.c) ---- */

/* A growing text (a struct pc_buf); after a failure every call is a no-op
 * and pc_prom_take returns NULL. A zeroed struct pc_prom is empty. */
struct pc_prom {
	struct pc_buf buf;
};
/* "# HELP name help" and "# TYPE name type" (counter, gauge, ...). */
void pc_prom_family(struct pc_prom *b, const char *name, const char *type, const char *help);
/* One sample: name{labels} value; labels is the inside of the braces
 * (values escaped with pc_prom_label), NULL or "" for none. */
void pc_prom_u64(struct pc_prom *b, const char *name, const char *labels, uint64_t v);
void pc_prom_f64(struct pc_prom *b, const char *name, const char *labels, double v);
/* A family with its one unlabelled sample: pc_prom_family, then
 * pc_prom_u64/pc_prom_f64 under the same name. */
void pc_prom_one_u64(struct pc_prom *b, const char *name, const char *type, const char *help,
		     uint64_t v);
void pc_prom_one_f64(struct pc_prom *b, const char *name, const char *type, const char *help,
		     double v);
/* A table of counters, one row a sample: the uint64_t at offset off of
 * base (atomic: an _Atomic uint64_t, read with atomic_load); a row with a
 * type opens its family first (help and type, as pc_prom_family). */
struct pc_prom_row {
	const char *name, *type, *help, *labels;
	size_t off;
};
void pc_prom_rows(struct pc_prom *b, const struct pc_prom_row *rows, size_t n, void *base,
		  bool atomic);
/* v escaped as a label value (backslash, quote, newline) into buf. */
const char *pc_prom_label(const char *v, char *buf, size_t len);
/* The text (caller frees; "" when empty), or NULL after a failure. */
char *pc_prom_take(struct pc_prom *b);
/* ad-guard (issue 18): the calling process's process_* families as the
 * Prometheus client libraries name them (process_cpu_seconds_total,
 * process_open_fds, process_max_fds, process_virtual_memory_bytes,
 * process_resident_memory_bytes, process_start_time_seconds), from /proc;
 * none when /proc cannot be read. */
void pc_prom_process(struct pc_prom *b);
/* ad-guard: n expositions (texts[i] may be NULL: skipped) as one: the
 * samples of a family found in several (process_*) are grouped under one
 * HELP/TYPE, each with label[i] (e.g. daemon="engine") added. Malloc'ed,
 * or NULL (out of memory). */
char *pc_prom_merge(char *const *texts, const char *const *label, size_t n);

/* ---- packets as bytes (common/wire.c) ------------------------------------ */

/* What a sandbox would send, built for `policy test` and the tests; every
 * builder writes at b (the caller makes room) and returns the length.
 * An IPv4 (20 bytes) or IPv6 (40 bytes) header by s's family, before
 * l4len bytes of proto, hop as TTL or hop limit; checksum left 0. */
size_t pc_wire_ip(uint8_t *b, uint8_t proto, size_t l4len, uint8_t hop, const struct pc_addr *s,
		  const struct pc_addr *d);
/* A TCP header, 20 bytes, no options, window and checksum 0. */
size_t pc_wire_tcp(uint8_t *b, uint16_t sp, uint16_t dp, uint8_t flags, uint32_t seq, uint32_t ack);
/* name in DNS labels, no compression; 0 if no DNS name can carry it (an
 * empty or 64-byte label, over 253 bytes); b must hold strlen(name)+2. */
size_t pc_wire_name(uint8_t *b, const char *name);
/* A DNS header and one question (class IN): a query, or with answer set the
 * head of a response announcing an records the caller appends; 0 if the
 * name cannot be carried. */
size_t pc_wire_dns_question(uint8_t *b, uint16_t id, bool answer, uint16_t an, const char *name,
			    uint16_t qtype);
/* An A or AAAA record (by a's family) for the question's name, TTL 300. */
size_t pc_wire_dns_addr(uint8_t *b, const struct pc_addr *a);
/* The smallest TLS ClientHello the engine's parser takes, naming sni (NULL:
 * no server_name extension); b must hold 60 bytes more than the name. */
size_t pc_wire_client_hello(uint8_t *b, const char *sni);

/* ---- systemd ------------------------------------------------------------- */

/* Tell systemd the daemon's state (sd_notify protocol): "READY=1" once the
 * daemon serves (sockets bound, table installed), "RELOADING=1" /
 * "STOPPING=1", "STATUS=...". Returns 0 without doing anything when
 * $NOTIFY_SOCKET is unset (not started by systemd); <0 if sending failed.
 * Call from the main thread/process (the units set NotifyAccess=main). */
int pc_sd_notify(const char *state, struct pc_err *err);

#endif
