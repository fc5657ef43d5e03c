//! A walk passes over the rules that name an interface the packet is not
//! on (the classifier's interface index, for daemons with many links):
//! what it decides and counts must be what a walk through every rule
//! decides and counts.
//!
//! The oracle is the same ruleset with each `recv NAME` / `xmit NAME`
//! written as a pattern without wildcards (`IfaceSpec::Pattern`), which
//! matches the same interfaces but gives a rule no guard, so every rule is
//! tested.

mod common;

use common::*;
use dummynet_engine::config::*;
use dummynet_engine::{Direction, Engine, Verdict};

const LINKS: u16 = 24;

fn iface(name: &str, guarded: bool) -> IfaceSpec {
    if guarded {
        IfaceSpec::Name(name.into())
    } else {
        IfaceSpec::Pattern(name.into())
    }
}

fn recv(name: &str, guarded: bool) -> Cond {
    Cond::new(CondKind::Recv(iface(name, guarded)))
}

fn xmit(name: &str, guarded: bool) -> Cond {
    Cond::new(CondKind::Xmit(iface(name, guarded)))
}

fn dir(d: Direction) -> Cond {
    Cond::new(CondKind::Dir(d))
}

fn port(p: u16) -> Cond {
    Cond::new(CondKind::DstPort(vec![PortRange { lo: p, hi: p }]))
}

/// Joined links' rules (four a link, as `shell --join` writes them), with
/// rules among them that the index must not pass over: no interface, a
/// negated one, a state lookup, a `skipto` into the middle of the links.
fn configure(e: &mut Engine<u64>, guarded: bool) {
    let mut add = |c: Command| e.apply(0, c).unwrap();
    for k in 1..=LINKS {
        let (app, peer) = (format!("app-{k}"), format!("peer-{k}"));
        let base = 1000 + 4 * k;
        let (up, down) = (2 * u32::from(k) + 1, 2 * u32::from(k) + 2);
        add(pipe(up, 0, 1_000_000));
        add(pipe(down, 0, 1_000_000));
        add(rule(
            base,
            Action::Pipe(up),
            vec![dir(Direction::In), recv(&app, guarded)],
        ));
        add(rule(
            base + 1,
            Action::Pipe(down),
            vec![dir(Direction::In), recv(&peer, guarded)],
        ));
        add(rule(
            base + 2,
            Action::Allow,
            vec![dir(Direction::Out), xmit(&app, guarded)],
        ));
        add(rule(
            base + 3,
            Action::Allow,
            vec![dir(Direction::Out), xmit(&peer, guarded)],
        ));
    }
    add(rule(1002, Action::Count, vec![port(80)]));
    add(rule(
        1021,
        Action::Deny,
        vec![Cond::not(CondKind::Recv(iface("app-9", guarded))), port(23)],
    ));
    add(rule(
        1031,
        Action::Skipto(1070),
        vec![recv("app-3", guarded), port(22)],
    ));
    add(rule(
        1045,
        Action::Count,
        vec![recv("peer-4", guarded), xmit("app-4", guarded)],
    ));
    add(Command::AddRule(RuleSpec {
        number: Some(1050),
        action: Action::Allow,
        prob: None,
        body: vec![recv("peer-5", guarded), port(443)],
        extra: RuleExtra {
            state: Some(StateKind::Keep),
            ..RuleExtra::default()
        },
    }));
    add(rule(1061, Action::Deny, vec![recv("other", guarded)]));
    add(rule(65000, Action::Allow, vec![]));
}

/// What a verdict says, without the payload.
fn outcome(v: Verdict<u64>) -> String {
    match v {
        Verdict::Pass { rule, .. } => format!("pass {rule}"),
        Verdict::Drop {
            reason,
            rule,
            target,
            ..
        } => format!("drop {reason:?} {rule:?} {target:?}"),
        Verdict::Queued { rule, target } => format!("queued {rule} {target:?}"),
    }
}

