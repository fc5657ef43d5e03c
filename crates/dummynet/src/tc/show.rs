//! `tc [-s] qdisc show [dev IF]`: the system tc's lines, with those of the
//! interfaces dummynet shapes replaced by dummynet's qdisc and counters.

use std::process::ExitCode;

use dummynet_lang::tc::{format_qdisc, GlobalOpts, Loss, Qdisc, QdiscStats};
use serde_json::{json, Value};

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
    if opts.json && ours.iter().any(|d| !matches!(d.qdisc, Qdisc::Netem(_))) {
        return Err(Refusal {
            status: 1,
            message: "dummynet tc: `-json` output is emulated for netem only, not tbf or fq_codel"
                .into(),
        });
    }
    let system = if dev.is_some() && !ours.is_empty() {
        String::new()
    } else {
        system::output(args)
    };
    if opts.json {
        let mut all: Vec<Value> = serde_json::from_str(&system).unwrap_or_default();
        all.retain(|q| !ours.iter().any(|d| q["dev"] == d.dev.as_str()));
        for d in &ours {
            let stats = if opts.stats { Some(d.stats()?) } else { None };
            all.push(json(d, stats.as_ref()));
        }
        let text = if opts.pretty {
            serde_json::to_string_pretty(&all)
        } else {
            serde_json::to_string(&all)
        };
        println!("{}", text.unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
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

/// A netem qdisc as `tc -j qdisc show` prints it: times in seconds,
/// probabilities as fractions, the rate in bytes/s; with `stats`, tc's
/// counters beside the options.
fn json(d: &Daemon, stats: Option<&QdiscStats>) -> Value {
    let frac = |p: dummynet_lang::tc::units::Percent| f64::from(p.0) / f64::from(u32::MAX);
    let chance = |word: &str, c: &dummynet_lang::tc::Chance| json!({ word: frac(c.p), "correlation": frac(c.corr) });
    let mut o = serde_json::Map::new();
    if let Qdisc::Netem(n) = &d.qdisc {
        o.insert("limit".into(), json!(n.limit));
        o.insert(
            "delay".into(),
            json!({
                "delay": n.delay_us as f64 / 1e6,
                "jitter": n.jitter_us as f64 / 1e6,
                "correlation": frac(n.delay_corr),
            }),
        );
        if let Some(Loss::Random(c)) = &n.loss {
            o.insert("loss-random".into(), chance("loss", c));
        }
        for (word, c) in [
            ("duplicate", &n.duplicate),
            ("reorder", &n.reorder),
            ("corrupt", &n.corrupt),
        ] {
            if let Some(c) = c {
                o.insert(word.into(), chance(word, c));
            }
        }
        if let Some(r) = &n.rate {
            o.insert("rate".into(), json!({ "rate": r.bps / 8 }));
        }
        if let Some(seed) = n.seed {
            o.insert("seed".into(), json!(seed));
        }
        o.insert("ecn".into(), json!(n.ecn));
        o.insert("gap".into(), json!(n.gap));
    }
    let mut q = json!({
        "kind": d.qdisc.kind(),
        "handle": format!("{:x}:", d.handle),
        "dev": d.dev,
        "root": true,
        "refcnt": 2,
        "options": o,
    });
    if let Some(s) = stats {
        for (k, v) in [
            ("bytes", s.bytes),
            ("packets", s.packets),
            ("drops", s.drops),
            ("overlimits", s.overlimits),
            ("requeues", 0),
            ("backlog", s.backlog_bytes),
            ("qlen", s.backlog_packets),
        ] {
            q[k] = json!(v);
        }
    }
    q
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
