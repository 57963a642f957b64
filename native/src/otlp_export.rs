//! Wiring of OTLP export into the agent. Everything it wires lives in the safe crates
//! (`otel_bridge::resource`, `otel_bridge::otlp`, `otelprof_exporter`); this file only
//! gathers inputs the agent alone can get: the environment (read once, at load), what the
//! JVM says about itself (JNI, at VMInit), and the agent's counters for self-telemetry.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use jni::objects::{JObject, JString, JValue};
use jni::sys::JNIEnv;
use otel_bridge::otlp::{pyroscope, Bounds, EncodeOptions};
use otel_bridge::resource::{self, ProcessFacts, ResourceInputs};
use otelprof_exporter::config::env;
use otelprof_exporter::{
    AgentCounters, AgentOtlpOptions, ExporterSettings, LiveFigures, LogLevel, MemoryFigures,
    OtlpConfig, OtlpExporter,
};

use crate::options::Options;
use crate::stats::{self, COUNTERS, WALK_OUTCOMES};

/// How long the JVM's exit waits for queued profiles to be delivered.
pub(crate) const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

/// How often the agent's own metrics are exported (`OTEL_METRIC_EXPORT_INTERVAL`, ms).
const METRIC_EXPORT_INTERVAL: &str = "OTEL_METRIC_EXPORT_INTERVAL";
const DEFAULT_METRIC_INTERVAL: Duration = Duration::from_secs(60);

/// The `OTEL_*` environment as read once at agent load.
#[derive(Clone, Debug, Default)]
pub(crate) struct ExportEnv {
    /// `None`: no endpoint configured, OTLP export is off.
    pub(crate) config: Option<OtlpConfig>,
    pub(crate) service_name: Option<String>,
    pub(crate) resource_attributes: Option<String>,
    pub(crate) metric_interval: Option<Duration>,
    /// The OpAMP server to be managed by (`opamp=`, `OTELPROF_OPAMP_*`); `None`: not managed.
    pub(crate) opamp: Option<otelprof_opamp::client::OpampConfig>,
}

