// The cost of the signal-delivery mechanisms the CPU engines use, without any profiler: one
// thread does a fixed amount of work while the kernel interrupts it the way an engine would,
// and a handler that does nothing but what the mechanism needs (for perf events: moving the
// ring's tail) runs on every signal. What this costs is the least any profiler built on the
// mechanism can cost on this machine.
//
//   signal_floor MODE INTERVAL_US WORK KIND
//     MODE      none | timer (a CLOCK_THREAD_CPUTIME_ID POSIX timer, SIGEV_THREAD_ID: the
//               engine of clock=cpu) | perf (a software cpu-clock perf event of this thread,
//               kernel call chains in its ring, F_SETSIG/F_SETOWN_EX: the engine of clock=perf)
//     WORK      iterations of the loop
//     KIND      memory (a 1 MiB table read and written at random: caches the handler and the
//               kernel can evict) | alu (registers only)
//   signal_floor kallsyms
//     reads /proc/kallsyms once, as an agent naming kernel frames must
//
// Prints one line: `mode=… cpu_s=… signals=… check=…` (cpu_s: this thread's CPU time for the
// work, or for the read).
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile long signals;
static struct perf_event_mmap_page *ring;

static void on_signal(int signo, siginfo_t *info, void *context) {
    (void)signo;
    (void)info;
    (void)context;
    signals++;
    if (ring) {
        // What an engine must do at least: consume the records since the last signal.
        uint64_t head = __atomic_load_n(&ring->data_head, __ATOMIC_ACQUIRE);
        __atomic_store_n(&ring->data_tail, head, __ATOMIC_RELEASE);
    }
}

static double thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int fail(const char *what) {
    perror(what);
    return 2;
}

static int start_timer(pid_t tid, long interval_ns) {
    timer_t timer;
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGPROF;
    ev._sigev_un._tid = tid;
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &timer) != 0) return fail("timer_create");
    struct itimerspec its;
    its.it_interval.tv_sec = interval_ns / 1000000000L;
    its.it_interval.tv_nsec = interval_ns % 1000000000L;
    its.it_value = its.it_interval;
    if (timer_settime(timer, 0, &its, NULL) != 0) return fail("timer_settime");
    return 0;
}

static int start_perf(pid_t tid, long interval_ns) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof a;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.sample_period = (uint64_t)interval_ns;
    a.sample_type = PERF_SAMPLE_CALLCHAIN;
    a.wakeup_events = 1;
    a.disabled = 1;
    a.exclude_callchain_user = 1;
    a.sample_max_stack = 64;
    a.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return fail("perf_event_open");
    long page = sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, (size_t)(2 * page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return fail("mmap");
    ring = m;
    struct f_owner_ex owner = {F_OWNER_TID, tid};
    if (fcntl(fd, F_SETFL, O_ASYNC) != 0 || fcntl(fd, F_SETSIG, SIGPROF) != 0 ||
        fcntl(fd, F_SETOWN_EX, &owner) != 0)
        return fail("fcntl");
    if (ioctl(fd, PERF_EVENT_IOC_RESET, 0) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
        return fail("ioctl");
    return 0;
}

static int read_kallsyms(void) {
    int fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail("/proc/kallsyms");
    static char buf[1 << 16];
    long bytes = 0;
    double t0 = thread_cpu();
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) return fail("read");
        if (n == 0) break;
        bytes += n;
    }
    double t1 = thread_cpu();
    close(fd);
    printf("mode=kallsyms cpu_s=%.6f signals=0 check=%ld\n", t1 - t0, bytes);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "kallsyms") == 0) return read_kallsyms();
    if (argc != 5) {
        fprintf(stderr, "usage: signal_floor none|timer|perf INTERVAL_US WORK memory|alu\n"
                        "       signal_floor kallsyms\n");
        return 2;
    }
    const char *mode = argv[1];
    long interval_ns = atol(argv[2]) * 1000L;
    long work = atol(argv[3]);
    int memory = strcmp(argv[4], "memory") == 0;
    if (interval_ns <= 0 || work <= 0 || (!memory && strcmp(argv[4], "alu") != 0)) {
        fprintf(stderr, "signal_floor: bad interval, work or kind\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0) return fail("sigaction");

    size_t n = (size_t)1 << 17; // 1 MiB of u64
    uint64_t *table = malloc(n * sizeof *table);
    if (!table) return fail("malloc");
    for (size_t i = 0; i < n; i++) table[i] = i * 0x9E3779B97F4A7C15ull;

    pid_t tid = (pid_t)syscall(SYS_gettid);
    int rc = 0;
    if (strcmp(mode, "timer") == 0)
        rc = start_timer(tid, interval_ns);
    else if (strcmp(mode, "perf") == 0)
        rc = start_perf(tid, interval_ns);
    else if (strcmp(mode, "none") != 0) {
        fprintf(stderr, "signal_floor: unknown mode %s\n", mode);
        return 2;
    }
    if (rc != 0) return rc;

    double t0 = thread_cpu();
    uint64_t x = 88172645463325252ull, sum = 0;
    if (memory) {
        for (long i = 0; i < work; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            sum += table[x & (n - 1)];
            table[(x >> 20) & (n - 1)] += sum;
        }
    } else {
        for (long i = 0; i < work; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            sum += x * 0x2545F4914F6CDD1Dull;
        }
    }
    double t1 = thread_cpu();
    printf("mode=%s cpu_s=%.6f signals=%ld check=%llu\n", mode, t1 - t0, signals,
           (unsigned long long)(sum & 0xffff));
    return 0;
}
