/* Internal to cli/: the pieces the sandbox launcher's files (`portcullis
 * sandbox run|attach`, sandbox*.c) share. Private to cli/; docs/sandbox.md is the
 * admin's description. The launcher is an admin tool run as root on the
 * gateway, never part of the guard: everything it sets up is checked by
 * the engine's policy and the checker like any hand-made sandbox. */
#ifndef PC_CLI_INT_H
#define PC_CLI_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "cli/cli.h"
#include "common/pc.h"
#include "nft/nft.h"
#include "logd/logd.h"
#include "rules/rules.h"
#include "vault/vault.h"

#define SB_MAX_ALLOW   64
#define SB_MAX_SECRETS 16
#define SB_MAX_ENV     32
#define SB_PEER_IFNAME "eth0" /* the sandbox's side of its veth */

/* One --allow / --allow-cidr. */
struct sb_allow {
	bool cidr;
	char host[POLICY_HOST_MAX + 2]; /* as the rule file writes it ("*.x" kept) */
	struct pc_prefix prefix;
	char ports[16];	   /* "443" or "8000-8080" */
	const char *proto; /* "tcp", "udp", "any" (static strings) */
};

/* One --secret NAME[@HOST[:PORT]]. */
struct sb_secret {
	char name[VAULT_NAME_MAX];
	char host[POLICY_HOST_MAX];
	uint16_t port;
	char placeholder[VAULT_PH_MAX];
};

/* The bridge as the launcher needs it: its index and its own addresses
 * (the sandboxes' router; family 0 when it has none of that family). */
struct sb_bridge {
	uint32_t ifindex;
	struct pc_prefix net4, net6; /* the bridge's address with its prefix length */
};

/* Everything one launch asked for and set up; torn down in reverse. */
struct sb {
	/* asked */
	char name[POLICY_NAME_MAX];
	bool attach;
	char port[PC_IFNAMSIZ]; /* bridge port: our veth's gateway side, or the VM's tap */
	bool has_mac;
	uint8_t mac[6];
	struct pc_addr want4, want6; /* attach --address (family 0: from the pool) */
	struct sb_allow allow[SB_MAX_ALLOW];
	size_t n_allow;
	struct sb_secret secrets[SB_MAX_SECRETS];
	size_t n_secrets;
	char user[64];		     /* "" in attach mode: the launcher's own credentials */
	const char *env[SB_MAX_ENV]; /* --env NAME=VALUE (borrowed from argv) */
	size_t n_env;
	const char *cert_out; /* --cert FILE, or NULL for the default */
	char **cmd;	      /* borrowed from argv; NULL: attach without a command */
	bool quiet;
	const char *config;
	/* run --vm (sandbox_vm.c) */
	bool vm;
	const char *vm_kernel, *vm_initrd; /* NULL: <state_dir>/vm/{vmlinuz,initrd.img} */
	char vm_kernel_buf[PC_PATH_MAX + 32], vm_initrd_buf[PC_PATH_MAX + 32];
	unsigned vm_mem, vm_cpus; /* MiB, vCPUs */
	const char *vm_accel;	  /* --accel: NULL or "auto" (the default), "kvm", "tcg" */
	bool vm_kvm;		  /* the accelerator chosen (sbvm_accel): KVM, else TCG */
	char vm_accel_why[160];	  /* how it was chosen, for the output and the log */
	int vm_tap_fd;		  /* the tap, open while the sandbox lives; or -1 */

	/* set up */
	struct config cfg;
	struct sb_bridge br;
	struct pc_addr addr4, addr6;
	int netns_fd;		    /* run: the sandbox's network namespace, or -1 */
	bool port_created;	    /* run: we made the veth */
	bool port_enslaved;	    /* attach: we put the port on the bridge */
	char dir[PC_PATH_MAX + 96]; /* <run_dir>/sandbox/<name> */
	bool dir_made;
	char rule_file[PC_PATH_MAX + 96];
	bool rule_written;
	bool vault_needed;
	char cert_path[PC_PATH_MAX * 2];
	struct logc *lc;
	uint64_t seq_first, seq_last;
	uint64_t log_off; /* log.file size before our first record */
	dev_t log_dev;
	ino_t log_ino;
	int lock_fd;
};