/// `OTEL_SDK_DISABLED=true` (case-insensitive, as the OTel spec says for booleans).
pub(crate) fn sdk_disabled(lookup: &impl Fn(&str) -> Option<String>) -> bool {
    lookup(env::SDK_DISABLED).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Resolves the OTLP configuration from `lookup` (the process environment in the agent)
/// and the agent options. An error names the setting and turns profiling off.
pub(crate) fn read_env(
    options: &Options,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<ExportEnv, String> {
    let agent = AgentOtlpOptions {
        endpoint: options.endpoint.clone(),
        protocol: options.protocol,
    };
    let config = OtlpConfig::resolve(lookup, &agent)
        .map_err(|e| e.to_string())?
        .map(|mut c| {
            c.queue_bytes = options.queue_bytes;
            c
        });
    let metric_interval = match lookup(METRIC_EXPORT_INTERVAL) {
        Some(v) => Some(
            v.trim()
                .parse::<u64>()
                .ok()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
                .ok_or_else(|| {
                    format!(
                        "{METRIC_EXPORT_INTERVAL}=\"{}\": expected milliseconds",
                        otelprof_exporter::config::echo(&v)
                    )
                })?,
        ),
        None => None,
    };
    let opamp = otelprof_opamp::client::OpampConfig::resolve(
        lookup,
        options.opamp.as_deref(),
        options.opamp_interval,
    )
    .map_err(|e| e.to_string())?;
    Ok(ExportEnv {
        config,
        service_name: lookup(env::SERVICE_NAME),
        resource_attributes: lookup(env::RESOURCE_ATTRIBUTES),
        metric_interval,
        opamp,
    })
}

/// The resource describing this process (for OTLP export and the OTEP 4719 process context).
/// Runs at VMInit on a thread attached to the VM (it asks the JVM for its version through JNI).
///
/// # Safety
/// `jni` is the calling thread's JNIEnv, in the live phase.
pub(crate) unsafe fn build_resource(
    jni: *mut JNIEnv,
    export_env: &ExportEnv,
    options: &Options,
) -> opentelemetry_sdk::Resource {
    // SAFETY: per this function's contract.
    let facts = unsafe { process_facts(jni) };
    // One id per process, whatever the number of profiling sessions (starts and stops by
    // attach): the instance is the JVM.
    static INSTANCE_ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let instance_id = INSTANCE_ID.get_or_init(|| {
        let mut random = [0u8; 16];
        let _ = getrandom_fill(&mut random);
        resource::uuid_v4(random)
    });
    let (resource, bad_attributes) = resource::build_resource(&ResourceInputs {
        service_option: options.service.as_deref(),
        otel_service_name: export_env.service_name.as_deref(),
        otel_resource_attributes: export_env.resource_attributes.as_deref(),
        instance_id,
        process: &facts,
    });
    if let Some(e) = bad_attributes {
        log_warn!("{e}; the whole variable is ignored (OTel specification)");
    }
    resource
}

/// Starts the exporter, if an endpoint is configured.
pub(crate) fn start(
    resource: opentelemetry_sdk::Resource,
    export_env: &ExportEnv,
    options: &Options,
    interval: Duration,
) -> Result<Option<Arc<OtlpExporter>>, String> {
    let Some(config) = export_env.config.clone() else {
        return Ok(None);
    };
    let resource = fit_resource(resource, options);
    let metrics_interval = export_env
        .metric_interval
        .unwrap_or(DEFAULT_METRIC_INTERVAL);
    let settings = ExporterSettings {
        resource,
        encode: encode_options(options),
        log: Arc::new(|level: LogLevel, msg: &str| match level {
            LogLevel::Warn => log_warn!("{msg}"),
            LogLevel::Info => log_info!("{msg}"),
            LogLevel::Debug => log_debug!("{msg}"),
        }),
        counters: Some(Arc::new(move || agent_counters(interval, metrics_interval))),
        metrics_interval,
    };
    OtlpExporter::start(config, settings)
        .map(|e| Some(Arc::new(e)))
        .map_err(|e| format!("cannot start OTLP export: {e}"))
}

/// The sample attributes sent under `backend=pyroscope`: the endpoint, and the id of an
/// OpAMP capture while one runs (one value per capture). Few values each, so few series.
const PYROSCOPE_SAMPLE_ATTRIBUTES: &[&str] = &[
    otel_bridge::otlp::SPAN_NAME,
    crate::aggregator::CAPTURE_LABEL,
];

/// How profiles are encoded for OTLP: the options' choices, and under a backend preset that
/// backend's bounds.
fn encode_options(options: &Options) -> EncodeOptions {
    let bounds = match options.backend {
        Some(p) if *p == otelprof_agent_options::backend::PYROSCOPE => Bounds {
            sample_attributes: Some(PYROSCOPE_SAMPLE_ATTRIBUTES),
            ..pyroscope::BOUNDS
        },
        _ => Bounds::NONE,
    };
    EncodeOptions {
        timestamps: options.timestamps,
        thread_id: options.thread_id,
        local_root_span_id: false,
        links: options.links,
        no_link_trace_id: !options.link_trace_id,
        bounds,
    }
}

/// The resource, under `backend=pyroscope` with as many attributes left out as it takes to
/// keep every series within Pyroscope's label-name limit (said in one line).
fn fit_resource(
    resource: opentelemetry_sdk::Resource,
    options: &Options,
) -> opentelemetry_sdk::Resource {
    if options.backend != Some(&otelprof_agent_options::backend::PYROSCOPE) {
        return resource;
    }
    let (fitted, dropped) = pyroscope::fit_resource(
        &resource,
        PYROSCOPE_SAMPLE_ATTRIBUTES.len(),
        pyroscope::MAX_LABEL_NAMES,
    );
    if !dropped.is_empty() {
        log_warn!(
            "backend=pyroscope: resource attributes {} left out of profiles: Pyroscope takes at most {} label names per series",
            dropped.join(", "),
            pyroscope::MAX_LABEL_NAMES
        );
    }
    fitted
}

/// Random bytes from the kernel (`getrandom(2)`); the caller copes with failure.
pub(crate) fn getrandom_fill(buf: &mut [u8]) -> bool {
    // SAFETY: `buf` is a valid writable buffer of `buf.len()` bytes.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n == buf.len() as isize {
        return true;
    }
    // Never all zero, even then: mix in the pid and the time.
    let seed = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (seed >> ((i % 8) * 8)) as u8 ^ (i as u8).wrapping_mul(151);
    }
    false
}

