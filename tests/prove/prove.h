/* What every EVA driver under tests/prove/ shares: the input buffer.
 * A driver's main does
 *	size_t len = prove_len();
 *	#ifdef PROVE_EXACT
 *	//@ split len;
 *	#endif
 *	buf = prove_buf(len);
 * (the split cannot live in a macro: the preprocessor drops comments).
 *
 * PROVE_EXACT: len takes every value of [PROVE_LO, PROVE_HI], each in its
 * own trace partition, and the buffer is a fresh allocation of exactly len
 * bytes: a read at buf[len] is an out-of-bounds alarm.
 * Otherwise: len is one abstract value of [PROVE_LO, PROVE_HI] and the buffer holds PROVE_HI bytes:
 *every access must stay below PROVE_HI, and the arithmetic must be safe, for all those lengths at
 *once. In both, every byte is unknown (any value). */
#ifndef PC_PROVE_H
#define PC_PROVE_H

#include "__fc_builtin.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#if !defined(PROVE_LO) || !defined(PROVE_HI)
#error "PROVE_LO and PROVE_HI must be set by tests/prove/run"
#endif

static size_t prove_len(void)
{
	return Frama_C_size_t_interval(PROVE_LO, PROVE_HI);
}

#ifdef PROVE_EXACT
static void *prove_buf(size_t len)
{
	char *b = malloc(len ? len : 1);

	if (!b)
		exit(0); /* not an input the parser sees */
	Frama_C_make_unknown(b, len);
	return b;
}
#else
static char prove_mem[PROVE_HI ? PROVE_HI : 1];

static void *prove_buf(size_t len)
{
	(void)len;
	Frama_C_make_unknown(prove_mem, sizeof(prove_mem));
	return prove_mem;
}
#endif

#endif
