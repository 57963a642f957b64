/*
 * The OpenTelemetry thread-context TLS pointer (OTEP 4947): out-of-process readers such as
 * the OpenTelemetry eBPF profiler find `otel_thread_ctx_v1` in this library's dynamic symbol
 * table and follow it to the current thread's context record.
 *
 * It is defined in C because stable Rust cannot define an exported ELF TLS symbol. Built with
 * -mtls-dialect=gnu2 (TLSDESC), the model the OTEP recommends; exported through
 * otel_thread_ctx.map (see build.rs).
 *
 * Only the owning thread writes its pointer, outside signal handlers (first touch of a
 * dynamic TLS block may allocate). otelprof's own signal handler never reads it: it finds the
 * record through the thread table instead. See docs/context-protocol.md, Readers.
 */
__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1 = 0;

void otelprof_set_thread_ctx(void *record) {
    /* A compiler barrier: the record must be complete before a reader can reach it. */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    otel_thread_ctx_v1 = record;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void *otelprof_get_thread_ctx(void) {
    return otel_thread_ctx_v1;
}
