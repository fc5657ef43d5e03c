//! `tc [-s] qdisc show [dev IF]`: the system tc's lines, with those of the
//! interfaces dummynet shapes replaced by dummynet's qdisc and counters.

use std::process::ExitCode;

use dummynet_lang::tc::{format_qdisc, qdisc_json, GlobalOpts, Json};
use serde_json::Value;

use super::daemon::{Daemon, Namespace};
use super::{system, Refusal};

/// One element of `tc -j qdisc show`'s list: the system tc's as it printed
/// it, or ours, keys in iproute2's order.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Listed {
    System(Value),
    Ours(Json),
}

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
    let system = if dev.is_some() && !ours.is_empty() {
        String::new()
    } else {
        system::output(args)
    };
    if opts.json {
        let mut all: Vec<Value> = serde_json::from_str(&system).unwrap_or_default();
        all.retain(|q| !ours.iter().any(|d| q["dev"] == d.dev.as_str()));
        let mut listed: Vec<Listed> = all.into_iter().map(Listed::System).collect();
        for d in &ours {
            let stats = if opts.stats { Some(d.stats()?) } else { None };
            listed.push(Listed::Ours(qdisc_json(
                d.handle,
                &d.parent,
                named(dev, d),
                &d.qdisc,
                stats.as_ref(),
            )));
        }
        let text = if opts.pretty {
            serde_json::to_string_pretty(&listed)
        } else {
            serde_json::to_string(&listed)
        };
        println!("{}", text.unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    let mut blocks = Vec::new();
    for d in &ours {
        let stats = if opts.stats { Some(d.stats()?) } else { None };
        let line = format_qdisc(
            d.handle,
            &d.parent,
            named(dev, d),
            &d.qdisc,
            opts.iec,
            stats.as_ref(),
        );
        blocks.push((d.dev.clone(), line + "\n"));
    }
    print!("{}", merge(&system, blocks));
    Ok(ExitCode::SUCCESS)
}

/// The device a qdisc line names: as tc, only when the command named none.
fn named<'a>(dev: Option<&str>, d: &'a Daemon) -> Option<&'a str> {
    dev.is_none().then_some(d.dev.as_str())
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