/* ---- sandbox_vm.c: run --vm ------------------------------------------- */

/* A tap named name, open on *fd (O_CLOEXEC); it lives while a descriptor
 * is open (the launcher's, then QEMU's). */
int sbvm_tap_add(const char *name, int *fd, struct pc_err *err);
/* Choose the accelerator (s->vm_kvm, s->vm_accel_why) from --accel: auto
 * probes KVM by booting the guest image under it with a timeout (a KVM that
 * opens but hangs the guest exists: nested virtualisation) and falls back to
 * TCG; the answer is kept for this host's boot in <run_dir>/vm-accel. */
void sbvm_accel(struct sb *s);
/* Boot the VM on s->port, run s->cmd in it with its console on stdout;
 * *status is the command's exit status (128+15 when stopped by a signal). */
int sbvm_run(const struct sb *s, int *status, struct pc_err *err);

/* ---- sandbox_args.c: the command line ---------------------------------- */

extern const char sb_usage[];
/* Fill what was asked (name, allow, secrets, options, the command) from
 * argv (argv[0] is "run" or "attach"). 0, 1 after --help, <0 on a usage
 * error described in err. */
int sbargs_parse(struct sb *s, int argc, char **argv, struct pc_err *err);

/* ---- sandbox_net.c: rtnetlink and the engine's port set ---------------- */

/* The bridge named name in this network namespace: PC_ENOENT when there is
 * none, PC_EINVAL when the link is not a bridge. */
int sbnet_bridge_get(const char *name, struct sb_bridge *out, struct pc_err *err);
/* The first global address of each family on link name (family 0: none). */
int sbnet_link_addrs(const char *name, struct pc_prefix *v4, struct pc_prefix *v6,
		     struct pc_err *err);
/* A new network namespace (fd, O_CLOEXEC) with its loopback up; the caller
 * stays in its own. */
int sbnet_netns_new(int *fd, struct pc_err *err);
/* A veth pair: port here, SB_PEER_IFNAME with mac inside netns_fd. */
int sbnet_veth_add(const char *port, int netns_fd, const uint8_t mac[6], struct pc_err *err);
/* Put port on the bridge (unless it is already there; *enslaved says
 * whether we did), isolated, up. Refuses a port held by another bridge. */
int sbnet_port_attach(const char *port, uint32_t br_ifindex, bool *enslaved, struct pc_err *err);
/* Take port off its bridge (attach teardown). */
int sbnet_port_release(const char *port, struct pc_err *err);
/* Delete a link (its veth peer goes with it). Missing is not an error. */
int sbnet_link_del(const char *name, struct pc_err *err);
/* Kind of an existing link ("veth", "tun", "bridge"...; "" when none). */
int sbnet_link_kind(const char *name, char *kind, size_t len, uint32_t *ifindex, uint32_t *master,
		    struct pc_err *err);
/* Inside netns_fd: SB_PEER_IFNAME up with a4/p4 and a6/p6 (family 0:
 * skipped), default routes via gw4/gw6. */
int sbnet_sandbox_config(int netns_fd, const struct pc_addr *a4, uint8_t p4,
			 const struct pc_addr *gw4, const struct pc_addr *a6, uint8_t p6,
			 const struct pc_addr *gw6, struct pc_err *err);
/* What a sandbox's network namespace holds, as read by the launcher: its
 * links (names), routes (text) and the links other than lo and its own
 * interface (want_ifindex, or by name want_name), which make a second way
 * in or out that the guard does not see. */
struct sbnet_inv {
	char links[256];  /* "lo, eth0" */
	char routes[512]; /* "default via 10.203.0.1 dev eth0; 10.203.0.0/24 dev eth0" */
	char extra[256];  /* "eth1 (dummy), ..." */
	int n_links, n_extra;
	bool found; /* its own interface is there */
};
int sbnet_netns_inventory(int netns_fd, uint32_t want_ifindex, const char *want_name,
			  struct sbnet_inv *inv, struct pc_err *err);
/* The namespace of veth port's peer (attach): an fd (O_CLOEXEC, the
 * caller's), the peer's ifindex there and where it was found (/run/netns
 * or a process); PC_ENOENT when port is not a veth to another namespace
 * or no process or bind mount holds that namespace. */
