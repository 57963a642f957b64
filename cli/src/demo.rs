//! placeholder
#[derive(Debug, clap::Args)]
pub struct DemoArgs {}
pub fn command(_: &DemoArgs) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("todo")
}
