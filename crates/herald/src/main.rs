//! The `herald` command line.

use clap::Parser;

/// Herald: the Kubernetes event system.
#[derive(Debug, Parser)]
#[command(name = "herald", version, about)]
enum Cli {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli {}
}
