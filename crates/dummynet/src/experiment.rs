//! `dummynet experiment FILE`: the command line of
//! [`dummynet_tools::experiment`], its runs' progress and checks on
//! stderr, and the exit status.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dummynet_tools::experiment::{run_one, spec, write_matrix, RunOptions, RunSummary};

#[derive(Debug, clap::Args)]
pub struct ExperimentArgs {
    /// The experiment file (TOML): link, flows, sampling, sweep.
    #[arg(value_name = "FILE.toml")]
    pub file: PathBuf,
    /// The directory the runs' directories go in (made if need be).
    #[arg(
        short = 'o',
        long = "out",
        value_name = "DIR",
        default_value = "experiment-results"
    )]
    pub out: PathBuf,
    /// Read the file and list its runs, run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Figures as SVG only (a PNG takes seconds to rasterise, and needs a
    /// font on this system).
    #[arg(long)]
    pub svg_only: bool,
    /// Exit 1 when one of the file's `assert` checks fails on a run (they
    /// are evaluated, printed and written to summary.json either way).
    #[arg(long)]
    pub check: bool,
}

/// `dummynet experiment`.
pub fn main(args: ExperimentArgs) -> ExitCode {
    let runs = match spec::load(&args.file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("dummynet experiment: {}: {e}", args.file.display());
            return ExitCode::from(65);
        }
    };
    if args.dry_run {
        for r in &runs {
            println!(
                "{}: {} s, {} TCP flow(s), {} ping(s), {} UDP flow(s), {} check(s)",
                r.label,
                r.duration as f64 / 1e9,
                r.flows.len(),
                r.pings.len(),
                r.udp.len(),
                r.checks.len()
            );
        }
        return ExitCode::SUCCESS;
    }
    // Without root: into a user namespace of our own while this process
    // has one thread (the kernel's rule), as `dummynet shell` does, and a
    // network namespace of ours stands in for the host: the links' far
    // ends and the traffic's outer sides are there.
    let here = if nix::unistd::geteuid().is_root() {
        None
    } else {
        if let Err(e) = crate::live::rootless::enter() {
            eprintln!("dummynet experiment: {e}");
            return ExitCode::from(125);
        }
        match dummynet_io::netns::Netns::new_anonymous() {
            Ok(ns) => Some(ns),
            Err(e) => {
                eprintln!("dummynet experiment: without root: creating a namespace: {e}");
                return ExitCode::from(125);
            }
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(signal, Arc::clone(&stop));
    }
    let mut results = Vec::new();
    let mut failed = 0;
    for r in &runs {
        let dir = args.out.join(&r.label);
        eprintln!(
            "dummynet experiment: {} ({} s) -> {}",
            r.label,
            r.duration as f64 / 1e9,
            dir.display()
        );
        let options = RunOptions {
            png: !args.svg_only,
            netns: None,
        };
        let result = match &here {
            Some(ns) => ns
                .run(|| run_one(r, &dir, &stop, &options))
                .map_err(|e| format!("entering our namespace: {e}"))
                .and_then(|res| res.map_err(|e| e.to_string())),
            None => run_one(r, &dir, &stop, &options).map_err(|e| e.to_string()),
        };
        match result {
            Ok(s) => {
                for w in &s.warnings {
                    eprintln!("dummynet experiment: {}: {w}", r.label);
                }
                eprintln!("{}", one_line(&s));
                for c in &s.checks {
                    eprintln!("    {}", c.line());
                }
                failed += s.checks.iter().filter(|c| !c.ok).count();
                results.push(s);
            }
            Err(e) => {
                eprintln!("dummynet experiment: {}: {e}", r.label);
                return ExitCode::from(1);
            }
        }
        if stop.load(Ordering::Relaxed) {
            eprintln!("dummynet experiment: interrupted");
            return ExitCode::from(130);
        }
    }
    if results.len() > 1 {
        match write_matrix(&args.out, &results, !args.svg_only) {
            Ok(warnings) => {
                for w in warnings {
                    eprintln!("dummynet experiment: {w}");
                }
            }
            Err(e) => {
                eprintln!("dummynet experiment: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let checks: usize = results.iter().map(|s| s.checks.len()).sum();
    if checks > 0 {
        eprintln!(
            "dummynet experiment: {} of {checks} checks held{}",
            checks - failed,
            if failed > 0 && !args.check {
                " (without --check, the exit status does not say)"
            } else {
                ""
            }
        );
    }
    if failed > 0 && args.check {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn one_line(s: &RunSummary) -> String {
    let mut out = format!("  {}:", s.label);
    for (i, f) in s.flows.iter().enumerate() {
        out.push_str(&format!(
            " flow {i} {:.2} Mbit/s srtt p50 {} ms;",
            f.goodput_mean_bps / 1e6,
            f.srtt_p50_ms.map_or("-".into(), |v| format!("{v:.1}"))
        ));
    }
    if let Some(j) = s.jain_all_on {
        out.push_str(&format!(" Jain {j:.4};"));
    }
    for p in &s.link.paths {
        if let Some(u) = p.utilisation {
            out.push_str(&format!(" path {} {:.0}% used;", p.number, u * 100.0));
        }
    }
    out.push_str(&format!(
        " drops {:?}, CE {}",
        s.link.drops, s.link.ecn_marked
    ));
    out
}
