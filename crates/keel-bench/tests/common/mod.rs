//! Shared by the keel-bench test files: parsing a `keel bench` command line.

use clap::Parser;
use keel_bench::BenchArgs;

/// `keel bench`'s flags as a command line of their own.
#[derive(Parser)]
pub struct Cli {
    /// The flags.
    #[command(flatten)]
    pub bench: BenchArgs,
}

/// Parses `line` as the flags of `keel bench`, panicking with clap's message if they are bad.
pub fn args(line: &str) -> BenchArgs {
    Cli::try_parse_from(std::iter::once("keel-bench").chain(line.split_whitespace()))
        .unwrap_or_else(|e| panic!("{line}: {e}"))
        .bench
}
