//! `tc [-s] qdisc show [dev IF]`: the system tc's lines, with those of the
//! interfaces dummynet shapes replaced by dummynet's qdisc and counters.

use std::process::ExitCode;

use dummynet_lang::tc::{format_qdisc, GlobalOpts};

use super::daemon::{Daemon, Namespace};
use super::{system, Refusal};

pub(crate) fn show(
    opts: &GlobalOpts,
    dev: Option<&str>,
    args: &[String],
) -> Result<ExitCode, Refusal> {
    let ours: Vec<Daemon> = Namespace::current()?
        .daemons()
        .into_iter()
        .filter(|d| dev.is_none_or(|x| x == d.dev))
        .collect();
    if opts.json && !ours.is_empty() {
        return Err(Refusal {
            status: 1,
            message: "dummynet tc: `-json` output is not emulated for the qdiscs dummynet runs"
                .into(),
        });
    }
    let system = if dev.is_some() && !ours.is_empty() {
        String::new()
    } else {
        system::output(args)
    };
    let mut blocks = Vec::new();
    for d in &ours {
        let stats = if opts.stats { Some(d.stats()?) } else { None };
        blocks.push((d.dev.clone(), line(d, opts.iec, stats.as_ref())));
    }
    print!("{}", merge(&system, blocks));
    Ok(ExitCode::SUCCESS)
}

/// Our qdisc as tc prints it, `dev IF` in its place.
fn line(d: &Daemon, iec: bool, stats: Option<&dummynet_lang::tc::QdiscStats>) -> String {
    let s = format_qdisc(d.handle, &d.parent, &d.qdisc, iec, stats);
    let head = format!("qdisc {} {:x}: ", d.qdisc.kind(), d.handle);
    match s.strip_prefix(&head) {
        Some(rest) => format!("{head}dev {} {rest}\n", d.dev),
        None => s + "\n",
    }
}

/// The system's output with the blocks (a `qdisc ...` line and the lines
/// under it) of the devices in `ours` replaced by ours, in their place;
/// ours that the system did not list go last.
fn merge(system: &str, ours: Vec<(String, String)>) -> String {
    let mut out = String::new();
    let mut placed = vec![false; ours.len()];
    let mut skipping = false;
    for l in system.split_inclusive('\n') {
        if l.starts_with("qdisc ") {
            let dev = l
                .split_whitespace()
                .skip_while(|w| *w != "dev")
                .nth(1)
                .unwrap_or_default();
            skipping = false;
            if let Some(i) = ours.iter().position(|(d, _)| d == dev) {
                skipping = true;
                if !placed[i] {
                    placed[i] = true;
                    out += &ours[i].1;
                }
            }
        }
        if !skipping {
            out += l;
        }
    }
    for (i, (_, text)) in ours.iter().enumerate() {
        if !placed[i] {
            out += text;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_interfaces_lines_replace_the_systems_in_place() {
        let system = "qdisc noqueue 0: dev lo root refcnt 2 \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
qdisc mq 0: dev eth0 root \n Sent 5 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
qdisc pfifo_fast 0: dev eth0 parent :1 bands 3\n Sent 5 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
qdisc noqueue 0: dev veth1 root refcnt 2 \n";
        let ours = vec![
            (
                "eth0".to_string(),
                "qdisc netem 8001: dev eth0 root refcnt 2 limit 1000 delay 100ms\n".to_string(),
            ),
            (
                "gone0".to_string(),
                "qdisc tbf 1: dev gone0 root refcnt 2 rate 1Mbit burst 1500b lat 50ms\n"
                    .to_string(),
            ),
        ];
        assert_eq!(
            merge(system, ours),
            "qdisc noqueue 0: dev lo root refcnt 2 \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
qdisc netem 8001: dev eth0 root refcnt 2 limit 1000 delay 100ms\n\
qdisc noqueue 0: dev veth1 root refcnt 2 \n\
qdisc tbf 1: dev gone0 root refcnt 2 rate 1Mbit burst 1500b lat 50ms\n"
        );
    }
}