#[test]
fn a_walk_over_indexed_rules_decides_and_counts_as_one_over_every_rule() {
    let mut names: Vec<String> = (1..=LINKS)
        .flat_map(|k| [format!("app-{k}"), format!("peer-{k}")])
        .collect();
    names.push("other".into());
    // Both engines number the interfaces alike (a pattern interns none).
    let mut fast: Engine<u64> = Engine::new(1);
    let mut every: Engine<u64> = Engine::new(1);
    for n in &names {
        assert_eq!(fast.iface(n), every.iface(n));
    }
    configure(&mut fast, true);
    configure(&mut every, false);
    // A small LCG: the same packets every run.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (x >> 33) as usize % n
    };
    let mut decided = std::collections::BTreeMap::<String, u32>::new();
    for i in 0..20_000u64 {
        let recv_name = &names[next(names.len())];
        let out = next(2) == 0;
        let xmit_name = &names[next(names.len())];
        let dport = [80, 22, 23, 443, 5001][next(5)];
        let mut info = udp(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            1000 + next(4) as u16,
            dport,
            100,
        );
        info.recv_if = Some(fast.iface(recv_name));
        if out {
            info.dir = Direction::Out;
            info.xmit_if = Some(fast.iface(xmit_name));
        }
        let now = i * 1_000;
        let (a, b) = (
            outcome(fast.input(now, info, i)),
            outcome(every.input(now, info, i)),
        );
        assert_eq!(a, b, "packet {i}: {info:?}");
        *decided.entry(a).or_default() += 1;
        while fast.poll(now).is_some() {}
        while every.poll(now).is_some() {}
    }
    // The packets reached rules of every kind, not only the default.
    assert!(
        decided.keys().any(|k| k.starts_with("queued")),
        "{decided:?}"
    );
    assert!(
        decided.keys().any(|k| k.starts_with("pass 10")),
        "{decided:?}"
    );
    assert!(decided.keys().any(|k| k.starts_with("drop")), "{decided:?}");
    let counts = |e: &Engine<u64>| -> Vec<(u16, u64, u64)> {
        e.snapshot()
            .rules
            .iter()
            .map(|r| (r.number, r.packets, r.bytes))
            .collect()
    };
    assert_eq!(counts(&fast), counts(&every));
}

/// Rules added, deleted and learned after packets have been classified
/// are seen by the next walk (the index is rebuilt after every change).
#[test]
fn the_index_follows_changes_to_the_rules() {
    let mut e: Engine<u64> = Engine::new(1);
    e.apply(0, pipe(1, 0, 1_000_000)).unwrap();
    e.apply(0, rule(100, Action::Pipe(1), vec![recv("a", true)]))
        .unwrap();
    e.apply(0, rule(65000, Action::Allow, vec![])).unwrap();
    let on = |e: &mut Engine<u64>, name: &str, i: u64| {
        let mut info = udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 100);
        info.recv_if = Some(e.iface(name));
        outcome(e.input(i, info, i))
    };
    assert_eq!(on(&mut e, "a", 1), "queued 100 Pipe(1)");
    assert_eq!(on(&mut e, "b", 2), "pass 65000");
    // A rule for `b` before the one for `a`; then `a`'s deleted.
    e.apply(3, rule(50, Action::Deny, vec![recv("b", true)]))
        .unwrap();
    assert!(on(&mut e, "b", 4).starts_with("drop"));
    assert_eq!(on(&mut e, "a", 5), "queued 100 Pipe(1)");
    e.apply(6, Command::DeleteRules(vec![100])).unwrap();
    assert_eq!(on(&mut e, "a", 7), "pass 65000");
    // An interface named by a rule before it ever carried a packet.
    e.apply(8, rule(60, Action::Deny, vec![recv("c", true)]))
        .unwrap();
    assert!(on(&mut e, "c", 9).starts_with("drop"));
}
