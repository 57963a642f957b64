//! Span context at attach: after `start`, `otelprof attach` loads otelprof.jar through the
//! JDK's instrument agent (`agentmain`, argument `reply=<file>`). With the real OpenTelemetry
//! SDK: in a JVM that has not used OpenTelemetry context yet, the jar wraps the context
//! storage and later spans are on the samples; in one that has, OpenTelemetry no longer
//! accepts a wrapper, and the reply says so (and no sample carries a span).

use std::time::Duration;

use otelprof_tests::{
    agent_path, all_jdks, attach_load, jar_path, otel_classes, otel_sdk_jar, pprof_traces,
    scratch_dir, JvmRun,
};

const CLASS: &str = "otelprof.tests.otel.AttachSpans";

fn server_samples(samples: &[otelprof_tests::TraceSample]) -> (f64, f64) {
    let mut with_span = 0.0;
    let mut all = 0.0;
    for s in samples {
        if !s
            .label("thread_name")
            .is_some_and(|n| n.starts_with("server-"))
        {
            continue;
        }
        all += s.value;
        if s.label("span_name") == Some("GET /work")
            && s.label("trace_id").is_some_and(|t| t.len() == 32)
            && s.label("span_id").is_some_and(|t| t.len() == 16)
        {
            with_span += s.value;
        }
    }
    (with_span, all)
}

#[test]
fn the_jar_at_attach_tracks_later_spans_or_says_why_it_cannot() {
    for jdk in all_jdks() {
        for mode in ["late", "early"] {
            let go = scratch_dir("attach-spans-go").join("go");
            let jvm = JvmRun::new(jdk.clone(), CLASS)
                .args(&[mode, go.to_str().unwrap(), "6"])
                .no_agent()
                .classpath(&[otel_classes(), otel_sdk_jar()])
                .spawn();
            jvm.wait_for_stdout("ready", Duration::from_secs(60));
            attach_load(
                &jvm,
                &agent_path(),
                &format!("start,cpu=1ms,out={}", jvm.out_dir.display()),
            )
            .assert_ok();
            let context = attach_load(&jvm, &jar_path(), "");
            println!("{} {mode}: jar reply:\n{}", jdk.name, context.text);
            std::fs::write(&go, "").unwrap();
            // The agent started by attach writes its last profile at the JVM's exit.
            let run = jvm.wait(Duration::from_secs(120));
            run.assert_clean_exit();
            let samples = pprof_traces(&run.profiles_of("cpu"), "cpu");
            let (with_span, all) = server_samples(&samples);
            println!(
                "{} {mode}: {:.0} of {:.0} ms of the server threads' samples carry the span",
                jdk.name, with_span, all
            );
            assert!(
                all > 1000.0,
                "too few samples of the server threads: {all} ms"
            );
            if mode == "late" {
                context.assert_ok();
                assert_eq!(
                    context.get("context"),
                    Some("OpenTelemetry (context storage wrapped now)"),
                    "{}",
                    context.text
                );
                assert!(
                    with_span >= 0.9 * all,
                    "{}: spans made current after the attach are on the samples: \
                     {with_span} of {all} ms",
                    jdk.name
                );
            } else {
                let error = context.error.clone().unwrap_or_default();
                assert!(
                    error.contains("was already in use when otelprof was attached")
                        && error.contains("samples will not carry spans"),
                    "{}",
                    context.text
                );
                assert_eq!(with_span, 0.0, "no span can be seen without the wrapper");
            }
        }
    }
}

#[test]
fn the_jar_without_a_running_agent_says_so() {
    let jdk = otelprof_tests::jdk17();
    let go = scratch_dir("attach-spans-go").join("go");
    let jvm = JvmRun::new(jdk, CLASS)
        .args(&["late", go.to_str().unwrap(), "1"])
        .no_agent()
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .spawn();
    jvm.wait_for_stdout("ready", Duration::from_secs(60));
    let reply = attach_load(&jvm, &jar_path(), "");
    assert!(
        reply
            .error
            .as_deref()
            .is_some_and(|e| e.contains("not running") || e.contains("not loaded")),
        "{}",
        reply.text
    );
    let bad = attach_load(&jvm, &jar_path(), "cpu=10ms");
    assert!(
        bad.error
            .as_deref()
            .is_some_and(|e| e.contains("unknown argument 'cpu=10ms'")),
        "{}",
        bad.text
    );
    std::fs::write(&go, "").unwrap();
    jvm.wait(Duration::from_secs(60)).assert_clean_exit();
}

/// An agent started with the JVM (`-javaagent`, context tracked from the start) stopped and
/// started again by attach: the threads keep their context records across the stop (the new
/// session finds them in the threads' JVMTI storage), so samples after the restart still carry
/// the spans.
#[test]
fn a_javaagent_agent_restarted_by_attach_keeps_span_context() {
    for jdk in all_jdks() {
        let go = scratch_dir("attach-spans-go").join("go");
        let jvm = JvmRun::new(jdk.clone(), CLASS)
            .args(&["early", go.to_str().unwrap(), "5"])
            .agent("cpu=2ms,period=600s")
            .javaagent()
            .classpath(&[otel_classes(), otel_sdk_jar()])
            .spawn();
        jvm.wait_for_stdout("ready", Duration::from_secs(60));
        // Long enough that the server threads' moments outside a span (between one request
        // and the next) are a small part of the first session on a busy machine.
        std::thread::sleep(Duration::from_millis(2000));
        let status = attach_load(&jvm, &agent_path(), "status");
        assert_eq!(status.get("state"), Some("running"), "{}", status.text);
        let stopped = attach_load(&jvm, &agent_path(), "stop");
        stopped.assert_ok();
        let first = pprof_traces(
            &stopped
                .all("file")
                .iter()
                .map(std::path::PathBuf::from)
                .collect::<Vec<_>>(),
            "cpu",
        );
        let (with_span, all) = server_samples(&first);
        assert!(
            all > 0.0 && with_span >= 0.9 * all,
            "first session: {with_span} of {all} ms"
        );
        std::thread::sleep(Duration::from_millis(500));
        let out = scratch_dir("attach-restart");
        attach_load(
            &jvm,
            &agent_path(),
            &format!("start,cpu=1ms,out={}", out.display()),
        )
        .assert_ok();
        std::fs::write(&go, "").unwrap();
        let run = jvm.wait(Duration::from_secs(120));
        run.assert_clean_exit();
        let files: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with(".pb.gz"))
            .collect();
        let (with_span, all) = server_samples(&pprof_traces(&files, "cpu"));
        println!(
            "{}: after the restart {with_span:.0} of {all:.0} ms of the server threads' samples carry the span",
            jdk.name
        );
        assert!(all > 1000.0, "too few samples after the restart: {all} ms");
        assert!(
            with_span >= 0.9 * all,
            "{}: spans lost across stop and start: {with_span} of {all} ms",
            jdk.name
        );
    }
}
