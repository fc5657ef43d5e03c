//! `dummynet tc ...`, and the binary run as `tc`: tc(8)'s `qdisc` commands
//! for netem and tbf, carried out by dummynet on the interface's egress in
//! the current network namespace (see [`daemon`]); everything else tc does
//! handed to the system's own tc ([`system`]), or refused naming what is
//! not emulated. The words are read by [`dummynet_lang::tc`].

mod daemon;
pub mod shim;
mod show;
mod system;

use std::process::ExitCode;

use dummynet_lang::tc::{self, Parent, Qdisc, QdiscRequest, TcCommand, TcErrorKind, Verb};

pub use daemon::state_root;

const USAGE: &str = "\
usage: tc [-s] [-i] [-n NETNS] qdisc show [dev IF]
       tc qdisc add|change|replace|del dev IF [handle H:] root netem|tbf|fq_codel [OPTIONS]
       (dummynet tc [--netns NAME] ... the same)

netem, tbf and fq_codel on root are carried out by dummynet on IF's egress in
this network namespace: a daemon per interface, with one pipe, stopped by del.
Everything else tc does (filter, class, other qdiscs) goes to the system's tc.
";

/// A refusal at the binary's edge: tc's words and tc's exit status (1 for
/// what tc itself would not read, 2 for what the kernel would refuse).
#[derive(Debug)]
pub(crate) struct Refusal {
    pub status: u8,
    pub message: String,
}

impl Refusal {
    pub(crate) fn kernel(message: impl Into<String>) -> Refusal {
        Refusal {
            status: 2,
            message: message.into(),
        }
    }
}

