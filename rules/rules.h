/* rules: what network admins edit — the appliance configuration
 * (portcullis.yaml) and the sandbox policy (rules.d/NAME.yaml) — loaded with
 * libyaml, validated with file:line:col errors, and compiled into one
 * immutable policy with the lookups the engine, DNS guard, vault and checker
 * need. docs/policy.md is the admin's reference for every key.
 *
 * Threads: a compiled policy is never modified after policy_load*() returns;
 * any number of threads may read it. It is reference counted so that a
 * reload can swap it while readers finish with the old one. */
#ifndef PC_RULES_H
#define PC_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"

/* ======================================================================
 * Appliance configuration: /etc/portcullis/portcullis.yaml
 * ====================================================================== */

#define RULES_MAX_RESOLVERS 8
#define RULES_MAX_UPLINKS   8  /* uplinks: interfaces toward the upstream network */
#define RULES_MAX_ROUTABLE  32 /* dns.routable entries */
/* Bounds of limits.new_flows_per_second / new_flows_burst (config and
 * sandbox): at least 1 (a sandbox always may open a flow), at most what
 * the kernel's token bucket represents without overflow, far above any
 * gateway's rate. */
#define RULES_LIMIT_RATE_MAX	  1000000
#define RULES_LIMIT_BURST_MAX	  1000000
#define RULES_LIMIT_RATE_DEFAULT  1000
#define RULES_LIMIT_BURST_DEFAULT 2000

/* DNS query types a sandbox may ask for, as a bitmask. */
enum qtype_bit {
	QT_A = 1u << 0,
	QT_AAAA = 1u << 1,
	QT_CNAME = 1u << 2,
	QT_HTTPS = 1u << 3,
	QT_SVCB = 1u << 4,
	QT_TXT = 1u << 5,
	QT_MX = 1u << 6,
	QT_SRV = 1u << 7,
	QT_PTR = 1u << 8,
	QT_NS = 1u << 9,
	QT_CAA = 1u << 10,
	QT_DEFAULT = QT_A | QT_AAAA | QT_CNAME | QT_HTTPS | QT_SVCB,
};
/* Map a DNS RR type number to its bit (0 when not representable). */
uint32_t rules_qtype_bit(uint16_t rrtype);

enum dns_refuse { DNS_REFUSE_REFUSED = 0, DNS_REFUSE_NXDOMAIN = 1 };

struct config {
	char path[PC_PATH_MAX];	  /* file loaded */
	char bridge[PC_IFNAMSIZ]; /* bridge: sandbox bridge, default "pcbr0" */
	/* uplinks: the interfaces toward the upstream network; the only ones
	 * besides the bridge (and lo) whose packets the gateway forwards. No
	 * default: portcullisd refuses to start without it (docs/engine.md). */
	char uplinks[RULES_MAX_UPLINKS][PC_IFNAMSIZ];
	size_t n_uplinks;
	char rules_dir[PC_PATH_MAX]; /* rules: default /etc/portcullis/rules.d */
	char run_dir[PC_PATH_MAX];   /* run_dir: sockets, default /run/portcullis */
	char state_dir[PC_PATH_MAX]; /* state_dir: default /var/lib/portcullis */

	struct {
		uint16_t base;	 /* queue.base: first NFQUEUE number, default 100 */
		uint16_t count;	 /* queue.count: queues/threads, default 2 */
		uint32_t maxlen; /* queue.maxlen: kernel queue length, default 4096 */
	} queue;

	struct {
		char user[64];		 /* engine.user: default "portcullis" */
		bool remove_on_exit;	 /* engine.remove_table_on_exit: default false */
		uint32_t flows_max;	 /* engine.flows_max: default 262144 */
		uint32_t sni_timeout_ms; /* engine.sni_timeout_ms: default 3000 */
		/* engine.recheck_interval_s: a containment check when none ran
		 * for this long (changes no event announces); 0 off; default 60 */
		uint32_t recheck_s;
		/* ad-guard (issue 18): the HTTP /metrics listener. metrics_port:
		 * 0 (default) off, else 127.0.0.1:port; metrics_listen: another
		 * "address:port" (an IP literal), "" (default) for that one */
		uint16_t metrics_port;
		char metrics_listen[64];
	} engine;