int sbnet_peer_netns(const char *port, int *fd, uint32_t *peer_ifindex, char *where, size_t len,
		     struct pc_err *err);
/* Is ifindex in the engine's bridge port set (table bridge portcullis, set
 * ports)? PC_ENOENT when the table or set is missing. */
int sbnet_port_in_set(uint32_t ifindex, bool *in, struct pc_err *err);

/* ---- sandbox_files.c: the rule file, the sandbox's files, addresses ---- */

/* Take <run_dir>/sandbox/lock (flock, blocking); fd or <0. */
int sbfile_lock(const struct config *cfg, struct pc_err *err);
void sbfile_unlock(int fd);
/* Remove rule files and directories of launchers that are gone (killed
 * without their teardown); each removal is reported through note. */
void sbfile_clean_stale(const struct config *cfg, void (*note)(const char *msg));
/* PC_EEXIST with a message naming where, when the name is taken by a
 * sandbox of the policy in cfg->rules_dir or by another launcher. The
 * policy is returned (caller unrefs) for address selection. */
int sbfile_name_free(struct sb *s, struct policy **pol, struct pc_err *err);
/* Pick addr4/addr6 (the pool or attach's --address) that no sandbox of pol
 * claims and that is not the bridge's own. */
int sbfile_pick_addresses(struct sb *s, const struct policy *pol, struct pc_err *err);
/* The rule file text (caller frees). */
char *sbfile_rule_text(const struct sb *s);
/* Write the rule file (created, never replacing one). */
int sbfile_rule_write(struct sb *s, struct pc_err *err);
int sbfile_rule_remove(struct sb *s, struct pc_err *err);
/* <dir>: resolv.conf, hosts, ca-bundle.pem, env, home/ (owned by the
 * sandbox user). */
int sbfile_dir_make(struct sb *s, uid_t uid, gid_t gid, struct pc_err *err);
void sbfile_dir_remove(struct sb *s);
/* Path of a file in the sandbox's directory. */
const char *sbfile_path(const struct sb *s, const char *file, char *buf, size_t len);

/* ---- sandbox_proc.c: the command, the vault, the namespace's processes - */

/* Start argv (the command), inside netns_fd with the sandbox's private
 * mounts (run), or on the gateway (attach, netns_fd < 0), as user ("":
 * unchanged), with envp. *pid on success; an exec failure is reported
 * through err with PC_ENOENT (not found) or PC_EPERM (not executable). */
int sbproc_spawn(const struct sb *s, char *const *argv, char *const *envp, pid_t *pid,
		 struct pc_err *err);
/* Wait for pid, forwarding SIGTERM/SIGHUP (and SIGINT sent with kill) to
 * it; returns its exit status as a shell reports it (128+N for signal N). */
int sbproc_wait(pid_t pid);
/* Attach without a command: wait for SIGINT/SIGTERM. */
void sbproc_wait_signal(void);
/* SIGKILL every process still in the namespace; returns how many. */
int sbproc_kill_netns(int netns_fd);
/* The vault: the pid of the process that listens on vault.listen in this
 * network namespace (0 when none). */
pid_t sbproc_vault_pid(const struct config *cfg);
/* SIGHUP the vault and wait until it has taken the signal and is back
 * waiting for connections (its reload runs between the two). */
int sbproc_vault_reload(pid_t pid, struct pc_err *err);

/* ---- sandbox_summary.c: the sandbox's records in the log --------------- */

struct sb_counts {
	unsigned flows_allowed, flows_refused;
	unsigned dns_allowed, dns_refused;
	unsigned http_requests, injected, exfil;
	char injected_names[256]; /* distinct secret names, comma separated */
	uint64_t first_seq, last_seq;
	bool rotated; /* the file changed under us: counts from the current file */
};
int sbsum_count(const struct sb *s, struct sb_counts *out, struct pc_err *err);
/* Count the records of sandbox name with seq >= seq_first in buf (log
 * lines), adding to *c (start from zero). Reads log file bytes: fuzzed by
 * tests/fuzz/fuzz_sandbox_summary.c. */
void sbsum_count_buffer(const char *name, uint64_t seq_first, const char *buf, size_t len,
			struct sb_counts *c);
