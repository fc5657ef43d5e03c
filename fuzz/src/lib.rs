//! What the fuzz targets share: a guard against inputs that would make the
//! parser read files outside the fuzzer's control, and `show` of every kind
//! on a snapshot.

use dummynet_engine::Snapshot;

/// Whether `text` may be handed to the command parser. `profile FILE`,
/// `trace FILE` and `distribution FILE` read files; an absolute path or one
/// going up (`/dev/zero`, `../../dev/stdin`) would make the fuzzer read
/// devices and FIFOs, which says nothing about the parser. Relative paths
/// stay inside the fuzz directory.
pub fn safe_text(text: &str) -> bool {
    if text.contains("..") || text.contains('~') || text.starts_with('/') {
        return false;
    }
    // A `/` that starts a word (after any separator the lexer knows).
    let bytes = text.as_bytes();
    !bytes
        .windows(2)
        .any(|w| w[1] == b'/' && !w[0].is_ascii_alphanumeric())
}

/// Renders everything `show` (and `ipfw memory`) can print about `s`. None
/// of it may panic; a table listing may only fail for a table that does not
/// exist; no part of the memory report may exceed its worst case.
pub fn render_all(s: &Snapshot) -> usize {
    let mut n = 0;
    for counters in [false, true] {
        for timestamps in [false, true] {
            n += dummynet_lang::format_rules(s, &[], counters, timestamps).len();
        }
    }
    n += dummynet_lang::format_pipes(s, &[]).len();
    n += dummynet_lang::format_queues(s, &[]).len();
    n += dummynet_lang::format_scheds(s, &[]).len();
    n += dummynet_lang::format_sets(s).len();
    // `ipfw memory`: no part of the engine's memory above its worst case.
    for part in &s.memory.parts {
        if let Some(worst) = part.worst {
            assert!(
                part.now <= worst,
                "memory part {} uses {} bytes, above its worst case {worst}",
                part.name,
                part.now
            );
        }
    }
    n += s.memory.to_string().len();
    match dummynet_lang::format_tables(s, None) {
        Ok(t) => n += t.len(),
        Err(e) => assert!(s.tables.is_empty(), "table all list failed: {e}"),
    }
    for t in &s.tables {
        let out = dummynet_lang::format_tables(s, Some(&t.name));
        assert!(
            out.is_ok(),
            "table list of an existing table failed: {out:?}"
        );
    }
    n
}

