/* Shared main for the Check unit tests: each tests/unit/check_<module>.c
 * defines its suite and ends with PC_UNIT_MAIN(suite_fn), or, for a suite
 * of one test case, with PC_UNIT_SUITE(...). Results are TAP on
 * stdout (tests/run counts them); the exit status is non-zero on failure. */
#ifndef PC_UNIT_H
#define PC_UNIT_H

#include <check.h>
#include <stddef.h>
#include <stdlib.h>

/* Each test of a list added to a test case, in order. */
static inline void pc_unit_add(TCase *tc, const TTest *const *tests, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tcase_add_test(tc, tests[i]);
}

/* PC_UNIT_TESTS(tc, test_a, test_b, ...): the START_TEST names, one list
 * instead of a tcase_add_test line each. */
#define PC_UNIT_TESTS(tc, ...)                                                                     \
	pc_unit_add((tc), (const TTest *const[]){__VA_ARGS__},                                     \
		    sizeof((const TTest *const[]){__VA_ARGS__}) / sizeof(const TTest *))

/* The whole of a test file's suite when it is one test case: the suite's
 * name, the case's name, its timeout in seconds (0: Check's default), then
 * its tests; defines main too. */
#define PC_UNIT_SUITE(name, tcase_name, timeout, ...)                                              \
	static Suite *pc_unit_suite(void)                                                          \
	{                                                                                          \
		Suite *s = suite_create(name);                                                     \
		TCase *tc = tcase_create(tcase_name);                                              \
		if ((timeout) > 0)                                                                 \
			tcase_set_timeout(tc, (timeout));                                          \
		PC_UNIT_TESTS(tc, __VA_ARGS__);                                                    \
		suite_add_tcase(s, tc);                                                            \
		return s;                                                                          \
	}                                                                                          \
	PC_UNIT_MAIN(pc_unit_suite)

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