void sbsum_print(const struct sb *s, const struct sb_counts *c, int status, const char *how);

/* ---- cmds.c: every command and subcommand (ad-cli, issue 18) ------------ */

struct cli_cmd {
	const char *name; /* "policy" */
	const char
	    *sub; /* "lint"; NULL: the command itself (its first argument is no subcommand) */
	const char *args;     /* the usage after the name: "[--strict] [FILE...]" */
	const char *opts;     /* accepted options, space-separated; "x=" takes a value; a leading
				 "+": the first argument that is not an option starts a command */
	int min_pos, max_pos; /* arguments that are not options (max -1: any) */
	int (*run)(int argc, char **argv, const char *config);
	const char *what; /* one line for --help */
};

/* The table, ended by an entry whose name is NULL. */
extern const struct cli_cmd cli_cmds[];
/* "usage: portcullis [-c FILE] NAME SUB ARGS" of one entry, of every
 * entry of command name. */
void cli_cmd_usage(FILE *f, const struct cli_cmd *c);
void cli_cmd_usage_all(FILE *f, const char *name);
/* `portcullis --help`: every command. */
void cli_usage(FILE *f);
/* The help of command name (every entry of it) or of name sub: each
 * entry's usage and what it does. PC_EINVAL when there is no such entry. */
int cli_cmd_help(FILE *f, const char *name, const char *sub);
/* `portcullis help [COMMAND [SUBCOMMAND]]`. */
int cli_help(int argc, char **argv, const char *config);
/* 0 when argv (the arguments after the subcommand) is a command line c
 * accepts; PC_EINVAL with why filled otherwise. */
int cli_cmd_check_args(const struct cli_cmd *c, int argc, char **argv, char *why, size_t len);
/* Take the global options that name the configuration (-c FILE, -cFILE,
 * --config FILE, --config=FILE) out of argv (the arguments after the
 * program's name; *argc of them, argv[*argc] NULL) wherever they are:
 * before the command, between it and its subcommand, among its options.
 * Not after "--" nor in a sandbox's command, and not a value of the
 * command's own option (read with the table). *config: the last one given.
 * 0, or PC_EINVAL with why filled (a -c without its value). */
int cli_globals_take(int *argc, char **argv, const char **config, char *why, size_t len);

/* ---- policy_test.c: `portcullis policy test` (ad-cli, issue 18) --------- */

int cli_policy_test(int argc, char **argv, const char *config);
/* `portcullis log audit [FILE...] [--policies DIR] [--from SEQ] [--json]`
 * (audit.c; docs/logd.md "Audit"): the log verified, then each verdict
 * replayed through the spec's model. 0 every verdict confirmed, 1 a
 * disagreement, a verdict not judged or a log that does not verify, 3
 * unreadable. */
int cli_log_audit(int argc, char **argv, const char *config);

/* ---- top_agg.c, top_health.c, top.c: `portcullis top` (ad-top, issue 18) -- */

#define TOP_WINDOW_S	  10  /* rates: verdicts per second over the last 10 s */
#define TOP_SANDBOXES_MAX 64  /* rows; records of more sandboxes count in one row */
#define TOP_DEST_MAX	  256 /* refused destinations tracked (Space-Saving) */
#define TOP_DEST_KEY	  160 /* longer destinations are cut (and may then share a row) */

/* One sandbox's verdicts: totals, and per-second counts of the window (a
 * ring indexed by the second modulo TOP_WINDOW_S, sec says which second). */
struct top_sandbox {
	char name[64]; /* "" for records naming no sandbox */
	uint64_t allowed, refused;
	uint64_t sec[TOP_WINDOW_S];
	uint32_t win_allowed[TOP_WINDOW_S], win_refused[TOP_WINDOW_S];
	uint64_t last_sec;
};

/* A refused destination: count overestimates the true count by at most
 * error (Space-Saving: every destination refused more than records/
 * TOP_DEST_MAX times is in the table, whatever the stream). */
struct top_dest {
	char key[TOP_DEST_KEY]; /* "CONNECT 203.0.113.12:443", "DNS x.evil.test A" */
	char sandbox[64];	/* the last sandbox refused it */
	uint64_t count, error;
};

