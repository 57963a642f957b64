/*
 * Runs a program under a seccomp filter that refuses perf_event_open(2), as container
 * runtimes' default profiles do: `seccomp_no_perf errno PROGRAM ARGS…` makes the call fail
 * with EPERM (Docker's and Podman's default), `seccomp_no_perf kill PROGRAM ARGS…` kills the
 * process that makes it (systemd's SystemCallFilter= default). Every other call is allowed.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: seccomp_no_perf errno|kill PROGRAM ARGS...\n");
        return 2;
    }
    unsigned int refuse = strcmp(argv[1], "kill") == 0
                              ? SECCOMP_RET_KILL_PROCESS
                              : SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, refuse),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof filter / sizeof filter[0], filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("seccomp");
        return 126;
    }
    execv(argv[2], argv + 2);
    perror("execv");
    return 127;
}
