//! Harness for the cross-component tests: real JVMs with the real agent, read back with
//! independent tools (`go tool pprof`, the official OTLP classes).
//!
//! A test declares, in one [`JvmRun`], the JDK, the main class with its arguments, the agent
//! options and extra JVM flags; [`JvmRun::run`] compiles the Java workloads once, runs the
//! JVM with a deadline (killing it on timeout), and returns what it printed and the profiles
//! it wrote. [`pprof_top`] reads those profiles with `go tool pprof -top`.
//!
//! By subject:
//! - [`environment`]: the agent, jar and CLI the build made, scratch directories, tools on
//!   the PATH, the Python venv, free ports;
//! - [`jdks`]: the JDKs and the Java workloads compiled for them;
//! - [`jvm_run`]: a JVM run to its end ([`JvmRun`], [`RunOutput`]); [`running_jvm`]: one
//!   that keeps running while the test works on it ([`RunningJvm`]); [`process`]: any
//!   program run with a deadline;
//! - [`pprof`]: `go tool pprof -top` and `-traces`, parsed; [`native_code`]: C test
//!   libraries built with gcc, and `go tool pprof -raw` (locations with their mappings);
//! - [`otlp_receiver`]: the independent OTLP receiver; [`receive`]: a real `otelprof
//!   receive` or `serve`; [`s3`]: an S3 API server (moto) for stores in object storage;
//! - [`attach`]: what the attach tests share.
//!
//! What the tests use most is re-exported here.
//!
//! Prerequisites, installed by `scripts/test.sh`: `cargo build --release` (the agent and CLI),
//! Debian `golang-go` and `gcc`, OpenJDK 17 and Temurin 25. A missing prerequisite fails the test with a
//! message saying what to install; nothing is skipped.

pub mod attach;
pub mod environment;
pub mod jdks;
pub mod jvm_run;
pub mod native_code;
pub mod otlp_receiver;
pub mod pprof;
pub mod process;
pub mod receive;
pub mod running_jvm;
pub mod s3;

pub use attach::{attach_load, perf_events, AttachReply};
pub use environment::{
    agent_path, browser_node_modules, cli_path, free_port, jar_path, otelprof, python, release_dir,
    repo_root, scratch_dir, self_signed_cert, which,
};
pub use jdks::{all_jdks, classes, jdk17, jdk25, otel_classes, otel_sdk_jar, Jdk};
pub use jvm_run::{AgentMode, JvmRun, RunOutput, NO_LOOP_SAFEPOINTS};
pub use native_code::{native_mix_library, pprof_raw, seccomp_no_perf, Raw, RawSample};
pub use otlp_receiver::{OtlpProtocol, Receiver};
pub use pprof::{
    parse_pprof_top, parse_pprof_traces, pprof_top, pprof_traces, Top, TopRow, TraceSample,
};
pub use process::{run_with_timeout, Tied};
pub use running_jvm::RunningJvm;