/// Command lines the engine target picks from, `{a}` a small number (a
/// pipe, queue, scheduler, rule, set or table number), `{b}` a larger one
/// (a rate, a size, a time). Chosen to reach every part of the engine:
/// rules of each action, pipes with each impairment, queues on each
/// scheduler with each AQM, masks, tables, sets, states and scheduled steps.
pub const TEMPLATES: &[&str] = &[
    "add {a} pipe {a} ip from any to any",
    "add {a} pipe {a} ip from any to any out",
    "add {a} pipe {a} ip from any to any in",
    "add {a} queue {a} ip from any to any",
    "add {a} queue {a} udp from any to any dst-port {b}",
    "add {a} pipe tablearg ip from any to any lookup dst-port {a}",
    "add {a} allow ip from any to any",
    "add {a} deny ip from any to any",
    "add {a} count ip from any to any",
    "add {a} skipto {b} ip from any to any",
    "add {a} prob 0.5 pipe {a} ip from any to any",
    "add {a} allow tcp from any to any setup keep-state",
    "add {a} check-state",
    "add {a} allow ip from any to any keep-state limit src-addr {a}",
    "add {a} set {a} pipe {a} ip from 10.0.0.0/8 to any",
    "add {a} tag {a} ip from any to any",
    "add {a} pipe {a} ip from any to any tagged {a}",
    "add {a} call {b} ip from any to any",
    "add {a} return ip from any to any",
    "add {a} pipe {a} ip from any to any via em{a}",
    "add {a} deny ip from any to any iplen 0-{b}",
    "add {a} pipe {a} ip6 from any to any",
    "delete {a}",
    "delete set {a}",
    "set disable {a}",
    "set enable {a}",
    "set swap {a} {b}",
    "set move rule {a} to {a}",
    "zero",
    "zero {a}",
    "resetlog",
    "flush",
    "pipe flush",
    "queue flush",
    "disable one_pass",
    "enable one_pass",
    "disable firewall",
    "enable firewall",
    "pipe {a} config",
    "pipe {a} config bw {b}Kbit/s",
    "pipe {a} config bw {b}Kbit/s delay {a}ms",
    "pipe {a} config bw {b}bit/s queue {a}",
    "pipe {a} config bw {b}Kbit/s queue {b}Kbytes",
    "pipe {a} config delay {b}ms",
    "pipe {a} config bw {b}Kbit/s burst {b}",
    "pipe {a} config plr 0.{b}",
    "pipe {a} config bw {b}Kbit/s mask dst-ip 0xff",
    "pipe {a} config bw {b}Kbit/s mask all buckets {a}",
    "pipe {a} config bw {b}Kbit/s red 0.1/{a}/{b}/0.2",
    "pipe {a} config bw {b}Kbit/s gred 0.1/{a}/{b}/0.2",
    "pipe {a} config bw {b}Kbit/s codel target {a}ms interval {b}ms ecn",
    "pipe {a} config bw {b}Kbit/s pie",
    "pipe {a} config bw {b}Kbit/s type fq_codel",
    "pipe {a} config bw {b}Kbit/s type fq_pie",
    "pipe {a} config bw {b}Kbit/s type rr",
    "pipe {a} config bw {b}Kbit/s type qfq",
    "pipe {a} config bw {b}Kbit/s type prio",
    "pipe {a} config delay {a}ms jitter {a}ms",
    "pipe {a} config delay {b}ms jitter {a}ms correlation 25% distribution normal",
    "pipe {a} config delay {a}ms jitter {a}ms distribution pareto",
    "pipe {a} config loss {a}%",
    "pipe {a} config loss {a}% {b}%",
    "pipe {a} config loss gemodel {a}% {b}%",
    "pipe {a} config duplicate {a}%",
    "pipe {a} config corrupt {a}%",
    "pipe {a} config reorder {a}% gap {a}",
    "pipe {a} config delay {a}ms reorder {b}% 50%",
    "pipe {a} config bw {b}Kbit/s overhead {a}",
    "pipe {a} config bw {b}Kbit/s slot {a}ms {b}ms packets {a}",
    "pipe {a} modify bw {b}Kbit/s",
    "pipe {a} modify delay {a}ms",
    "pipe {a} delete",
    "queue {a} config pipe {a}",
    "queue {a} config pipe {a} weight {a}",
    "queue {a} config sched {a} weight {b} mask all",
    "queue {a} config pipe {a} queue {a} codel",
    "queue {a} config sched {a} priority {a}",
    "queue {a} delete",
    "sched {a} config pipe {a} type wf2q+",
    "sched {a} config pipe {a} type fifo",
    "sched {a} config pipe {a} type rr",
    "sched {a} config pipe {a} type qfq",
    "sched {a} config pipe {a} type prio",
    "sched {a} config pipe {a} type fq_codel target {a}ms quantum {b} flows {a}",
    "sched {a} config pipe {a} type fq_pie",
    "sched {a} config pipe {a} type fq_codel mask all",
    "sched {a} delete",
    "table {a} create type number",
    "table {a} add {a} {a}",
    "table {a} add {b} {a}",
    "table {a} delete {a}",
    "table {a} flush",
    "table {a} destroy",
    "sysctl net.inet.ip.dummynet.io_fast=1",
    "sysctl net.inet.ip.dummynet.io_fast=0",
    "sysctl net.inet.ip.dummynet.pipe_slot_limit={b}",
    "sysctl net.inet.ip.dummynet.expire=0",
    "sysctl net.inet.ip.fw.dyn_max={a}",
    "sysctl net.inet.ip.dummynet.fqcodel.limit={a}",
    "at {a}ms pipe {a} config bw {b}Kbit/s",
    "at {a}s pipe {a} delete",
    "at {a}ms flush",
    "at flush",
];

/// `template` with `{a}` and `{b}` replaced.
pub fn fill(template: &str, a: u16, b: u32) -> String {
    template
        .replace("{a}", &a.to_string())
        .replace("{b}", &b.to_string())
}