/* Everything counted from the log: a fixed size, whatever it reads. */
struct top_agg {
	struct top_sandbox sb[TOP_SANDBOXES_MAX];
	size_t n_sb;
	struct top_sandbox others; /* records of sandboxes past the table */
	struct top_dest dest[TOP_DEST_MAX];
	size_t n_dest;
	uint64_t lines, records, verdicts, refused, not_understood;
	uint64_t first_ms; /* the first record's time (the refused list is counted since) */
	uint64_t last_seq;
};

enum top_sort { TOP_SORT_TOTAL, TOP_SORT_REFUSED, TOP_SORT_NAME, TOP_SORT_N };

void top_agg_init(struct top_agg *a);
/* Count one record; now_ms: the clock (a record stamped later counts now). */
void top_agg_add(struct top_agg *a, const struct logrec_brief *r, uint64_t now_ms);
/* One log line (through logrec_brief, the reader of `log show`). */
void top_agg_line(struct top_agg *a, const char *line, size_t len, uint64_t now_ms);
/* Verdicts per second of s over the window ending at now_ms. */
void top_sandbox_rates(const struct top_sandbox *s, uint64_t now_ms, double *allowed,
		       double *refused);
/* The sandbox rows sorted by sort (pointers into a, at most max): how many. */
size_t top_agg_sandboxes(const struct top_agg *a, enum top_sort sort, uint64_t now_ms,
			 const struct top_sandbox **out, size_t max);
/* The refused destinations, most refused first (pointers into a). */
size_t top_agg_dests(const struct top_agg *a, const struct top_dest **out, size_t max);

/* The daemons' side: the engine's status (engine.sock) and logd's metrics
 * (logd-control.sock), as far as the view shows them. */
struct top_health {
	bool engine_up;
	char engine_error[200];
	char policy[80], check[24];
	uint64_t check_findings, uptime_s, flows, held;
	uint64_t queued, kernel_dropped, user_dropped, enobufs; /* summed over the queues */
	uint64_t log_sent, log_failed; /* the engine's records, and those logd did not take */
	bool logd_up;
	char logd_error[200];
	uint64_t logd_records, logd_write_errors, logd_malformed, logd_unsealed, logd_clients;
	uint64_t logd_file_bytes;
	double logd_checkpoint_age; /* < 0: none signed yet */
	uint64_t at_ms;		    /* when asked (monotonic) */
	/* the rest of the engine's status, for `portcullis status`'s summary */
	struct top_status {
		char version[32], queue_path[16];
		char check_time[32], check_trigger[16], check_first[160];
		char cutoff_since[32], cutoff_after[96];
		uint64_t pid, queues, accepted, refused;
		uint64_t dns_allowed, dns_refused, dns_malformed, learned, evicted;
		uint64_t check_runs, cutoff_count, cutoff_ports_down;
		uint64_t limits, limit_dropped, quota_held_refused, quota_dnstcp_refused;
		uint64_t rules_hit, rule_hits;
		bool check_running, cutoff_active;
	} st;
};
/* The status JSON of the engine (docs/engine.md) into h (engine_up set);
 * PC_EPARSE when it is not a JSON object. Reads bytes of another process:
 * fuzzed (tests/fuzz/fuzz_top.c). */
int top_health_engine(const char *json, size_t len, struct top_health *h);
/* `portcullis status` without --json: a short summary of the engine's
 * status as top_health_engine read it, '\n'-terminated lines (control.c). */
void cli_status_text(struct pc_buf *out, const struct top_health *h);
/* logd's metrics (Prometheus text) into h (logd_up set). */
int top_health_logd(const char *text, size_t len, struct top_health *h);

/* One frame as text lines ('\n'-terminated) of at most width columns: the
 * sandboxes (their rates), the refused destinations, the queue and the log;
 * prev (NULL: none) gives the drop rates. rows: the most lines. */
void top_render(struct pc_buf *out, const struct top_agg *a, const struct top_health *h,
		const struct top_health *prev, enum top_sort sort, uint64_t now_ms, size_t width,
		size_t rows);
/* The same snapshot as one JSON object (`portcullis top --json`). */
void top_render_json(struct pc_buf *out, const struct top_agg *a, const struct top_health *h,
		     uint64_t now_ms);

int cli_top(int argc, char **argv, const char *config);

#endif