	struct {
		/* limits.*: each sandbox's default new-flow limit, enforced in
		 * the kernel before the queue (docs/engine.md, "New-flow limit") */
		uint32_t new_flows_per_second; /* RULES_LIMIT_RATE_DEFAULT */
		uint32_t new_flows_burst;      /* RULES_LIMIT_BURST_DEFAULT */
	} limits;

	struct {
		struct pc_addr resolvers[RULES_MAX_RESOLVERS]; /* dns.resolvers */
		size_t n_resolvers;
		uint32_t qtypes;	      /* dns.qtypes: default QT_DEFAULT */
		enum dns_refuse refuse;	      /* dns.refuse_with: refused|nxdomain */
		uint32_t ttl_min, ttl_max;    /* dns.ttl_min/ttl_max (s): 30 / 3600 */
		uint32_t grace;		      /* dns.grace (s): default 60 */
		uint32_t learned_per_sandbox; /* dns.max_learned_per_sandbox: 4096 */
		uint32_t learned_total;	      /* dns.max_learned_total: 100000 */
		/* dns.routable: special-purpose ranges (each inside one entry of
		 * pc_special_*) this network routes like the internet; answers
		 * in them are learned. Default none (docs/dnsguard.md). */
		struct pc_prefix routable[RULES_MAX_ROUTABLE];
		size_t n_routable;
	} dns;

	struct {
		struct pc_endpoint listen;	/* vault.listen: default 0.0.0.0:8443 */
		char ca_dir[PC_PATH_MAX];	/* vault.ca_dir */
		char secrets[PC_PATH_MAX];	/* vault.secrets: sealed store directory */
		char trust[PC_PATH_MAX];	/* vault.trust: CA bundle for upstream */
		char user[64];			/* vault.user: default "portcullis-vault" */
		char worker_user[64];		/* vault.worker_user: "portcullis-vworker" */
		uint32_t max_conns_per_sandbox; /* vault.max_conns_per_sandbox: 64 */
		uint32_t max_header_bytes;	/* vault.max_header_bytes: 32768 */
		uint32_t handshake_timeout_ms;	/* vault.handshake_timeout_ms: 10000 */
		uint32_t idle_timeout_ms;	/* vault.idle_timeout_ms: 60000 */
		uint32_t request_timeout_ms;	/* vault.request_timeout_ms: 60000 */
	} vault;

	struct {
		char socket[PC_PATH_MAX];    /* log.socket: default <run_dir>/logd.sock */
		char file[PC_PATH_MAX];	     /* log.file: /var/log/portcullis/verdicts.jsonl */
		char key[PC_PATH_MAX];	     /* log.key: /var/lib/portcullis/log.key */
		char user[64];		     /* log.user: default "portcullis-log" */
		uint32_t checkpoint_records; /* log.checkpoint.records: 1000 */
		uint32_t checkpoint_ms;	     /* log.checkpoint.interval_ms: 1000 */
		uint64_t rotate_bytes;	     /* log.rotate_bytes: 0 = never */
		bool fsync_batch;	     /* log.fsync_batch: fdatasync every batch before
					       acknowledging it; default false (at checkpoints) */
		struct {
			bool local;		  /* log.syslog.local: default true */
			char remote[256];	  /* log.syslog.remote: "host:port" or "" */
			bool tls;		  /* log.syslog.tls */
			char ca[PC_PATH_MAX];	  /* log.syslog.ca: collector CA bundle */
			uint32_t spool_records;	  /* log.syslog.spool: default 100000 */
			char socket[PC_PATH_MAX]; /* log.syslog.socket: local, default /dev/log */
			uint8_t facility;	  /* log.syslog.facility: default 16 (local0) */
			uint32_t pen;		  /* log.syslog.enterprise_number (SD-ID) */
		} syslog;
		struct {
			/* the witness (docs/logd.md "Witness and consistency proofs") */
			char address[256];     /* log.witness.address: "host:port" or "" */
			char key[PC_PATH_MAX]; /* log.witness.key: its cosignature/v1 public key */
			bool required;	       /* log.witness.required: fail closed without it */
			uint32_t max_lag_ms;   /* log.witness.max_lag_ms: 10000 */
		} witness;
	} log;

