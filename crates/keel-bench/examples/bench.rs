//! `keel bench` as a standalone program, for running the load generator without the `keel`
//! binary: `cargo run --release -p keel-bench --example bench -- --conns 8 put --total 1000`.

use clap::Parser;

/// Command line of the standalone load generator.
#[derive(Debug, Parser)]
#[command(name = "keel-bench", about = "Load generator for any etcd v3 endpoint")]
struct Cli {
    #[command(flatten)]
    bench: keel_bench::BenchArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keel_bench::run(Cli::parse().bench).await
}