/// Host, process and JVM facts for the resource. Nothing from the command line or the
/// environment (README.md, OTLP export: "What is sent").
///
/// # Safety
/// `jni` is the calling thread's JNIEnv, in the live phase.
unsafe fn process_facts(jni: *mut JNIEnv) -> ProcessFacts {
    // SAFETY: per this function's contract.
    let prop = |key: &str| unsafe { system_property(jni, key) };
    let description = match (
        prop("java.vm.vendor"),
        prop("java.vm.name"),
        prop("java.vm.version"),
    ) {
        (Some(vendor), Some(name), Some(version)) => Some(format!("{vendor} {name} {version}")),
        _ => None,
    };
    ProcessFacts {
        pid: std::process::id(),
        host_name: host_name(),
        executable_name: std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
        runtime_name: prop("java.runtime.name"),
        runtime_version: prop("java.runtime.version"),
        runtime_description: description,
        command_args: None,
    }
}

/// `System.getProperty(key)` through JNI; `None` on any failure (a pending exception is
/// cleared: the JVM must not see one from us).
///
/// # Safety
/// `jni` is the calling thread's JNIEnv, in the live phase.
unsafe fn system_property(jni: *mut JNIEnv, key: &str) -> Option<String> {
    // SAFETY: per this function's contract.
    let mut env = unsafe { jni::JNIEnv::from_raw(jni) }.ok()?;
    let result = (|| {
        let jkey = env.new_string(key).ok()?;
        let value = env
            .call_static_method(
                "java/lang/System",
                "getProperty",
                "(Ljava/lang/String;)Ljava/lang/String;",
                &[JValue::Object(&jkey)],
            )
            .ok()?
            .l()
            .ok()?;
        let _ = env.delete_local_ref(jkey);
        if value.is_null() {
            return None;
        }
        let jstr = JString::from(value);
        let s: String = env.get_string(&jstr).ok()?.into();
        let _ = env.delete_local_ref(JObject::from(jstr));
        Some(s)
    })();
    if env.exception_check().unwrap_or(false) {
        let _ = env.exception_clear();
    }
    result
}

fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname NUL-terminates within it (or
    // truncates, which the search for NUL below tolerates).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    (!name.is_empty()).then_some(name)
}

/// Failed-walk reasons by AsyncGetCallTrace code (index = -code), as metric attributes.
fn walk_reason(index: usize) -> &'static str {
    let name = crate::aggregator::pseudo_frame_name(-(index as i32));
    match name {
        "[no_Java_frame]" => "no_java_frame",
        "[no_class_load]" => "no_class_load",
        "[GC_active]" => "gc_active",
        "[unknown_not_Java]" => "unknown_not_java",
        "[not_walkable_not_Java]" => "not_walkable_not_java",
        "[unknown_Java]" => "unknown_java",
        "[not_walkable_Java]" => "not_walkable_java",
        "[unknown_state]" => "unknown_state",
        "[thread_exit]" => "thread_exit",
        "[deoptimization]" => "deoptimization",
        "[safepoint]" => "safepoint",
        _ => "other",
    }
}

