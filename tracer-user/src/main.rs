//! `profinfer`: the tracer's command line (thin wrapper over `tracer_user::cli`).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = tracer_user::cli::Cli::parse();
    match tracer_user::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("profinfer: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
