//! `retina demo`: the embedded main job.

use clap::Args;

#[derive(Args)]
pub struct DemoArgs {}

pub fn run(_args: DemoArgs) -> anyhow::Result<()> {
    anyhow::bail!("retina demo: not built yet")
}