	struct {
		/* `portcullis sandbox run|attach` (cli/sandbox*.c): where
		 * sandbox addresses come from — family 0 (the default): the
		 * bridge's own subnet — and who runs the command */
		struct pc_prefix pool4; /* sandbox.pool4: an IPv4 prefix */
		struct pc_prefix pool6; /* sandbox.pool6: an IPv6 prefix */
		char user[64];		/* sandbox.user: default "nobody" */
	} sandbox;
};

/* Load and validate a configuration file. Unknown keys, wrong types and bad
 * values are errors with file:line:col. Paths left unset are derived from
 * run_dir/state_dir; relative paths are taken relative to the directory of
 * the configuration file. On error *cfg is untouched. */
int config_load(const char *path, struct config *cfg, struct pc_err *err);
/* uplinks set, and naming neither the bridge nor lo: what portcullisd
 * requires at start (one of config_start_check's reasons). PC_EINVAL, the
 * message without the file's name. */
int config_uplinks_valid(const struct config *cfg, struct pc_err *err);

/* The daemons whose start a configuration can stop. */
enum config_daemon {
	CFGD_ENGINE = 1u << 0, /* portcullisd */
	CFGD_VAULT = 1u << 1,  /* portcullis-vault */
	CFGD_LOGD = 1u << 2,   /* portcullis-logd */
	CFGD_ALL = 7u,
};
/* Called once per reason; e is PC_EINVAL with the file:line:col of the key
 * (1:1 for a default) and a message naming the daemons that would refuse. */
typedef void (*config_refusal_fn)(const struct pc_err *e, void *arg);
/* What stops the daemons of mask (CFGD_*) from starting that the
 * configuration decides, with this machine's users: uplinks, and each
 * daemon's user (missing, root, or one shared where logd or the vault needs
 * them apart). The one list: each daemon checks it at start and with -t,
 * and `policy lint` reports it, as errors, for all three. Each reason goes
 * to report (may be NULL); returns 0 when there is none, else PC_EINVAL
 * with the first in err. */
int config_start_check(const struct config *cfg, unsigned mask, config_refusal_fn report, void *arg,
		       struct pc_err *err);

/* ======================================================================
 * Policy: /etc/portcullis/rules.d/NAME.yaml
 * ====================================================================== */

#define POLICY_NAME_MAX 64  /* sandbox and secret names */
#define POLICY_HOST_MAX 254 /* a DNS name without its trailing dot, plus NUL */

enum policy_proto {
	POLICY_PROTO_TCP = 1 << 0,
	POLICY_PROTO_UDP = 1 << 1,
	POLICY_PROTO_ANY = POLICY_PROTO_TCP | POLICY_PROTO_UDP,
};

/* Which packets belong to a sandbox. Every field given must match. */
struct policy_match {
	struct pc_prefix *sources; /* match.source: one or more prefixes */
	size_t n_sources;
	bool has_mac;
	uint8_t mac[6];		/* match.mac */
	char port[PC_IFNAMSIZ]; /* match.port: bridge port name, "" if unset */
};

/* A port range; a single port has lo == hi. */
struct policy_portrange {
	uint16_t lo, hi;
};

enum policy_allow_kind { POLICY_ALLOW_HOST, POLICY_ALLOW_WILDCARD, POLICY_ALLOW_CIDR };

struct policy_allow {
	enum policy_allow_kind kind;
	/* HOST: lower-case name, no trailing dot ("api.github.com").
	 * WILDCARD: the suffix after "*." ("githubusercontent.com"); it matches
	 * names with one or more labels before the suffix, not the suffix itself. */
	char host[POLICY_HOST_MAX];
	struct pc_prefix cidr;		/* CIDR */
	struct policy_portrange *ports; /* ports: [443, "8000-8080"] */
	size_t n_ports;
	unsigned proto;	  /* enum policy_proto bits; default TCP */
	char rule[96];	  /* stable name for logs: "agent-1/allow[2]" (0-based, file order) */
	const char *file; /* where it was written (borrowed from the policy) */
	unsigned line;
	unsigned vline, vcol; /* where its host or cidr value is written (lint) */
};

