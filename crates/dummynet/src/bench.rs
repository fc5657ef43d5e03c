//! `dummynet bench`: synthetic packets through the engine, no I/O. (In progress.)

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// allow | pipe | bw1g | delay10ms
    #[arg(long)]
    pub scenario: Option<String>,
}

pub fn run(_args: BenchArgs) -> ExitCode {
    eprintln!("dummynet bench: not implemented yet");
    ExitCode::FAILURE
}
