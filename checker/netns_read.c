/* checker: devices of other network namespaces stacked on a device of this
 * one, and the packet sockets of this namespace (issue 31).
 *
 * A macvlan (ipvlan, macvtap, VLAN) keeps its lower device when it is moved
 * to another namespace: it leaves this namespace's link dump, yet stays the
 * lower device's receive handler, so a sandbox's frames reach another IP
 * stack without the bridge's guarded path. Only the other namespace's dump
 * shows it (IFLA_LINK, with IFLA_LINK_NETNSID naming this namespace there),
 * so every namespace of the host is read: entered by a forked child, never
 * by this process, which must stay in the namespace it proves. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checker/checker_int.h"

/* Directories of bind-mounted namespaces: iproute2's, and Docker's (whose
 * containers' namespaces are also reachable through their processes). */
static const char *const ns_dirs[] = {"/run/netns", "/run/docker/netns"};

struct ns_ent {
	dev_t dev;
	ino_t ino;
	char path[64];
};

struct ns_list {
	struct ns_ent *v;
	size_t n, cap;
	int unreadable;
	char unreadable_eg[96];
};

static void ns_add(struct ns_list *l, const struct stat *self, const char *path)
{
	struct stat sb;
	struct ns_ent *e;

	if (stat(path, &sb) < 0) {
		/* a process that ended meanwhile is no namespace */
		if (errno == ENOENT || errno == ESRCH)
			return;
		if (l->unreadable++ == 0)
			snprintf(l->unreadable_eg, sizeof(l->unreadable_eg), "%s (%s)", path,
				 strerror(errno));
		return;
	}
	if (sb.st_dev == self->st_dev && sb.st_ino == self->st_ino)
		return;
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].ino == sb.st_ino && l->v[i].dev == sb.st_dev)
			return;
	e = ck_grow(&l->v, &l->n, &l->cap, sizeof(*e));
	if (!e)
		return;
	e->dev = sb.st_dev;
	e->ino = sb.st_ino;
	pc_strlcpy(e->path, path, sizeof(e->path));
}

static void ns_collect(struct ns_list *l, const struct stat *self)
{
	struct dirent *d;
	DIR *dp;
	char p[320];

	for (size_t k = 0; k < sizeof(ns_dirs) / sizeof(ns_dirs[0]); k++) {
		if (!(dp = opendir(ns_dirs[k])))
			continue;
		while ((d = readdir(dp)))
			if (d->d_name[0] != '.') {
				snprintf(p, sizeof(p), "%s/%s", ns_dirs[k], d->d_name);
				ns_add(l, self, p);
			}
		closedir(dp);
	}
	if (!(dp = opendir("/proc")))
		return;
	while ((d = readdir(dp))) {
		int pid = atoi(d->d_name);

		if (pid <= 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%d/ns/net", pid);
		ns_add(l, self, p);
	}
	closedir(dp);
}

/* The id the current namespace gives the namespace of fd (RTM_GETNSID),
 * -1 when it has none (then no device here names it as its link's). */
static int32_t nsid_of(int fd)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtgenmsg *g;
	int32_t id = -1;
	ssize_t n;

	if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
		goto out;
	nlh->nlmsg_type = RTM_GETNSID;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nlh->nlmsg_seq = (uint32_t)time(NULL);
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->rtgen_family = AF_UNSPEC;
	mnl_attr_put_u32(nlh, NETNSA_FD, (uint32_t)fd);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		goto out;
	n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (n > 0 && ck_nlmsg_ok((struct nlmsghdr *)buf, (int)n) &&
	    ((struct nlmsghdr *)buf)->nlmsg_type == RTM_NEWNSID) {
		const struct nlattr *a;

		mnl_attr_for_each(a, (struct nlmsghdr *)buf, sizeof(struct rtgenmsg))
		{
			if (mnl_attr_get_type(a) == NETNSA_NSID &&
			    mnl_attr_validate(a, MNL_TYPE_U32) == 0)
				id = (int32_t)mnl_attr_get_u32(a);
		}
	}
out:
	if (nl)
		mnl_socket_close(nl);
	return id;
}

/* The child: enter each namespace in turn, dump its links, ask which id
 * it gives ours (after the dump: filling IFLA_LINK_NETNSID assigns one). */
static void __attribute__((noreturn)) walker(const struct ns_list *l, int self_fd, int out)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};

	for (size_t i = 0; i < l->n; i++) {
		struct ck_nsrec h = {.nsid = -1};
		struct pc_buf b = {0};
		struct pc_err e = {0};
		int fd = open(l->v[i].path, O_RDONLY | O_CLOEXEC);

		pc_strlcpy(h.where, l->v[i].path, sizeof(h.where));
		if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
			h.status = errno ? errno : EIO;
		else if (ck_rtnl_dump(RTM_GETLINK, &ifi, sizeof(ifi), &b, &e) < 0)
			h.status = EIO;
		else
			h.nsid = nsid_of(self_fd);
		if (fd >= 0)
			close(fd);
		h.len = h.status ? 0 : (uint32_t)b.len;
		if (pc_write_all(out, &h, sizeof(h)) < 0 || pc_write_all(out, b.p, h.len) < 0)
			_exit(1);
		pc_buf_free(&b);
		errno = 0;
	}
	_exit(0);
}

