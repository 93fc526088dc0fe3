/* portcullis.yaml from a string, as the configuration tests read it
 * (check_rules_config, check_rules_special): the file is named etc/pc.yaml, and
 * its first error stays in cfg_errbuf as "file:line:col: message" for the
 * test to compare. */
#ifndef PC_TEST_CFGLOAD_H
#define PC_TEST_CFGLOAD_H

#include "rules/rules_int.h"

#include <string.h>

static char cfg_errbuf[1024];

/* config_load_buffer's result; cfg_errbuf holds its error ("" on success) */
static int cfg_load(const char *yaml, struct config *c)
{
	struct pc_err e = {0};
	int rc = config_load_buffer("etc/pc.yaml", yaml, strlen(yaml), c, &e);

	pc_err_str(&e, cfg_errbuf, sizeof(cfg_errbuf));
	return rc;
}

#endif
