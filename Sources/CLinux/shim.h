#pragma once
/* Linux calls that Swift's Glibc module does not import (prctl is variadic and lives in
 * <sys/prctl.h>; struct ucred needs _GNU_SOURCE). Header-only: nothing to link. */
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <time.h>
#include <errno.h>

static inline int sitekeep_set_dumpable(int on) { return prctl(PR_SET_DUMPABLE, (unsigned long)on, 0, 0, 0); }
static inline int sitekeep_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

/* SO_PEERCRED of a connected Unix socket: 0 on success. */
struct sitekeep_peer_cred { int pid; unsigned int uid; unsigned int gid; };
int getsockopt(int, int, int, void *, socklen_t *);
static inline int sitekeep_peer_cred(int fd, struct sitekeep_peer_cred *out) {
    struct { int pid; unsigned int uid; unsigned int gid; } cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, 17 /* SO_PEERCRED */, &cred, &len) != 0) return -1;
    out->pid = cred.pid; out->uid = cred.uid; out->gid = cred.gid;
    return 0;
}

/* CLOCK_BOOTTIME in nanoseconds: monotonic, and it counts time spent in suspend. */
static inline long long sitekeep_boottime_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return -1;
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* renameat2(RENAME_NOREPLACE) through the system call (glibc declares renameat2 only under
 * _GNU_SOURCE): 0 on success, -1 with errno (EEXIST when `to` exists; EINVAL or ENOSYS where
 * the file system or kernel lacks the flag). */
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
/* syncfs(2) of the file system holding fd (glibc declares it only under _GNU_SOURCE). */
static inline int sitekeep_syncfs(int fd) {
#ifdef SYS_syncfs
    return (int)syscall(SYS_syncfs, fd);
#else
    errno = ENOSYS;
    return -1;
#endif
}

static inline int sitekeep_rename_noreplace(const char *from, const char *to) {
#ifdef SYS_renameat2
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 1u /* RENAME_NOREPLACE */);
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* The file system type (statfs's f_type magic) of the one holding `path`: 0 on success. */
#include <sys/vfs.h>
static inline int sitekeep_fs_type(const char *path, unsigned long long *out) {
    struct statfs fs;
    if (statfs(path, &fs) != 0) return -1;
    *out = (unsigned long long)(unsigned long)fs.f_type;
    return 0;
}

/* A pidfd of a connected Unix socket's peer (SO_PEERPIDFD, Linux 6.5): the descriptor, or -1
 * with errno (ENOPROTOOPT on older kernels). The pidfd names the process that connected, even
 * after its pid number is reused. */
static inline int sitekeep_peer_pidfd(int fd) {
    int pidfd = -1;
    socklen_t len = sizeof(pidfd);
    if (getsockopt(fd, SOL_SOCKET, 77 /* SO_PEERPIDFD */, &pidfd, &len) != 0) return -1;
    return pidfd;
}

/* pidfd_open(pid, 0): a pidfd of the process with that pid now, or -1 with errno. */
static inline int sitekeep_pidfd_open(int pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0u);
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* Whether the process a pidfd names still runs (pidfd_send_signal with signal 0): 1 when it
 * does, 0 when it has exited (ESRCH), -1 with errno otherwise. */
static inline int sitekeep_pidfd_alive(int pidfd) {
#ifdef SYS_pidfd_send_signal
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, (void *)0, 0u) == 0) return 1;
    return errno == ESRCH ? 0 : -1;
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* The inode of the other end of the connected Unix socket whose own inode is `ino`, asked of
 * the kernel through NETLINK_SOCK_DIAG (unix_diag, UDIAG_SHOW_PEER): 0 and *peer set, or -1 with
 * errno (EPROTONOSUPPORT or ENOENT where the kernel has no unix_diag). */
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/un.h>
ssize_t send(int, const void *, size_t, int);
ssize_t recv(int, void *, size_t, int);
static inline int sitekeep_unix_peer_inode(unsigned int ino, unsigned int *peer) {
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0) return -1;
    struct { struct nlmsghdr nlh; struct unix_diag_req req; } msg;
    memset(&msg, 0, sizeof(msg));
    msg.nlh.nlmsg_len = sizeof(msg);
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST;
    msg.req.sdiag_family = AF_UNIX;
    msg.req.udiag_states = ~0u;
    msg.req.udiag_ino = ino;
    msg.req.udiag_show = UDIAG_SHOW_PEER;
    msg.req.udiag_cookie[0] = ~0u;
    msg.req.udiag_cookie[1] = ~0u;
    if (send(nl, &msg, sizeof(msg), 0) != (ssize_t)sizeof(msg)) { int e = errno; close(nl); errno = e; return -1; }
    union { struct nlmsghdr h; char bytes[8192]; } buf;
    ssize_t n = recv(nl, &buf, sizeof(buf), 0);
    int saved = errno;
    close(nl);
    if (n < 0) { errno = saved; return -1; }
    for (struct nlmsghdr *h = &buf.h; NLMSG_OK(h, (unsigned int)n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *err = (struct nlmsgerr *)NLMSG_DATA(h);
            errno = err->error ? -err->error : ENOENT;
            return -1;
        }
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
        struct unix_diag_msg *m = (struct unix_diag_msg *)NLMSG_DATA(h);
        if (m->udiag_ino != ino) continue;
        int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
        for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
            if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(unsigned int)) {
                memcpy(peer, RTA_DATA(a), sizeof(unsigned int));
                return 0;
            }
        }
    }
    errno = ENOENT;
    return -1;
}