struct policy_secret {
	char name[POLICY_NAME_MAX]; /* GITHUB_TOKEN: [A-Z][A-Z0-9_]* */
	char host[POLICY_HOST_MAX]; /* exact host it is bound to (no wildcard) */
	uint16_t port;		    /* port: default 443 */
	char header[64];	    /* header: default "Authorization" */
	char format[256];	    /* format: default "Bearer {secret}" */
	unsigned line, col;	    /* where its port (else the secret) is written (lint) */
};

struct policy_index; /* private to rules/ */

struct policy_sandbox {
	char name[POLICY_NAME_MAX];
	struct policy_match match;
	struct policy_allow *allow;
	size_t n_allow;
	struct policy_secret *secrets;
	size_t n_secrets;
	uint32_t dns_qtypes;	       /* dns.qtypes, else the config's */
	enum dns_refuse dns_refuse;    /* dns.refuse_with, else the config's */
	uint32_t new_flows_per_second; /* limits.new_flows_per_second, else the config's */
	uint32_t new_flows_burst;      /* limits.new_flows_burst, else the config's */
	const char *file;	       /* rule file it came from */
	unsigned line;		       /* where its "sandbox:" key is */
	/* Lookup structures, private to rules/. NULL in a sandbox built by hand
	 * (tests): the lookups then scan the entries in order. */
	const struct policy_index *index;
};

struct policy; /* opaque, immutable, refcounted */

/* Load every NAME.yaml file in dir (sorted by name; dot files and other
 * names are ignored, a NAME.yml is an error) and compile them into one
 * policy (policy_load_files in rules_int.h: the given files). cfg supplies defaults (qtypes,
 * refuse); may be NULL for built-in defaults. Any error anywhere rejects the whole policy: *out is
 * only written on success. */
int policy_load_dir(const char *dir, const struct config *cfg, struct policy **out,
		    struct pc_err *err);
/* The same, for a reload: a rule file whose path, bytes and defaults are
 * those of one of prev's (the policy in force; NULL: none) takes prev's
 * parse of it, shared, instead of parsing it again. The checks across
 * sandboxes run as always, and the result is the policy policy_load_dir
 * would give, byte for byte in its canonical form. */
int policy_load_dir_since(const char *dir, const struct config *cfg, const struct policy *prev,
			  struct policy **out, struct pc_err *err);

/* Reference counting (atomic). policy_unref frees at zero; NULL is a no-op. */
struct policy *policy_ref(struct policy *p);
void policy_unref(struct policy *p);

/* "sha256:<64 hex>" of the canonical form; borrowed, lives as the policy. */
const char *policy_hash(const struct policy *p);

size_t policy_sandbox_count(const struct policy *p);
/* Sandboxes are in name order (strcmp); pointers live as the policy. */
const struct policy_sandbox *policy_sandbox_at(const struct policy *p, size_t i);
const struct policy_sandbox *policy_sandbox_by_name(const struct policy *p, const char *name);

/* What is known about a packet's sender. Unknown fields: family 0,
 * has_mac false, port "". */
struct policy_src {
	struct pc_addr addr;
	bool has_mac;
	uint8_t mac[6];
	char port[PC_IFNAMSIZ];
};
/* The sandbox this sender belongs to, or NULL (then: refuse). */
const struct policy_sandbox *policy_sandbox_match(const struct policy *p,
						  const struct policy_src *src);

/* The one sandbox whose match.source contains addr, whatever its mac and
 * port selectors; NULL when none does, or when several do (sources may
 * overlap between sandboxes told apart by MAC or port: ambiguous, refuse).
 * For a process that sees only the address of a flow the engine already
 * attributed with every selector, and whose bridge table binds each port's
 * and MAC's addresses at layer 2: the vault. */
const struct policy_sandbox *policy_sandbox_by_source(const struct policy *p,
						      const struct pc_addr *addr);

