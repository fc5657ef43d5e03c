//! The seam with `dummynet-lang`: the only place that knows its API, so a
//! change there is mended here.
//!
//! TEMPORARY: until dummynet-lang lands, a tiny parser for the commands the
//! examples use (`pipe N config bw B delay D queue Q`, `add N pipe|queue|allow|deny
//! ip from any to any [in|out]`).

use std::path::Path;

use dummynet_engine::config::{
    Action, Cond, CondKind, LinkConfig, PipeConfig, QueueLimit, RuleSpec,
};
use dummynet_engine::{Command, Direction, Snapshot};

pub fn commands(text: &str, _base_dir: Option<&Path>) -> Result<Vec<(usize, Command)>, String> {
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        let cmd =
            stub_command(&w).ok_or_else(|| format!("line {}: cannot parse `{line}`", i + 1))?;
        v.push((i + 1, cmd));
    }
    Ok(v)
}

fn stub_command(w: &[&str]) -> Option<Command> {
    match w {
        ["pipe", n, "config", rest @ ..] => {
            let mut pc = PipeConfig::default();
            let mut it = rest.chunks(2);
            for kv in &mut it {
                match kv {
                    ["bw", b] => pc.link.bw = crate::gen::parse_rate(b).ok()?,
                    ["delay", d] => pc.link.delay = crate::gen::parse_duration(d).ok()?,
                    ["queue", q] => pc.flowset.limit = QueueLimit::Slots(q.parse().ok()?),
                    _ => return None,
                }
            }
            let _ = LinkConfig::default();
            Some(Command::ConfigPipe(n.parse().ok()?, pc))
        }
        ["add", n, act @ .., "ip", "from", "any", "to", "any"]
        | ["add", n, act @ .., "ip", "from", "any", "to", "any", _] => {
            let action = match act {
                ["pipe", p] => Action::Pipe(p.parse().ok()?),
                ["queue", p] => Action::Queue(p.parse().ok()?),
                ["allow"] => Action::Allow,
                ["deny"] => Action::Deny,
                _ => return None,
            };
            let mut body = Vec::new();
            match w.last() {
                Some(&"in") => body.push(Cond::new(CondKind::Dir(Direction::In))),
                Some(&"out") => body.push(Cond::new(CondKind::Dir(Direction::Out))),
                Some(&"any") => {}
                _ => return None,
            }
            Some(Command::AddRule(RuleSpec {
                number: Some(n.parse().ok()?),
                action,
                prob: None,
                body,
            }))
        }
        _ => None,
    }
}

pub fn final_state(_snap: &Snapshot) -> String {
    String::new()
}
