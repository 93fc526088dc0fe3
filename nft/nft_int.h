/* Internal to nft/: the rule assembler, the build state and the set
 * builders its files share. Nothing outside nft/ and its unit tests
 * includes this. */
#ifndef PC_NFT_INT_H
#define PC_NFT_INT_H

#include <netinet/in.h> /* before any linux/ header (libc-compat) */

#include "nft/nft.h"

/* Base chain priorities of our tables. */
#define NFT_PRIO_INET	(-190) /* after conntrack (-200), before mangle (-150) */
#define NFT_PRIO_RAW	(-300) /* output notrack of our DNS answers */
#define NFT_PRIO_NAT	(-100) /* dstnat: vault redirect */
#define NFT_PRIO_BRIDGE (-350) /* before every standard bridge priority */

/* The queue-rule encoders (nft/expr.c): queues [num, num + total). Neither
 * ever sets bypass (fail-open) nor CPU fanout (the kernel's flow hash keeps
 * every packet of a flow, both directions, on one queue thread). Caller
 * owns the result (nftnl_expr_free, or hand it to nftnl_rule_add_expr).
 * NULL on allocation failure. */
struct nftnl_expr *nft_expr_queue_native(uint16_t num, uint16_t total);
struct nftnl_expr *nft_expr_queue_compat(uint16_t num, uint16_t total);

/* The canonical text of the whole ruleset (nft/text.c; nft.h says what
 * the text is), which nft_ruleset_digest hashes. */
int nft_ruleset_text(const struct nft_ruleset *rs, char **out, size_t *outlen);

/* ---- rule assembler (nft/expr.c). Every expression loads into / reads
 * from register 1. The first failure is kept in err; later calls are
 * no-ops; nr_finish returns NULL then. --------------------------------- */
struct nr {
	struct nftnl_rule *r;
	int err;
};
int nr_init(struct nr *b, uint16_t family, const char *table, const char *chain);
void nr_meta(struct nr *b, uint32_t key);
void nr_meta_set(struct nr *b, uint32_t key);
void nr_cmp(struct nr *b, uint32_t op, const void *data, uint32_t len);
void nr_cmp_u32(struct nr *b, uint32_t op, uint32_t host_value);
void nr_cmp_u8(struct nr *b, uint32_t op, uint8_t v);
void nr_cmp_be16(struct nr *b, uint32_t op, uint16_t host_value);
void nr_cmp_ifname(struct nr *b, uint32_t op, const char *name);
void nr_payload(struct nr *b, uint32_t base, uint32_t off, uint32_t len);
/* The same loads into another register: the fields of a concatenation
 * (each field starts at a 32-bit register, NFT_REG32_00 onwards). */
void nr_payload_to(struct nr *b, uint32_t dreg, uint32_t base, uint32_t off, uint32_t len);
void nr_meta_to(struct nr *b, uint32_t dreg, uint32_t key);
void nr_bitwise(struct nr *b, uint32_t len, const void *mask, const void * xor);
void nr_bitwise_u32(struct nr *b, uint32_t mask, uint32_t xor);
void nr_ct(struct nr *b, uint32_t key);
void nr_ct_set(struct nr *b, uint32_t key);
void nr_lookup(struct nr *b, const char *set, bool inv);
void nr_lookup_from(struct nr *b, uint32_t sreg, const char *set, bool inv);
void nr_verdict(struct nr *b, int verdict, const char *chain);
void nr_imm_be16(struct nr *b, uint32_t reg, uint16_t host_value);
void nr_reject(struct nr *b, uint32_t type, uint8_t code);
void nr_fib_daddr_type(struct nr *b);
void nr_counter(struct nr *b);
void nr_notrack(struct nr *b);
/* dynset update @set { reg 1 limit rate over rate/second burst burst }:
 * the element keyed by register 1 (created, or its timeout refreshed) has
 * its own token bucket; the rule goes on only when that bucket is empty. */
void nr_limit_meter(struct nr *b, const char *set, uint32_t timeout_ms, uint64_t rate,
		    uint32_t burst);