/// The JVM's memory figures, as the agent's counters hold them.
fn memory_figures(metrics_interval: Duration) -> MemoryFigures {
    let c = &COUNTERS;
    let (sampling, live) = crate::engines::alloc::consumers();
    let known = |v: u64| (v > 0).then_some(v);
    MemoryFigures {
        heap_after_gc: known(stats::get(&c.heap_after_gc)),
        collections: known(stats::get(&c.gc_collections)),
        pauses: stats::get(&c.gc_pauses),
        pause_ns: stats::get(&c.gc_pause_ns),
        recent_pause_max_ns: crate::engines::gc::longest_recent(metrics_interval),
        allocated_bytes: sampling.then(|| stats::get(&c.alloc_estimated_bytes)),
        live: live.then(|| LiveFigures {
            entries: stats::get(&c.live_entries),
            interval: stats::get(&c.live_interval),
            thinned: stats::get(&c.live_thinned),
            dropped: vec![
                ("table_full", stats::get(&c.live_dropped_full)),
                ("buffer", stats::get(&c.live_dropped_buffer)),
                ("no_reference", stats::get(&c.live_ref_failed)),
            ],
        }),
    }
}

/// The agent's counters, read by the exporter's metric callbacks.
fn agent_counters(interval: Duration, metrics_interval: Duration) -> AgentCounters {
    let c = &COUNTERS;
    let failed_walks = (0..WALK_OUTCOMES)
        .map(|i| {
            (
                walk_reason(i),
                c.walk_failed.get(i).map_or(0, |a| a.load(Relaxed)),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    AgentCounters {
        samples: stats::get(&c.samples),
        sampled_intervals: stats::get(&c.weight),
        cpu_walks: stats::get(&c.cpu_walks),
        interval,
        dropped: vec![
            ("buffer_full", stats::get(&c.dropped_buffer_full)),
            ("contended", stats::get(&c.dropped_contended)),
            ("unknown_thread", stats::get(&c.unknown_thread)),
        ],
        failed_walks,
        truncated: stats::get(&c.truncated),
        samples_with_span: stats::get(&c.samples_with_span),
        memory: memory_figures(metrics_interval),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn sdk_disabled_is_a_case_insensitive_true() {
        assert!(sdk_disabled(&lookup(&[("OTEL_SDK_DISABLED", "TRUE")])));
        assert!(!sdk_disabled(&lookup(&[("OTEL_SDK_DISABLED", "false")])));
        assert!(!sdk_disabled(&lookup(&[])));
    }

    #[test]
    fn env_and_options_combine() {
        let o = Options::parse("endpoint=http://127.0.0.1:4317,protocol=grpc,queue=1m").unwrap();
        let e = read_env(
            &o,
            &lookup(&[
                ("OTEL_SERVICE_NAME", "shop"),
                ("OTEL_RESOURCE_ATTRIBUTES", "service.version=2"),
                ("OTEL_METRIC_EXPORT_INTERVAL", "1500"),
            ]),
        )
        .unwrap();
        let c = e.config.unwrap();
        assert_eq!(c.profiles_endpoint, "http://127.0.0.1:4317");
        assert_eq!(c.queue_bytes, 1 << 20);
        assert_eq!(e.service_name.as_deref(), Some("shop"));
        assert_eq!(e.metric_interval, Some(Duration::from_millis(1500)));
        let none = read_env(&Options::default(), &lookup(&[])).unwrap();
        assert!(none.config.is_none());
        let bad = read_env(&o, &lookup(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")])).unwrap_err();
        assert!(bad.contains("OTEL_EXPORTER_OTLP_TIMEOUT"), "{bad}");
    }

    #[test]
    fn walk_reasons_have_names() {
        assert_eq!(walk_reason(2), "gc_active");
        assert_eq!(walk_reason(1), "no_class_load");
    }
}
