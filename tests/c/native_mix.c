/*
 * The C half of otelprof.tests.NativeMix: a JNI method that burns CPU in a C function and
 * says how much, measured by the calling thread's own CPU clock around that function only.
 *
 * Built by the test with gcc -O2 -fomit-frame-pointer, so that the native walk must use the
 * library's .eh_frame to find its callers (a frame-pointer walk would skip them).
 */
#include <jni.h>
#include <stdint.h>
#include <time.h>

static volatile uint64_t sink;

static int64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The C function whose share the test checks: pure arithmetic, no calls. */
__attribute__((noinline)) static uint64_t burn_c_loop(int64_t iterations) {
    uint64_t x = (uint64_t)iterations;
    for (int64_t i = 0; i < iterations; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        x ^= x >> 29;
    }
    return x;
}

JNIEXPORT jlong JNICALL Java_otelprof_tests_NativeMix_burnC(JNIEnv *env, jclass cls,
                                                            jlong iterations) {
    (void)env;
    (void)cls;
    int64_t start = thread_cpu_ns();
    sink += burn_c_loop(iterations);
    return thread_cpu_ns() - start;
}
