/* tlog internals: what the core's files share among themselves (the text
 * forms of signed notes). Private to tlog/ and its tests; other modules use
 * tlog.h only. */
#ifndef PC_TLOG_INT_H
#define PC_TLOG_INT_H

#include "tlog/tlog.h"

#include <sodium.h>

/* The signature line's dash (U+2014), as C2SP signed-note spells it. */
#define EMDASH "\xe2\x80\x94"
/* Keys, roots and signatures: standard base64 with padding (C2SP). */
#define B64 sodium_base64_VARIANT_ORIGINAL

/* C2SP key ID of a key of signature type alg (0x01 Ed25519 notes, 0x04
 * timestamped cosignatures): the first 4 bytes of
 * SHA-256(name || "\n" || alg || public key), big-endian (note.c). */
uint32_t note_key_id(const char *name, uint8_t alg, const uint8_t pk[32]);
/* The length of a signed note's body: up to and including the newline
 * before its last blank line, which the signature lines follow (C2SP
 * signed-note); 0 when the note has no blank line. */
size_t note_body_len(const char *note, size_t len);

#endif
