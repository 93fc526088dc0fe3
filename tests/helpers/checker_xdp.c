/* Test helper: attach a minimal XDP program (return XDP_PASS) to an
 * interface of the current network namespace, loaded through the bpf()
 * syscall (no BPF toolchain needed), so the checker's "XDP program on a
 * port" detection meets a real attachment.
 *   checker_xdp IFNAME attach|detach */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

static int prog_load(void)
{
	struct bpf_insn insns[2];
	union bpf_attr attr;
	static const char license[] = "GPL";

	memset(insns, 0, sizeof(insns));
	insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K; /* r0 = XDP_PASS */
	insns[0].dst_reg = BPF_REG_0;
	insns[0].imm = XDP_PASS;
	insns[1].code = BPF_JMP | BPF_EXIT;
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_XDP;
	attr.insns = (uint64_t)(uintptr_t)insns;
	attr.insn_cnt = 2;
	attr.license = (uint64_t)(uintptr_t)license;
	memcpy(attr.prog_name, "pc_test_xdp", 12);
	return (int)syscall(__NR_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
}

int main(int argc, char **argv)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl;
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	struct nlattr *nest;
	int fd = -1, ifindex;
	ssize_t n;

	if (argc != 3 || !(ifindex = (int)if_nametoindex(argv[1]))) {
		fprintf(stderr, "usage: checker_xdp IFNAME attach|detach\n");
		return 2;
	}
	if (strcmp(argv[2], "attach") == 0 && (fd = prog_load()) < 0) {
		fprintf(stderr, "checker_xdp: BPF_PROG_LOAD: %s\n", strerror(errno));
		return 1;
	}
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_SETLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = 1;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	nest = mnl_attr_nest_start(nlh, IFLA_XDP);
	mnl_attr_put_u32(nlh, IFLA_XDP_FD, (uint32_t)fd);
	mnl_attr_put_u32(nlh, IFLA_XDP_FLAGS, XDP_FLAGS_SKB_MODE);
	mnl_attr_nest_end(nlh, nest);
	nl = mnl_socket_open(NETLINK_ROUTE);
	if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 ||
	    mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0 ||
	    (n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) < 0 ||
	    mnl_cb_run(buf, (size_t)n, 1, mnl_socket_get_portid(nl), NULL, NULL) < 0) {
		fprintf(stderr, "checker_xdp: setlink: %s\n", strerror(errno));
		return 1;
	}
	mnl_socket_close(nl);
	return 0;
}
