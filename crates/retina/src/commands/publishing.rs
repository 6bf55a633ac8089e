//! The publication flags `serve`, `ingest` and `demo` share: which open-table
//! formats each checkpoint is published in, how often, and for how long a published
//! version stays readable.

use std::time::Duration;

use retina_storage::PublishOptions;

/// Formats a lake's checkpoints are published in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PublishFormat {
    Delta,
    Iceberg,
    None,
}

#[derive(clap::Args, Debug, Clone)]
pub struct PublishArgs {
    /// Publish checkpoints as open tables that other engines read:
    /// `delta,iceberg` (each table a Delta Lake table and an Iceberg v3 table in
    /// `tables/<table>`, deletion vectors hiding what the checkpoint does not see, the
    /// cut across tables in `_retina/published/latest.json`), `delta`, or `none`.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "delta,iceberg")]
    pub publish: Vec<PublishFormat>,
    /// How long a published version stays readable after a newer one replaces it:
    /// no file it references is deleted before.
    #[arg(long, visible_alias = "publish-retention", default_value_t = 3600.0)]
    pub publish_retention_seconds: f64,
    /// At least this long between publications (0: every checkpoint). Checkpoints
    /// in between are durable but not published; a clean shutdown publishes the last.
    #[arg(long, visible_alias = "publish-interval", default_value_t = 0.0)]
    pub publish_interval_seconds: f64,
}

impl PublishArgs {
    /// The flags as store options (`None`: publication is off).
    pub fn options(&self) -> anyhow::Result<Option<PublishOptions>> {
        let retention = seconds("--publish-retention-seconds", self.publish_retention_seconds)?;
        let interval = seconds("--publish-interval-seconds", self.publish_interval_seconds)?;
        publish_options(&self.publish, retention, interval)
    }
}

/// `--publish` with a retention and an interval as store options (`None`: off).
pub fn publish_options(formats: &[PublishFormat], retention: Duration, interval: Duration) -> anyhow::Result<Option<PublishOptions>> {
    let (delta, iceberg) = (formats.contains(&PublishFormat::Delta), formats.contains(&PublishFormat::Iceberg));
    if formats.contains(&PublishFormat::None) {
        if formats.len() > 1 {
            anyhow::bail!("--publish none cannot be combined with a format");
        }
        return Ok(None);
    }
    if iceberg && !delta {
        anyhow::bail!("--publish iceberg needs delta beside it (--publish delta,iceberg): the Delta commit decides which files changed");
    }
    Ok(Some(PublishOptions { iceberg, retention, interval, ..PublishOptions::every_checkpoint(retention) }))
}

/// A flag's seconds as a duration (zero or more, finite).
fn seconds(flag: &str, seconds: f64) -> anyhow::Result<Duration> {
    if !(seconds >= 0.0 && seconds.is_finite()) {
        anyhow::bail!("{flag} must be zero or a positive number of seconds, got {seconds}");
    }
    Ok(Duration::from_secs_f64(seconds))
}