int ck_netns_parse(struct ck_state *st, const void *buf, size_t len, struct pc_err *err)
{
	const uint8_t *p = buf;

	while (len) {
		struct ck_nsrec h;
		struct ck_state tmp = {0};
		int rc;

		if (len < sizeof(h))
			return pc_err_set(err, PC_EPARSE, "namespace walk: short record");
		memcpy(&h, p, sizeof(h));
		p += sizeof(h);
		len -= sizeof(h);
		h.where[sizeof(h.where) - 1] = 0;
		if (h.len > len)
			return pc_err_set(err, PC_EPARSE, "namespace walk: short record");
		rc = h.status ? 0 : ck_rtnl_parse(&tmp, p, h.len, err);
		p += h.len;
		len -= h.len;
		if (h.status) {
			if (st->netns_unreadable++ == 0)
				snprintf(st->netns_unreadable_eg, sizeof(st->netns_unreadable_eg),
					 "%s (%s)", h.where, strerror(h.status));
			continue;
		}
		st->netns_read++;
		for (size_t i = 0; rc == 0 && h.nsid >= 0 && i < tmp.n_links; i++) {
			const struct ck_link *l = &tmp.links[i];
			struct ck_xdev *x;

			/* a tunnel's lower namespace is where its socket is, even
			 * with no lower device: ours, when moved from here */
			if (!l->link_netns || l->link_nsid != h.nsid ||
			    (!l->link && !ck_open_tunnel(l->kind)) || strcmp(l->kind, "veth") == 0)
				continue;
			x = ck_grow(&st->xdevs, &st->n_xdevs, &st->cap_xdevs, sizeof(*x));
			if (!x) {
				rc = pc_err_set(err, PC_ENOMEM, "namespace walk: out of memory");
				break;
			}
			pc_strlcpy(x->name, l->name, sizeof(x->name));
			pc_strlcpy(x->kind, l->kind[0] ? l->kind : "?", sizeof(x->kind));
			pc_strlcpy(x->where, h.where, sizeof(x->where));
			x->link = l->link;
		}
		ck_state_free(&tmp);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int ck_netns_read(struct ck_state *st, struct pc_err *err)
{
	struct ns_list l = {0};
	struct stat self;
	struct pc_buf b = {0};
	char chunk[16384];
	int pfd[2] = {-1, -1}, self_fd = -1, rc = 0, status;
	pid_t pid;

	if (stat("/proc/self/ns/net", &self) < 0)
		return pc_err_errno(err, PC_EIO, "namespace walk: /proc/self/ns/net");
	ns_collect(&l, &self);
	st->netns_unreadable = l.unreadable;
	pc_strlcpy(st->netns_unreadable_eg, l.unreadable_eg, sizeof(st->netns_unreadable_eg));
	if (!l.n)
		goto out; /* no other namespace: nothing to fork for */
	self_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self_fd < 0 || pipe2(pfd, O_CLOEXEC) < 0) {
		rc = pc_err_errno(err, PC_EIO, "namespace walk");
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		rc = pc_err_errno(err, PC_EIO, "namespace walk: fork");
		goto out;
	}
	if (pid == 0) {
		close(pfd[0]);
		walker(&l, self_fd, pfd[1]);
	}
	close(pfd[1]);
	pfd[1] = -1;
	for (;;) {
		ssize_t n = read(pfd[0], chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		pc_buf_put(&b, chunk, (size_t)n);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (b.err)
		rc = pc_err_set(err, PC_ENOMEM, "namespace walk: out of memory");
	else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		rc = pc_err_set(err, PC_EIO, "namespace walk: the walker failed");
	else
		rc = ck_netns_parse(st, b.p, b.len, err);
out:
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	if (self_fd >= 0)
		close(self_fd);
	pc_buf_free(&b);
	free(l.v);
	return rc;
}

/* ---- packet sockets -------------------------------------------------------- */

void ck_packet_parse(struct ck_state *st, const char *text)
{
	const char *line = text;

	/* sk RefCnt Type Proto Iface R Rmem User Inode */
	while (line && *line) {
		unsigned long long sk;
		unsigned ref, type, proto, r, rmem, user;
		int ifindex;
		unsigned long inode;
		struct ck_pkt *k;

		if (sscanf(line, "%llx %u %u %x %d %u %u %u %lu", &sk, &ref, &type, &proto,
			   &ifindex, &r, &rmem, &user, &inode) == 9 &&
		    (k = ck_grow(&st->pkts, &st->n_pkts, &st->cap_pkts, sizeof(*k)))) {
			k->ifindex = ifindex;
			k->proto = proto;
			k->inode = inode;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
}