/* Descriptor passing over a connected Unix socket (SCM_RIGHTS). */
#include <sys/uio.h>
ssize_t sendmsg(int, const struct msghdr *, int);
ssize_t recvmsg(int, struct msghdr *, int);

/* Sends `len` bytes (at least 1) with `count` descriptors (at most 8) attached to the first
 * byte: the number of bytes sent, or -1 with errno. */
static inline long sitekeep_send_fds(int sock, const void *buf, unsigned long len, const int *fds, int count) {
    if (len == 0 || count < 0 || count > 8) { errno = EINVAL; return -1; }
    struct iovec iov = { (void *)buf, len };
    union { struct cmsghdr align; char bytes[CMSG_SPACE(8 * sizeof(int))]; } control;
    memset(&control, 0, sizeof(control));
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (count > 0) {
        msg.msg_control = control.bytes;
        msg.msg_controllen = CMSG_SPACE((unsigned long)count * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((unsigned long)count * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (unsigned long)count * sizeof(int));
    }
    ssize_t n;
    do { n = sendmsg(sock, &msg, MSG_NOSIGNAL); } while (n < 0 && errno == EINTR);
    return (long)n;
}

/* Receives up to `len` bytes and any descriptors attached (made close-on-exec): the number of
 * bytes (0 at the end of the stream), or -1 with errno; `*count` is set to how many
 * descriptors were stored in `fds` (at most `max`, at most 8). Descriptors beyond `max`, or
 * arriving in a truncated control message, are closed, never leaked, and `*truncated` is set. */
static inline long sitekeep_recv_fds(int sock, void *buf, unsigned long len, int *fds, int max, int *count, int *truncated) {
    *count = 0;
    *truncated = 0;
    struct iovec iov = { buf, len };
    union { struct cmsghdr align; char bytes[CMSG_SPACE(8 * sizeof(int))]; } control;
    memset(&control, 0, sizeof(control));
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof(control.bytes);
    ssize_t n;
    do { n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC); } while (n < 0 && errno == EINTR);
    if (n < 0) return -1;
    if (msg.msg_flags & MSG_CTRUNC) *truncated = 1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int *got = (int *)CMSG_DATA(c);
        for (int i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, got + i, sizeof(int));
            if (*count < max) fds[(*count)++] = fd; else { close(fd); *truncated = 1; }
        }
    }
    return (long)n;
}

/* pidfd_send_signal(pidfd, sig): 0, or -1 with errno (ESRCH once the process has exited). */
static inline int sitekeep_pidfd_signal(int pidfd, int sig) {
#ifdef SYS_pidfd_send_signal
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, (void *)0, 0u);
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* posix_spawn_file_actions_addchdir_np (glibc 2.29), which <spawn.h> declares only under
 * _GNU_SOURCE: the child's working folder, set before its exec. */
#include <spawn.h>
int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *, const char *);
static inline int sitekeep_spawn_add_chdir(posix_spawn_file_actions_t *actions, const char *path) {
    return posix_spawn_file_actions_addchdir_np(actions, path);
}

/* posix_spawn_file_actions_addclosefrom_np (glibc 2.34): every descriptor from `from` up is
 * closed in the child, whatever the parent leaked without close-on-exec. */
int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);
static inline int sitekeep_spawn_add_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
