/* `portcullis policy test`: placeholder until the what-if lands. */
#include "cli/cli_int.h"

int cli_policy_test(int argc, char **argv, const char *config)
{
	(void)argc;
	(void)argv;
	(void)config;
	return PC_EXIT_ERROR;
}