/* The first sandbox, in index order from *from on, one of whose
 * match.source prefixes contains addr, whatever its mac and port
 * selectors; *from moves past it (to policy_sandbox_count when there is
 * none, then NULL). For the engine's questions about a destination or an
 * answer's receiver ("is this a sandbox?"; sources may overlap between
 * sandboxes told apart by MAC or port: the next one). Cost: the address's
 * length and the sandboxes whose sources contain it, through the policy's
 * trie of sources — never a scan of the sandboxes (issue 20: a gateway of
 * 1,000 sandboxes pays per new flow what a gateway of one does). */
const struct policy_sandbox *policy_sandbox_by_addr_from(const struct policy *p,
							 const struct pc_addr *addr, size_t *from);

/* Allow entries: allowed when any entry matches; *rule (may be NULL) is set
 * to the first matching entry in file order. proto is IPPROTO_TCP or
 * IPPROTO_UDP. Names are compared case-insensitively, a trailing dot
 * ignored. Cost must not grow with the number of entries: hash lookups per
 * name suffix and a longest-prefix structure per family (the engine calls
 * these for every new flow; bench target: a 10,000-entry policy within 0.9x
 * of a 10-entry one). */
bool policy_cidr_allows(const struct policy_sandbox *sb, const struct pc_addr *dst, uint8_t proto,
			uint16_t port, const struct policy_allow **rule);
/* Whether a cidr entry of sb contains dst, whatever its ports and protocol
 * (the DNS guard's question: did the operator open this special-purpose
 * address to this sandbox explicitly?). *rule as above. */
bool policy_cidr_covers(const struct policy_sandbox *sb, const struct pc_addr *dst,
			const struct policy_allow **rule);
bool policy_host_allows(const struct policy_sandbox *sb, const char *name, uint8_t proto,
			uint16_t port, const struct policy_allow **rule);
/* Whether any host/wildcard entry names this host, whatever its ports (the
 * DNS guard's question: may this sandbox resolve it?). */
bool policy_name_allowed(const struct policy_sandbox *sb, const char *name,
			 const struct policy_allow **rule);

/* The secret of this sandbox bound to host:port, or NULL; when several
 * are bound there, the first by name. Compiled secrets are in name order. */
const struct policy_secret *policy_secret_for(const struct policy_sandbox *sb, const char *host,
					      uint16_t port);
const struct policy_secret *policy_secret_by_name(const struct policy_sandbox *sb,
						  const char *name);

/* Validate a DNS host name or "*."-wildcard as policy files write them;
 * used by the CLI for --allow. Writes the normalized form on success:
 * lower case, no trailing dot, and for "*.suffix" only the suffix, with
 * *wildcard set (as in struct policy_allow). */
int policy_host_normalize(const char *in, char *out, size_t outlen, bool *wildcard,
			  struct pc_err *err);

/* ======================================================================
 * The policy store: <state_dir>/policies/sha256:<hex>, the canonical form
 * of every policy a daemon puts in force (polstore.c; docs/policy.md,
 * "Policies kept by hash")
 * ====================================================================== */

/* At a daemon's start, as root: create the store directory if it is
 * missing (owner engine.user, group vault.user's primary group, 01775, so
 * that both daemons can add to it after their drop and neither can remove
 * what the other stored). An existing one must be a directory, not a
 * symbolic link (PC_EREFUSED). */
int polstore_prepare(const struct config *cfg, struct pc_err *err);

/* Store p in cfg's store before it goes in force: written to a temporary
 * file, fsynced and linked to its name; a file already under the name is
 * read and hashed again and must hold the same text (PC_ETAMPER if not,
 * PC_EREFUSED if it is not a regular file). Never replaces nor deletes a
 * stored policy. */
int polstore_put_cfg(const struct config *cfg, const struct policy *p, struct pc_err *err);

/* ======================================================================
 * CLI
 * ====================================================================== */

/* `portcullis policy lint [FILE...]`, `policy hash` and `policy show`; argv[0]
 * is "policy". Returns a PC_EXIT_* code. docs/policy.md describes both. */
int rules_cli(int argc, char **argv, const char *config);

/* `portcullis config show [--json]` (config_show.c): the effective
 * configuration, every key with its value and where it came from; argv[0]
 * is "config". Returns a PC_EXIT_* code. */
int config_cli(int argc, char **argv, const char *config);

#endif
