/* Checkpoint origins per log segment (issue 21): a segment's tree is signed
 * under "<key name>/<seq of its first record>", so each segment is its own
 * append-only log for a witness (C2SP); "<key name>" alone is the origin of
 * logs written before segments had their own (docs/logd.md "Checkpoints"). */
#include "tlog/tlog_int.h"

#include <stdio.h>
#include <string.h>

int checkpoint_origin_seg(const char *origin, const char *name, uint64_t *seg)
{
	size_t nl = strlen(name), dl;
	const char *d;
	uint64_t x = 0;

	if (strcmp(origin, name) == 0) {
		*seg = 0;
		return 0;
	}
	if (strncmp(origin, name, nl) != 0 || origin[nl] != '/')
		return PC_ETAMPER;
	d = origin + nl + 1;
	dl = strlen(d);
	/* decimal, no leading zero, not 0: one spelling per segment, so one
	 * segment cannot be two origins at the witness */
	if (pc_dec_u64(d, dl, &x) < 0 || x == 0)
		return PC_ETAMPER;
	*seg = x;
	return 0;
}

int checkpoint_origin_make(const char *name, uint64_t seg, char *out, size_t len,
			   struct pc_err *err)
{
	int n = seg ? snprintf(out, len, "%s/%llu", name, (unsigned long long)seg)
		    : snprintf(out, len, "%s", name);

	if (n < 0 || (size_t)n >= len)
		return pc_err_set(err, PC_EINVAL,
				  "key name %s is too long for a segment's origin (at most %d "
				  "characters with /<seq>)",
				  name, NOTE_NAME_MAX - 22);
	return 0;
}
