/* Stub of common/err.c's pc_err_set for the EVA drivers. The real one hands
 * fmt and its arguments to vsnprintf into a fixed buffer; Frama-C's libc
 * specification of vsnprintf does not check what a conversion reads. This
 * stub reads, as vsnprintf would, every argument the conversions the
 * parsers use name: "%.*s" reads precision bytes of its string (at most),
 * "%s" the whole string, "%zu" and "%d" a number. Any other conversion is
 * an alarm (assert \false), so a new format cannot slip by unread.
 * Listed in docs/prove.md. */
#include <stdarg.h>
#include <string.h>

#include "common/pc.h"

volatile unsigned char prove_err_sink;

int pc_err_set(struct pc_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	for (const char *f = fmt; *f; f++) {
		if (*f != '%')
			continue;
		f++;
		if (f[0] == '.' && f[1] == '*' && f[2] == 's') {
			int prec = va_arg(ap, int);
			const char *s = va_arg(ap, const char *);

			/* like vsnprintf: up to prec bytes, or to a NUL */
			for (int i = 0; i < prec && s[i]; i++)
				prove_err_sink = (unsigned char)s[i];
			f += 2;
		} else if (f[0] == 's') {
			const char *s = va_arg(ap, const char *);

			prove_err_sink = (unsigned char)strlen(s);
		} else if (f[0] == 'z' && f[1] == 'u') {
			prove_err_sink = (unsigned char)va_arg(ap, size_t);
			f++;
		} else if (f[0] == 'd') {
			prove_err_sink = (unsigned char)va_arg(ap, int);
		} else {
			//@ assert unsupported_conversion: \false;
		}
	}
	va_end(ap);
	if (err)
		err->code = code;
	return code;
}
