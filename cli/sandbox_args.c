/* `portcullis sandbox run|attach`: the command line — allow entries, secret
 * bindings, names — checked before anything on the gateway changes. */
#include "cli/cli_int.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char sb_usage[] =
    "usage: portcullis [-c FILE] sandbox run [--name N] --allow HOST[:PORT]...\n"
    "                 [--allow-cidr CIDR:PORT[/PROTO]...] [--secret NAME[@HOST[:PORT]]...]\n"
    "                 [--user U] [--env NAME[=VALUE]...] [--cert FILE] [--quiet]\n"
    "                 [--vm [--kernel K] [--initrd I] [--mem MiB] [--cpus N] [--accel "
    "auto|kvm|tcg]]\n"
    "                 -- CMD...\n"
    "       portcullis [-c FILE] sandbox attach --port TAP --name N [--mac MAC]\n"
    "                 [--address ADDR...] --allow ... [--secret ...] [--user U] [-- CMD...]\n"
    "PORT may be a range LO-HI; PROTO is tcp (default), udp or any. See docs/sandbox.md.\n";

/* ---- the command line ---------------------------------------------------- */

/* Sandbox names go into file names and the rule file; interface names
 * into the rule file: both only from a safe alphabet. */
static bool name_valid(const char *n, size_t max, bool sandbox)
{
	size_t len = strlen(n);

	if (!len || len >= max ||
	    (sandbox && !((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= 'A' && n[0] <= 'Z') ||
			  (n[0] >= '0' && n[0] <= '9'))))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = n[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return strcmp(n, ".") && strcmp(n, "..");
}

static int parse_ports(const char *s, char *out, size_t len)
{
	unsigned lo, hi;
	char tail;

	if (sscanf(s, "%u-%u%c", &lo, &hi, &tail) == 2 && lo >= 1 && lo <= hi && hi <= 65535)
		return snprintf(out, len, "%u-%u", lo, hi) < (int)len ? 0 : -1;
	if (sscanf(s, "%u%c", &lo, &tail) == 1 && lo >= 1 && lo <= 65535 && s[0] != '+')
		return snprintf(out, len, "%u", lo) < (int)len ? 0 : -1;
	return -1;
}

static int parse_allow(struct sb *s, const char *arg, struct pc_err *err)
{
	struct sb_allow *a;
	char host[POLICY_HOST_MAX + 16], norm[POLICY_HOST_MAX];
	const char *colon = strrchr(arg, ':');
	bool wild;

	if (s->n_allow == SB_MAX_ALLOW)
		return pc_err_set(err, PC_EINVAL, "at most %d --allow entries", SB_MAX_ALLOW);
	a = &s->allow[s->n_allow];
	memset(a, 0, sizeof(*a));
	a->proto = "tcp";
	if (strlen(arg) >= sizeof(host))
		return pc_err_set(err, PC_EINVAL, "--allow %.40s...: too long", arg);
	pc_strlcpy(host, arg, sizeof(host));
	if (colon) {
		host[colon - arg] = '\0';
		if (parse_ports(colon + 1, a->ports, sizeof(a->ports)) < 0)
			return pc_err_set(err, PC_EINVAL,
					  "--allow %s: bad port '%s' (1-65535, or a range LO-HI)",
					  arg, colon + 1);
	} else {
		pc_strlcpy(a->ports, "443", sizeof(a->ports));
	}
	struct pc_addr probe;

	if (pc_addr_parse(host, &probe) == 0 || strchr(host, '/'))
		return pc_err_set(err, PC_EINVAL,
				  "--allow %s: an address is not a host name: "
				  "use --allow-cidr ADDR/LEN:PORT",
				  arg);
	if (policy_host_normalize(host, norm, sizeof(norm), &wild, err) < 0) {
		pc_err_prefix(err, "--allow %s: ", arg);
		return PC_EINVAL;
	}
	snprintf(a->host, sizeof(a->host), "%s%s", wild ? "*." : "", norm);
	s->n_allow++;
	return 0;
}

static int parse_allow_cidr(struct sb *s, const char *arg, struct pc_err *err)
{
	char buf[128], *port, *proto;
	struct sb_allow *a;

	if (s->n_allow == SB_MAX_ALLOW)
		return pc_err_set(err, PC_EINVAL, "at most %d --allow entries", SB_MAX_ALLOW);
	a = &s->allow[s->n_allow];
	memset(a, 0, sizeof(*a));
	a->cidr = true;
	a->proto = "tcp";
	if (strlen(arg) >= sizeof(buf))
		goto bad;
	pc_strlcpy(buf, arg, sizeof(buf));
	if (buf[0] == '[') { /* [2001:db8::/32]:22 */
		char *close = strchr(buf, ']');

		if (!close || close[1] != ':')
			goto bad;
		*close = '\0';
		port = close + 2;
		memmove(buf, buf + 1, strlen(buf + 1) + 1);
	} else {
		port = strrchr(buf, ':');
		if (!port)
			goto bad;
		*port++ = '\0';
	}
	proto = strchr(port, '/');
	if (proto) {
		*proto++ = '\0';
		if (!strcmp(proto, "udp"))
			a->proto = "udp";
		else if (!strcmp(proto, "any"))
			a->proto = "any";
		else if (strcmp(proto, "tcp") != 0)
			goto bad;
	}
	if (pc_prefix_parse(buf, &a->prefix) < 0 ||
	    parse_ports(port, a->ports, sizeof(a->ports)) < 0)
		goto bad;
	s->n_allow++;
	return 0;
bad:
	return pc_err_set(err, PC_EINVAL,
			  "--allow-cidr %s: expected CIDR:PORT[/PROTO], like 198.51.100.0/24:22 or "
			  "[2001:db8::/32]:5000-5010/udp",
			  arg);
}

static int parse_secret(struct sb *s, const char *arg, struct pc_err *err)
{
	struct sb_secret *x;
	const char *at = strchr(arg, '@');
	size_t nl = at ? (size_t)(at - arg) : strlen(arg);

	if (s->n_secrets == SB_MAX_SECRETS)
		return pc_err_set(err, PC_EINVAL, "at most %d --secret entries", SB_MAX_SECRETS);
	x = &s->secrets[s->n_secrets];
	memset(x, 0, sizeof(*x));
	x->port = 443;
	if (nl >= sizeof(x->name))
		return pc_err_set(err, PC_EINVAL, "--secret %s: name too long", arg);
	memcpy(x->name, arg, nl);
	if (!store_name_valid(x->name))
		return pc_err_set(err, PC_EINVAL,
				  "--secret %s: a secret name is upper-case letters, digits and _, "
				  "starting with a letter (GITHUB_TOKEN)",
				  arg);
	if (at) {
		char host[POLICY_HOST_MAX + 8], ports[16];
		const char *colon = strchr(at + 1, ':');
		bool wild;

		snprintf(host, sizeof(host), "%.*s",
			 (int)(colon ? colon - at - 1 : (long)strlen(at + 1)), at + 1);
		if (colon) {
			if (parse_ports(colon + 1, ports, sizeof(ports)) < 0 || strchr(ports, '-'))
				return pc_err_set(err, PC_EINVAL, "--secret %s: bad port", arg);
			x->port = (uint16_t)atoi(ports);
		}
		if (policy_host_normalize(host, x->host, sizeof(x->host), &wild, err) < 0 || wild)
			return pc_err_set(err, PC_EINVAL,
					  "--secret %s: the bound host must be one exact host name",
					  arg);
	}
	s->n_secrets++;
	return 0;
}

static int parse_mac(const char *arg, uint8_t mac[6])
{
	return pc_mac_parse(arg, mac) < 0 || (mac[0] & 1) ? -1 : 0;
}

int sbargs_parse(struct sb *s, int argc, char **argv, struct pc_err *err)
{
	static const struct option lo[] = {{"name", required_argument, NULL, 'n'},
					   {"allow", required_argument, NULL, 'a'},
					   {"allow-cidr", required_argument, NULL, 'C'},
					   {"secret", required_argument, NULL, 's'},
					   {"user", required_argument, NULL, 'u'},
					   {"env", required_argument, NULL, 'e'},
					   {"cert", required_argument, NULL, 'o'},
					   {"quiet", no_argument, NULL, 'q'},
					   {"port", required_argument, NULL, 'p'},
					   {"mac", required_argument, NULL, 'm'},
					   {"address", required_argument, NULL, 'A'},
					   {"vm", no_argument, NULL, 'V'},
					   {"kernel", required_argument, NULL, 'K'},
					   {"initrd", required_argument, NULL, 'I'},
					   {"mem", required_argument, NULL, 'M'},
					   {"cpus", required_argument, NULL, 'P'},
					   {"accel", required_argument, NULL, 'X'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	int opt;

	/* '+': the command's own options are not ours */
	while ((opt = getopt_long(argc, argv, "+hq", lo, NULL)) != -1) {
		struct pc_addr a;

		switch (opt) {
		case 'n':
			if (!name_valid(optarg, sizeof(s->name), true))
				return pc_err_set(
				    err, PC_EINVAL,
				    "--name %s: 1-63 letters, digits, '.', '_' or '-', "
				    "starting with a letter or digit",
				    optarg);
			pc_strlcpy(s->name, optarg, sizeof(s->name));
			break;
		case 'a':
			if (parse_allow(s, optarg, err) < 0)
				return PC_EINVAL;
			break;
		case 'C':
			if (parse_allow_cidr(s, optarg, err) < 0)
				return PC_EINVAL;
			break;
		case 's':
			if (parse_secret(s, optarg, err) < 0)
				return PC_EINVAL;
			break;
		case 'u':
			pc_strlcpy(s->user, optarg, sizeof(s->user));
			break;
		case 'e':
			if (s->n_env == SB_MAX_ENV || !optarg[0] || optarg[0] == '=')
				return pc_err_set(err, PC_EINVAL, "--env %s: expected NAME[=VALUE]",
						  optarg);
			s->env[s->n_env++] = optarg;
			break;
		case 'o':
			s->cert_out = optarg;
			break;
		case 'q':
			s->quiet = true;
			break;
		case 'p':
			if (!s->attach || !name_valid(optarg, sizeof(s->port), false))
				return pc_err_set(err, PC_EINVAL,
						  "--port %s: an interface name (sandbox attach)",
						  optarg);
			pc_strlcpy(s->port, optarg, sizeof(s->port));
			break;
		case 'm':
			if (!s->attach || parse_mac(optarg, s->mac) < 0)
				return pc_err_set(
				    err, PC_EINVAL,
				    "--mac %s: expected a unicast MAC (sandbox attach)", optarg);
			s->has_mac = true;
			break;
		case 'A':
			if (!s->attach || pc_addr_parse(optarg, &a) < 0)
				return pc_err_set(err, PC_EINVAL,
						  "--address %s: expected an IPv4 or IPv6 address "
						  "(sandbox attach)",
						  optarg);
			if (a.family == AF_INET)
				s->want4 = a;
			else
				s->want6 = a;
			break;
		case 'V':
			s->vm = true;
			break;
		case 'K':
			s->vm_kernel = optarg;
			break;
		case 'I':
			s->vm_initrd = optarg;
			break;
		case 'M':
		case 'P': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || !optarg[0] || v < 1 || v > (opt == 'M' ? 65536UL : 64UL))
				return pc_err_set(err, PC_EINVAL, "--%s %s: expected %s",
						  opt == 'M' ? "mem" : "cpus", optarg,
						  opt == 'M' ? "MiB, 1-65536" : "a count, 1-64");
			if (opt == 'M')
				s->vm_mem = (unsigned)v;
			else
				s->vm_cpus = (unsigned)v;
			break;
		}
		case 'X':
			if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "kvm") != 0 &&
			    strcmp(optarg, "tcg") != 0)
				return pc_err_set(err, PC_EINVAL, "--accel %s: auto, kvm or tcg",
						  optarg);
			s->vm_accel = optarg;
			break;
		case 'h':
			fputs(sb_usage, stdout);
			return 1;
		default:
			return pc_err_set(err, PC_EINVAL, "bad option (portcullis sandbox --help)");
		}
	}
	if (optind < argc)
		s->cmd = argv + optind;
	if (!s->attach && !s->cmd)
		return pc_err_set(err, PC_EINVAL, "no command to run (... -- CMD ARGS)");
	if (!s->vm && (s->vm_kernel || s->vm_initrd || s->vm_mem || s->vm_cpus || s->vm_accel))
		return pc_err_set(err, PC_EINVAL,
				  "--kernel, --initrd, --mem, --cpus and --accel go with --vm");
	if (s->vm && s->attach)
		return pc_err_set(err, PC_EINVAL,
				  "--vm is for sandbox run (attach guards a VM you start)");
	if (s->attach && (!s->port[0] || !s->name[0]))
		return pc_err_set(err, PC_EINVAL, "sandbox attach needs --port TAP and --name N");
	if (!s->n_allow && !s->n_secrets)
		return pc_err_set(err, PC_EINVAL, "nothing allowed: give --allow or --allow-cidr");
	/* a secret without @HOST is bound to the first exact --allow host */
	for (size_t i = 0; i < s->n_secrets; i++) {
		if (s->secrets[i].host[0])
			continue;
		for (size_t k = 0; k < s->n_allow && !s->secrets[i].host[0]; k++)
			if (!s->allow[k].cidr && s->allow[k].host[0] != '*')
				pc_strlcpy(s->secrets[i].host, s->allow[k].host,
					   sizeof(s->secrets[i].host));
		if (!s->secrets[i].host[0])
			return pc_err_set(err, PC_EINVAL,
					  "--secret %s: no exact --allow host to bind it to: write "
					  "--secret %s@HOST",
					  s->secrets[i].name, s->secrets[i].name);
	}
	return 0;
}