void nr_expr(struct nr *b, struct nftnl_expr *e); /* takes ownership */
struct nftnl_rule *nr_finish(struct nr *b, int *err);

/* ---- ruleset builder internals (nft/ruleset.c, nft/inet.c, nft/bridge.c) */
/* The state of one build: where rules go and the first error. */
struct bld {
	struct nft_ruleset *rs;
	const struct nft_ruleset_params *p;
	uint16_t fam;
	const char *chain;
	size_t set_ids;
	int err;
};
void rsb_push(struct bld *b, enum nft_kind kind, void *obj); /* takes ownership */
void rsb_table(struct bld *b);
/* hook < 0: a regular chain. Rules added after this go to it. */
void rsb_chain(struct bld *b, const char *name, const char *type, int hook, int prio,
	       uint32_t policy);
void rsb_rule_begin(struct bld *b, struct nr *r);
void rsb_rule_end(struct bld *b, struct nr *r);
void rsb_drop_rule(struct bld *b); /* counter drop */
void nm_ifname(struct nr *r, uint32_t key, uint32_t op, const char *name);
void nm_bits(struct nr *r, bool ct, uint32_t mask, uint32_t op, uint32_t value);
void nm_ctmark_set(struct nr *r, uint32_t bits);
void nm_l4proto(struct nr *r, uint32_t op, uint8_t proto);
void nm_th_port(struct nr *r, bool dst, uint16_t port);
void nm_ct_state(struct nr *r, uint32_t bits);
void nm_ct_reply(struct nr *r);
void nm_nd(struct nr *r, uint8_t type);
void nm_addr_set(struct nr *r, bool inet, uint8_t af, bool src, const char *set, bool inv);
/* The two tables. */
void nft_inet_table(struct bld *b);
void nft_bridge_table(struct bld *b);

/* ---- sets (nft/sets.c); names are the set names in our tables ----------- */

/* Interval set of the prefixes of address family af (others skipped). */
struct nftnl_set *nftset_prefixes(uint16_t family, const char *name, uint8_t af,
				  const struct pc_prefix *const *pfx, size_t n);
/* Plain set of the addresses of family af (others skipped). */
struct nftnl_set *nftset_addrs(uint16_t family, const char *name, uint8_t af,
			       const struct pc_addr *a, size_t n);
struct nftnl_set *nftset_ports(const struct nft_port *ports, size_t n);
/* An empty dynamic set keyed by a packet mark (a port stamp), whose
 * elements the rules create, each with its own limit (nr_limit_meter). */
struct nftnl_set *nftset_meter(uint16_t family, const char *name);

/* An interval set of the prefixes of family af cut into pieces that each
 * belong to one owner: where prefixes nest, the innermost owns (of equal
 * ones the lowest owner; nft_prefix_owner says which). Each element has a
 * counter, which a lookup that finds it counts. */
struct nftnl_set *nftset_owned(const char *name, uint8_t af, const struct pc_prefix *const *pfx,
			       const uint32_t *owner, size_t n);

/* Bindings (nft/bridge.c): an address range bound to a bridge port (by
 * name) or to a MAC. */
struct nft_bind_range {
	uint8_t who[16]; /* the port's name, NUL-padded, or the MAC */
	struct pc_prefix pfx;
};
/* The pairs "port (or MAC) . address" of family af as one set of
 * concatenated ranges (flags interval|concat): who is exact, the address a
 * range; ranges of one port/MAC merged. wholen: 16 (ifname) or 6 (MAC). */
struct nftnl_set *nftset_bind_pairs(const char *name, uint8_t af, uint32_t wholen,
				    const struct nft_bind_range *b, size_t n);
/* A plain set of the distinct whos of b (ifnames or MACs). */
struct nftnl_set *nftset_bind_whos(const char *name, uint32_t wholen,
				   const struct nft_bind_range *b, size_t n);
/* A plain set of concatenated "MAC . MAC" keys, one per distinct MAC of b:
 * an ARP sender hardware address equal to the frame's. */
struct nftnl_set *nftset_mac_pairs(const char *name, const struct nft_bind_range *b, size_t n);

#endif
