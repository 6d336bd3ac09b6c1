//! `keel bench`: a load generator for any etcd v3 endpoint, with etcd `benchmark`'s flags.

use clap::Args;

/// Flags of `keel bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {}

/// Runs one benchmark and prints its report.
pub async fn run(_args: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("keel bench is not built yet")
}
