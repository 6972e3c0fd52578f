//! `profinfer`: the tracer's command line.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// eBPF-based tracer and analyzer for LLM inference.
#[derive(Parser)]
#[command(name = "profinfer", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the engine probe points this version knows.
    Symbols,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Symbols => {
            for s in common::engine_abi::symbols::ALL {
                println!("{s}");
            }
        }
    }
    ExitCode::SUCCESS
}
