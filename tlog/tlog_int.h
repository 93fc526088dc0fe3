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

#endif
