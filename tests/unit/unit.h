/* Shared main for the Check unit tests: each tests/unit/check_<module>.c
 * defines its suite and ends with PC_UNIT_MAIN(suite_fn). Results are TAP on
 * stdout (tests/run counts them); the exit status is non-zero on failure. */
#ifndef PC_UNIT_H
#define PC_UNIT_H

#include <check.h>
#include <stdlib.h>

#define PC_UNIT_MAIN(suite_fn)                                                                     \
	int main(void)                                                                             \
	{                                                                                          \
		SRunner *sr = srunner_create(suite_fn());                                          \
		int failed;                                                                        \
		srunner_set_tap(sr, "-");                                                          \
		srunner_run_all(sr, CK_SILENT);                                                    \
		failed = srunner_ntests_failed(sr);                                                \
		srunner_free(sr);                                                                  \
		return failed ? EXIT_FAILURE : EXIT_SUCCESS;                                       \
	}

#endif