/// The command line after `tc` (or `dummynet tc`). A leading `--netns
/// NAME` (dummynet's option; tc's own `-n NAME` works too) works in the
/// named namespace (`ip netns`).
pub fn main(args: Vec<String>) -> ExitCode {
    if args.is_empty() || matches!(args[0].as_str(), "-h" | "--help" | "help" | "-help") {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(code) => code,
        Err(r) => {
            eprintln!("{}", r.message);
            ExitCode::from(r.status)
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode, Refusal> {
    let (netns, rest) = match args {
        [o, name, rest @ ..] if o == "--netns" => (Some(name.clone()), rest),
        [o] if o == "--netns" => {
            return Err(Refusal {
                status: 1,
                message: "dummynet tc: --netns needs a name: --netns NAME qdisc ...".into(),
            })
        }
        _ => (None, args),
    };
    let words: Vec<&str> = rest.iter().map(String::as_str).collect();
    let parsed = match tc::parse(&words) {
        Ok(t) => t,
        Err(e) if e.kind == TcErrorKind::NotEmulated => {
            return system::hand_over(args, netns.as_deref(), &e.message)
        }
        Err(e) => {
            return Err(Refusal {
                status: 1,
                message: e.to_string(),
            })
        }
    };
    let netns = netns.or_else(|| parsed.opts.netns.clone());
    match parsed.command {
        TcCommand::NotEmulated(what) => system::hand_over(
            args,
            netns.as_deref(),
            &format!("dummynet does not emulate {what}"),
        ),
        TcCommand::Show { dev } => {
            enter(netns.as_deref())?;
            show::show(&parsed.opts, dev.as_deref(), rest)
        }
        TcCommand::Qdisc(req) => {
            if let Some(why) = not_emulated(&req) {
                return system::hand_over(args, netns.as_deref(), &why);
            }
            enter(netns.as_deref())?;
            apply(&req, &words)
        }
    }
}

/// Moves this (single-threaded) process into the named namespace, so the
/// daemon it starts and the system tc it asks are that namespace's.
fn enter(netns: Option<&str>) -> Result<(), Refusal> {
    let Some(name) = netns else { return Ok(()) };
    dummynet_io::netns::Netns::open_named(name)
        .and_then(|ns| ns.enter_thread())
        .map_err(|e| Refusal {
            status: 1,
            message: format!("Cannot open network namespace \"{name}\": {e}"),
        })
}

/// Why a qdisc request is not one dummynet carries out, if it is not.
fn not_emulated(req: &QdiscRequest) -> Option<String> {
    if let Parent::Class(maj, min) = req.parent {
        return Some(format!(
            "dummynet does not emulate qdiscs under a class (`parent {maj:x}:{min:x}`): only `root`"
        ));
    }
    match &req.qdisc {
        Some(q) => match pipe_options(q) {
            Ok(_) => None,
            Err(e) => Some(e.message),
        },
        None => None,
    }
}

/// `tc qdisc add|change|replace|del dev IF root ...`.
fn apply(req: &QdiscRequest, words: &[&str]) -> Result<ExitCode, Refusal> {
    if nix::net::if_::if_nametoindex(req.dev.as_str()).is_err() {
        return Err(Refusal::kernel(format!(
            "Cannot find device \"{}\"",
            req.dev
        )));
    }
    let ns = daemon::Namespace::current()?;
    let current = ns.qdisc(&req.dev)?;
    match (req.verb, &current, &req.qdisc) {
        (Verb::Delete, None, _) => Err(Refusal::kernel(
            "Error: Cannot delete qdisc with handle of zero.",
        )),
        (Verb::Delete, Some(d), asked) => {
            if let Some(q) = asked {
                if q.kind() != d.qdisc.kind() {
                    return Err(Refusal::kernel("Error: Invalid qdisc name."));
                }
            }
            d.stop()?;
            Ok(ExitCode::SUCCESS)
        }
        (Verb::Add, Some(_), _) => Err(Refusal::kernel(
            "Error: Exclusivity flag on, cannot modify.",
        )),
        (Verb::Change, None, _) => Err(Refusal::kernel(
            "Error: Qdisc not found. To create specify NLM_F_CREATE flag.",
        )),
        (Verb::Change, Some(d), Some(q)) if q.kind() != d.qdisc.kind() => {
            Err(Refusal::kernel("Error: Invalid qdisc name."))
        }
        (_, _, None) => Err(Refusal {
            status: 1,
            message: "Error: Qdisc kind is missing.".into(),
        }),
        (_, Some(d), Some(q)) => {
            d.configure(q, words)?;
            Ok(ExitCode::SUCCESS)
        }
        (_, None, Some(q)) => {
            ns.start(req, q, words)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The pipe options of a qdisc: the language's for netem and tbf; fq_codel
/// is the pipe's scheduler (`type fq_codel ...`) on a link without a rate
/// of its own, queueing where the interface does. Its `memory_limit` and
/// `drop_batch` bound the kernel's work and have no counterpart here.
fn pipe_options(q: &Qdisc) -> Result<Vec<String>, tc::TcError> {
    let Qdisc::FqCodel(f) = q else {
        return q.pipe_options();
    };
    if f.ce_threshold_us.is_some() {
        return Err(tc::TcError {
            kind: TcErrorKind::NotEmulated,
            message: "dummynet does not emulate fq_codel's `ce_threshold`".into(),
            hints: Vec::new(),
        });
    }
    Ok(vec![
        "type".into(),
        "fq_codel".into(),
        "target".into(),
        format!("{}us", f.target_us),
        "interval".into(),
        format!("{}us", f.interval_us),
        "quantum".into(),
        f.quantum.to_string(),
        "limit".into(),
        f.limit.to_string(),
        "flows".into(),
        f.flows.to_string(),
        if f.ecn { "ecn" } else { "noecn" }.into(),
    ])
}

/// The pipe configuration of a qdisc: `pipe 1 config OPTIONS`, checked by
/// the language before anything is changed.
pub(crate) fn pipe_config(q: &Qdisc) -> Result<Vec<String>, Refusal> {
    let opts = pipe_options(q).map_err(|e| Refusal {
        status: 1,
        message: e.to_string(),
    })?;
    let argv: Vec<String> = ["pipe", "1", "config"]
        .into_iter()
        .map(String::from)
        .chain(opts)
        .collect();
    dummynet_lang::parse_args(&argv).map_err(|e| Refusal {
        status: 1,
        message: format!("dummynet cannot do this {}: {e}", q.kind()),
    })?;
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qdisc(line: &str) -> Qdisc {
        let words: Vec<&str> = line.split(' ').collect();
        match tc::parse(&words).map(|t| t.command) {
            Ok(TcCommand::Qdisc(r)) => r.qdisc.expect("a qdisc"),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn fq_codel_is_the_pipes_scheduler_with_its_parameters() {
        let argv = pipe_config(&qdisc(
            "qdisc add dev eth0 root fq_codel limit 1000 target 2ms interval 50ms noecn",
        ))
        .expect("the language takes it");
        assert_eq!(
            argv.join(" "),
            "pipe 1 config type fq_codel target 2000us interval 50000us quantum 1514 \
             limit 1000 flows 1024 noecn"
        );
        let refused =
            pipe_config(&qdisc("qdisc add dev eth0 root fq_codel ce_threshold 1ms")).unwrap_err();
        assert!(
            refused.message.contains("ce_threshold"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn netem_and_tbf_become_pipes_the_language_takes() {
        for line in [
            "qdisc add dev eth0 root netem delay 100ms 10ms 25% loss 1% duplicate 1% rate 1mbit",
            "qdisc add dev eth0 root handle 1: tbf rate 1mbit burst 32kbit latency 400ms",
        ] {
            let argv =
                pipe_config(&qdisc(line)).unwrap_or_else(|e| panic!("{line}: {}", e.message));
            assert_eq!(argv[..3], ["pipe", "1", "config"]);
        }
    }
}
