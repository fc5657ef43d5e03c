//! `show`, `pipe show`, `queue show` and `sched show`, in FreeBSD's layout.
//!
//! Column widths and field order follow FreeBSD's sbin/ipfw (`show_static_rule`,
//! `list_pipes`, `list_flow`), because people compare this output with a
//! FreeBSD box by eye and feed it to scripts written for one.
//!
//! The impairments FreeBSD lacks (netem's and mahimahi's) leave those lines
//! as they are: each object that has some gets one more line of its own,
//! `    impair: ...`, under the line FreeBSD prints, so a script that reads
//! FreeBSD's lines still finds them where it expects.

use std::fmt::Write as _;

use dummynet_engine::classifier::LogEvent;
use dummynet_engine::config::{Action, ArgAction};
use dummynet_engine::config::{
    LinkConfig, QueueLimit, Settings, TableKey, TableName, DEFAULT_BUCKETS, DN_MAX_ID, MAX_NUMBER,
};
use dummynet_engine::flow::{FlowKey, FlowMask};
use dummynet_engine::impair::Impairment;
use dummynet_engine::stats::{FlowCounters, FlowsetView, LinkView, SchedView, Snapshot};
use dummynet_engine::time::{NS_PER_MS, NS_PER_SEC};

use crate::names::flow_proto_name;
use crate::rulefmt::format_rule_body;

/// How to print rules: which, and with what (ipfw's `show`/`list` and
/// their flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleShow<'a> {
    /// The rules to print (empty: all).
    pub numbers: &'a [u16],
    /// `show` (or `list -a`): packet and byte counters.
    pub counters: bool,
    /// `-t`: the last match time.
    pub timestamps: bool,
    /// `-d`: the dynamic rules after the static ones.
    pub dynamic: bool,
    /// `-S`: each rule's set.
    pub sets: bool,
    /// The wall clock beside the engine's: (engine time, the wall time
    /// then). With it, `-t` prints dates (RFC 3339, UTC) and `-T` seconds
    /// since the epoch, as FreeBSD's do; without (`sim`), the engine's
    /// seconds.
    pub wall: Option<(u64, std::time::SystemTime)>,
    /// `-T`: seconds since the epoch rather than a date.
    pub epoch: bool,
}

/// `ipfw show` (`counters`) or `ipfw list`, optionally with `-t` timestamps.
/// Counters are right-aligned to the widest value among the listed rules.
pub fn format_rules(s: &Snapshot, numbers: &[u16], counters: bool, timestamps: bool) -> String {
    format_rules_with(
        s,
        &RuleShow {
            numbers,
            counters,
            timestamps,
            ..RuleShow::default()
        },
    )
}

/// `ipfw [-adSt] show|list [N ...]`.
pub fn format_rules_with(s: &Snapshot, how: &RuleShow<'_>) -> String {
    let (numbers, counters, timestamps) = (how.numbers, how.counters, how.timestamps);
    let rules: Vec<_> = s
        .rules
        .iter()
        .filter(|r| numbers.is_empty() || numbers.contains(&r.number))
        .collect();
    let width = |f: &dyn Fn(&&dummynet_engine::stats::RuleView) -> u64| {
        rules
            .iter()
            .map(|r| f(r).to_string().len())
            .max()
            .unwrap_or(1)
    };
    let (pw, bw) = (width(&|r| r.packets), width(&|r| r.bytes));
    let stamp = |t: u64| match how.wall {
        Some((engine_now, wall_now)) => {
            let at = wall_now - std::time::Duration::from_nanos(engine_now.saturating_sub(t));
            if how.epoch {
                at.duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
                    .to_string()
            } else {
                humantime::format_rfc3339_seconds(at).to_string()
            }
        }
        None => format_time(t),
    };
    let stamps: Vec<String> = rules
        .iter()
        .map(|r| r.last_match.map(stamp).unwrap_or_default())
        .collect();
    let tw = stamps.iter().map(String::len).max().unwrap_or(0);
    let mut out = String::new();
    for (r, stamp) in rules.iter().zip(&stamps) {
        let _ = write!(out, "{:05}", r.number);
        if counters {
            let _ = write!(out, " {:>pw$} {:>bw$}", r.packets, r.bytes);
        }
        if timestamps && tw > 0 {
            let _ = write!(out, " {stamp:>tw$}");
        }
        let body = if r.is_default {
            default_rule_body(&s.settings).to_string()
        } else {
            format_rule_body(&r.spec)
        };
        if how.sets {
            let _ = write!(out, " set {}", r.spec.extra.set);
        }
        let _ = writeln!(out, " {body}");
    }
    if how.dynamic && !s.states.is_empty() {
        out.push_str(&format_states(s, numbers, pw.max(1), bw.max(1)));
    }
    out
}

/// ipfw's `## Dynamic rules (N):` section: per state, its rule, counters,
/// time to live and flow.
fn format_states(s: &Snapshot, numbers: &[u16], pw: usize, bw: usize) -> String {
    let states: Vec<_> = s
        .states
        .iter()
        .filter(|st| numbers.is_empty() || numbers.contains(&st.rule))
        .collect();
    let mut out = format!("## Dynamic rules ({}):\n", states.len());
    for st in states {
        let k = &st.key;
        let proto = flow_proto_name(k.proto).map_or_else(|| k.proto.to_string(), str::to_string);
        let _ = writeln!(
            out,
            "{:05} {:>pw$} {:>bw$} ({}s) {} {proto} {} {} <-> {} {} :{}",
            st.rule,
            st.packets,
            st.bytes,
            st.expires_in.div_ceil(NS_PER_SEC),
            if st.limit { "LIMIT" } else { "STATE" },
            k.src_ip(),
            k.sport,
            k.dst_ip(),
            k.dport,
            st.name
        );
    }
    out
}

/// A `log` rule's match as FreeBSD writes it to syslog: `ipfw: 100 Accept
/// TCP 10.0.0.1:5000 10.0.0.2:80 out via em0`, after the engine's time.
pub fn format_log(e: &LogEvent, recv: Option<&str>, xmit: Option<&str>) -> String {
    let v = e.arg;
    let action = match e.action {
        Action::Allow => "Accept".to_string(),
        Action::Deny => "Deny".to_string(),
        Action::Count => "Count".to_string(),
        Action::Pipe(n) => format!("Pipe {n}"),
        Action::Queue(n) => format!("Queue {n}"),
        Action::Skipto(n) => format!("Skipto {n}"),
        Action::Call(n) => format!("Call {n}"),
        Action::Return => "Return".to_string(),
        Action::CheckState => "Check-state".to_string(),
        Action::Tablearg(a) => format!(
            "{} {v}",
            match a {
                ArgAction::Pipe => "Pipe",
                ArgAction::Queue => "Queue",
                ArgAction::Skipto => "Skipto",
                ArgAction::Call => "Call",
            }
        ),
    };
    let k = &e.key;
    let ends = |port: bool| {
        if port {
            format!("{}:{} {}:{}", k.src_ip(), k.sport, k.dst_ip(), k.dport)
        } else {
            format!("{} {}", k.src_ip(), k.dst_ip())
        }
    };
    let what = match k.proto {
        6 => format!("TCP {}", ends(true)),
        17 => format!("UDP {}", ends(true)),
        1 => format!("ICMP {}", ends(false)),
        58 => format!("ICMPv6 {}", ends(false)),
        p => format!("P:{p} {}", ends(false)),
    };
    let (dir, iface) = match e.dir {
        dummynet_engine::Direction::In => ("in", recv),
        dummynet_engine::Direction::Out => ("out", xmit),
    };
    let via = iface.map(|i| format!(" via {i}")).unwrap_or_default();
    format!(
        "ipfw: {} {} {action} {what} {dir}{via} ({} bytes)",
        format_time(e.at),
        e.rule,
        e.len
    )
}

/// `ipfw set show`: the disabled sets, then the enabled ones.
pub fn format_sets(s: &Snapshot) -> String {
    let list = |disabled: bool| -> String {
        (0..32u32)
            .filter(|n| (s.disabled_sets >> n & 1 == 1) == disabled)
            .map(|n| format!(" {n}"))
            .collect()
    };
    let mut out = String::new();
    if s.disabled_sets != 0 {
        let _ = write!(out, "disable{} ", list(true));
    }
    let _ = writeln!(out, "enable{}", list(false));
    out
}

/// `ipfw table N list` for a table that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("table {0} does not exist")]
pub struct NoSuchTable(pub TableName);

/// `ipfw table N list` (`None`: every table), as FreeBSD 11 lists them.
pub fn format_tables(s: &Snapshot, name: Option<&TableName>) -> Result<String, NoSuchTable> {
    let mut out = String::new();
    let mut found = false;
    for t in s
        .tables
        .iter()
        .filter(|t| name.is_none_or(|n| *n == t.name))
    {
        found = true;
        let _ = writeln!(out, "--- table({}), set(0) ---", t.name);
        for (k, v) in &t.entries {
            let key = match k {
                TableKey::Addr(m) => format!("{}/{}", m.addr, m.prefix),
                TableKey::Iface(n) => n.clone(),
                TableKey::Number(n) => n.to_string(),
            };
            let _ = writeln!(out, "{key} {v}");
        }
    }
    match name {
        Some(n) if !found => Err(NoSuchTable(n.clone())),
        _ => Ok(out),
    }
}

fn default_rule_body(settings: &Settings) -> &'static str {
    if settings.default_to_accept {
        "allow ip from any to any"
    } else {
        "deny ip from any to any"
    }
}

/// The time of a rule's last match, in seconds on the engine's clock (which
/// is not wall time, so FreeBSD's `ctime` form would be a lie).
fn format_time(ns: u64) -> String {
    format!("{}.{:06}", ns / NS_PER_SEC, ns % NS_PER_SEC / 1_000)
}

/// `pipe show`: for each pipe, its link, its implicit queue (N + 131072) and
/// its FIFO scheduler (N + 65536) with the scheduler's instances.
pub fn format_pipes(s: &Snapshot, numbers: &[u32]) -> String {
    let mut out = String::new();
    for link in sorted(&s.links, |l| l.number)
        .filter(|l| l.number <= MAX_NUMBER && wanted(numbers, l.number))
    {
        out.push_str(&link_line(link));
        if let Some(fs) = s
            .flowsets
            .iter()
            .find(|f| f.number == link.number + 2 * DN_MAX_ID)
        {
            out.push_str(&hold_line(&link.config, fs, s.settings.held_limit));
            out.push_str(&flowset_lines(fs));
        }
        if let Some(sc) = s
            .scheds
            .iter()
            .find(|x| x.number == link.number + DN_MAX_ID)
        {
            out.push_str(&sched_lines(sc, s));
        }
    }
    out
}

/// `queue show`: user queues (1..65535) and their flows.
pub fn format_queues(s: &Snapshot, numbers: &[u32]) -> String {
    let mut out = String::new();
    for fs in sorted(&s.flowsets, |f| f.number)
        .filter(|f| f.number <= MAX_NUMBER && wanted(numbers, f.number))
    {
        out.push_str(&flowset_lines(fs));
        out.push_str(&flow_table(
            sorted(&fs.flows, |f| f.id)
                .filter(|f| f.sub_queue.is_none())
                .map(|f| (&f.id, &f.counters)),
        ));
        out.push_str(&sub_queue_table(s, fs));
    }
    out
}

/// The queues of a flowset feeding FQ-CoDel or FQ-PIE: the scheduler's
/// sub-queues, one per hash bucket of the 5-tuple, listed by index (they
/// are no flow, so they get no addresses). FreeBSD keeps them inside the
/// scheduler and `ipfw queue show` lists none; they are shown here because
/// their counters tell how the flows shared the link.
fn sub_queue_table(s: &Snapshot, fs: &FlowsetView) -> String {
    let mut rows: Vec<(u32, &FlowCounters)> = fs
        .flows
        .iter()
        .filter_map(|f| f.sub_queue.map(|b| (b, &f.counters)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    rows.sort_by_key(|r| r.0);
    let kind = s
        .scheds
        .iter()
        .find(|x| x.number == fs.sched)
        .map_or("flow-queueing", |x| x.kind);
    let mut out = format!(
        "    {kind} sub-queues of sched {} (each 5-tuple hashed to one), by index:\n{HEADER_SUB}\n",
        fs.sched
    );
    for (i, (b, c)) in rows.into_iter().enumerate() {
        let _ = writeln!(out, "{i:3} {b:>9} {}", counter_columns(c));
    }
    out
}

/// `sched show`: user schedulers (1..65535), each after the link it drives.
pub fn format_scheds(s: &Snapshot, numbers: &[u32]) -> String {
    let mut out = String::new();
    for sc in sorted(&s.scheds, |x| x.number)
        .filter(|x| x.number <= MAX_NUMBER && wanted(numbers, x.number))
    {
        if let Some(link) = s.links.iter().find(|l| l.number == sc.number) {
            out.push_str(&link_line(link));
        }
        out.push_str(&sched_lines(sc, s));
    }
    out
}

fn sorted<T, K: Ord>(items: &[T], key: impl Fn(&T) -> K) -> impl Iterator<Item = &T> {
    let mut v: Vec<&T> = items.iter().collect();
    v.sort_by_key(|x| key(x));
    v.into_iter()
}

fn wanted(numbers: &[u32], n: u32) -> bool {
    numbers.is_empty() || numbers.contains(&n)
}

/// `00001:  50.000 Mbit/s   10 ms burst 0`
fn link_line(link: &LinkView) -> String {
    let LinkConfig {
        bw,
        delay,
        burst,
        profile,
        ..
    } = &link.config;
    // A profile's own `bw` is the link's, as the engine runs it.
    let bw = profile.as_ref().and_then(|p| p.bw).unwrap_or(*bw);
    let mut line = format!(
        "{:05}: {} {} ms burst {burst}",
        link.number,
        format_bw(bw),
        format_delay(*delay)
    );
    if let Some(p) = profile {
        let _ = write!(
            line,
            " profile: name \"{}\" loss {:.6} samples {}",
            p.name,
            p.loss_level,
            p.samples.len()
        );
    }
    line.push('\n');
    line.push_str(&link_impairments(&link.config));
    line
}

/// `    hold: ...`: the most a pipe with a delay can hold, which its queue
/// limit alone does not say: what the link puts in its delay line during
/// one `delay` (bandwidth × delay) besides what waits in its queue (per
/// flow under a mask). An unlimited pipe moves whatever arrives into its
/// delay line, so only `held_limit` bounds it. Nothing for a pipe without
/// delay, which holds no more than its queue.
fn hold_line(l: &LinkConfig, fs: &FlowsetView, held_limit: u64) -> String {
    if l.delay == 0 {
        return String::new();
    }
    let queue = match fs.limit {
        QueueLimit::Slots(n) => format!("{n} slots"),
        QueueLimit::Bytes(b) => format!("{b} bytes"),
    };
    let per_flow = if fs.mask.is_empty() { "" } else { " per flow" };
    let bw = l.profile.as_ref().and_then(|p| p.bw).unwrap_or(l.bw);
    if bw == 0 {
        let limit = match held_limit {
            0 => "no held_limit set".to_string(),
            b => format!("held_limit {b} bytes bounds it"),
        };
        return format!(
            "    hold: queue {queue}{per_flow} + delay line unbounded by rate ({limit})\n"
        );
    }
    let line = u128::from(bw) * u128::from(l.delay) / (8 * u128::from(NS_PER_SEC));
    format!("    hold: queue {queue}{per_flow} + delay line {line} bytes (bw x delay)\n")
}

/// The line under a link's for its impairments, or nothing without any.
fn link_impairments(l: &LinkConfig) -> String {
    impair_line(l.impairments())
}

/// `    impair: WORDS...` with each impairment's words, or nothing.
fn impair_line<'a>(all: impl Iterator<Item = &'a dyn Impairment>) -> String {
    let parts: Vec<String> = all.map(|i| i.display()).collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("    impair: {}\n", parts.join(" "))
    }
}

/// `trace NAME [once]`, as the option is written (looping is the default),
/// so that the line reads back as the options it shows.
fn format_bw(bw: u64) -> String {
    let b = bw as f64;
    match bw {
        0 => "unlimited".to_string(),
        1_000_000_000.. => format!("{:7.3} Gbit/s", b / 1e9),
        1_000_000.. => format!("{:7.3} Mbit/s", b / 1e6),
        1_000.. => format!("{:7.3} Kbit/s", b / 1e3),
        _ => format!("{bw:7} bit/s"),
    }
}

/// Whole milliseconds as FreeBSD prints them (`{:4}`); sub-millisecond
/// delays, which FreeBSD's tick cannot express, with three decimals.
fn format_delay(ns: u64) -> String {
    if ns.is_multiple_of(NS_PER_MS) {
        format!("{:4}", ns / NS_PER_MS)
    } else {
        format!("{:4}", format!("{:.3}", ns as f64 / NS_PER_MS as f64))
    }
}

/// The flowset line and, if masked, its mask line.
fn flowset_lines(fs: &FlowsetView) -> String {
    let qsize = match fs.limit {
        QueueLimit::Slots(n) => format!("{n:3} sl."),
        QueueLimit::Bytes(b) if b >= 8192 => format!("{} KB", b / 1024),
        QueueLimit::Bytes(b) => format!("{b} B"),
    };
    // FreeBSD prints plr glued to the size (`50 sl.plr 0.1`); a space reads better.
    let plr = if fs.plr.is_zero() {
        String::new()
    } else {
        format!(" plr {:.6}", fs.plr.as_f64())
    };
    let buckets = if fs.mask.is_empty() { 1 } else { fs.buckets };
    // A pipe's implicit queue has no weight of its own; FreeBSD prints 0.
    let weight = if fs.number > 2 * DN_MAX_ID {
        0
    } else {
        fs.weight
    };
    let mut out = format!(
        "q{:05} {qsize}{plr} {} flows ({buckets} buckets) sched {} weight {weight} lmax {} pri {} {}\n",
        fs.number,
        fs.flows.len(),
        fs.sched,
        fs.lmax,
        fs.pri,
        fs.aqm
    );
    out.push_str(&impair_line(fs.impairments()));
    out.push_str(&mask_lines(&fs.mask));
    out
}

/// The scheduler line, its parameters and mask, and its instances.
fn sched_lines(sc: &SchedView, s: &Snapshot) -> String {
    let masked = !sc.mask.is_empty();
    // FreeBSD prints 0 buckets for an unmasked scheduler. A pipe's FIFO
    // scheduler (N + 65536) shares the hash size of the pipe's queue
    // (N + 131072); other schedulers have no `buckets` option and use the default.
    let pipe_queue = || {
        s.flowsets
            .iter()
            .find(|f| f.number == sc.number + DN_MAX_ID)
    };
    let buckets = if !masked {
        0
    } else if sc.number > DN_MAX_ID {
        pipe_queue().map_or(DEFAULT_BUCKETS, |f| f.buckets)
    } else {
        DEFAULT_BUCKETS
    };
    let mut out = format!(
        " sched {} type {} flags 0x{:x} {buckets} buckets {} active\n",
        sc.number,
        sc.kind,
        u8::from(masked),
        sc.instances.len()
    );
    // FreeBSD prints FQ_CODEL's and FQ_PIE's parameter line, defaults
    // included, under the scheduler line; other types list what was given.
    let describe = dummynet_engine::sched::lookup(sc.kind).and_then(|t| t.describe);
    if let Some(describe) = describe {
        let _ = writeln!(out, "{}", describe(&sc.params));
    } else if !sc.params.is_empty() {
        let params: Vec<String> = sc.params.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(out, "   {}", params.join(" "));
    }
    out.push_str(&mask_lines(&sc.mask));
    out.push_str(&flow_table(
        sorted(&sc.instances, |i| i.id).map(|i| (&i.id, &i.counters)),
    ));
    out
}

/// FreeBSD's `print_mask`: the IPv4 form, and the IPv6 form when the mask has
/// IPv6 bits (both for `mask all`, which covers both families).
fn mask_lines(m: &FlowMask) -> String {
    if m.is_empty() {
        return String::new();
    }
    let has_v6 = m.src_ip6 != 0 || m.dst_ip6 != 0 || m.flow_id != 0;
    let mut out = String::new();
    if !has_v6 || m.src_ip != 0 || m.dst_ip != 0 {
        let _ = writeln!(
            out,
            "    mask:  0x{:02x} 0x{:08x}/0x{:04x} -> 0x{:08x}/0x{:04x}",
            m.proto, m.src_ip, m.src_port, m.dst_ip, m.dst_port
        );
    }
    if has_v6 {
        let _ = writeln!(
            out,
            "        mask: proto: 0x{:02x}, flow_id: 0x{:08x},  {}/0x{:04x} -> {}/0x{:04x}",
            m.proto,
            m.flow_id,
            std::net::Ipv6Addr::from(m.src_ip6),
            m.src_port,
            std::net::Ipv6Addr::from(m.dst_ip6),
            m.dst_port
        );
    }
    out
}

const HEADER_V4: &str =
    "BKT Prot ___Source IP/port____ ____Dest. IP/port____ Tot_pkt/bytes Pkt/Byte Drp";
const HEADER_V6: &str = "BKT ___Prot___ _flow-id_ ______________Source IPv6/port_______________ \
                         _______________Dest. IPv6/port_______________ Tot_pkt/bytes Pkt/Byte Drp";

const HEADER_SUB: &str = "BKT Sub-queue Tot_pkt/bytes Pkt/Byte Drp";

/// FreeBSD's counter columns of a flow row.
fn counter_columns(c: &FlowCounters) -> String {
    format!(
        "{:4} {:8} {:2} {:4} {:3}",
        c.tot_pkts, c.tot_bytes, c.len_pkts, c.len_bytes, c.drops
    )
}

/// FreeBSD's `list_flow` rows, with a header before the first row and again
/// whenever the address family changes.
fn flow_table<'a>(rows: impl Iterator<Item = (&'a FlowKey, &'a FlowCounters)>) -> String {
    let mut out = String::new();
    let mut family = None;
    for (i, (k, c)) in rows.enumerate() {
        if family != Some(k.v6) {
            out.push_str(if k.v6 { HEADER_V6 } else { HEADER_V4 });
            out.push('\n');
            family = Some(k.v6);
        }
        let counters = counter_columns(c);
        let (src, dst) = (k.src_ip().to_string(), k.dst_ip().to_string());
        let _ = if k.v6 {
            let proto = flow_proto_name(k.proto)
                .map_or_else(|| format!("{:9}", k.proto), |n| format!("{n:>9}"));
            writeln!(
                out,
                "{i:3} {proto} {:7}  {src:>39}/{:<5}  {dst:>39}/{:<5} {counters}",
                k.flow_label, k.sport, k.dport
            )
        } else {
            let proto = flow_proto_name(k.proto)
                .map_or_else(|| format!("{:4}", k.proto), |n| format!("{n:<4}"));
            writeln!(
                out,
                "{i:3} {proto} {src:>15}/{:<5} {dst:>15}/{:<5} {counters}",
                k.sport, k.dport
            )
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dummynet_engine::config::{Correlated, Corrupt, Duplicate, FlowsetConfig, LossModel};
    use dummynet_engine::rng::Probability;

    fn p(x: f64) -> Probability {
        Probability::new(x).unwrap()
    }

    #[test]
    fn listing_a_missing_table_names_it() {
        let snap = Snapshot::default();
        let name = TableName::Name("blocked".into());
        let e = format_tables(&snap, Some(&name)).unwrap_err();
        assert_eq!(e, NoSuchTable(name));
        assert_eq!(e.to_string(), "table blocked does not exist");
        assert_eq!(format_tables(&snap, None).as_deref(), Ok(""));
    }

    #[test]
    fn flowset_impairment_lines() {
        let line = |loss, duplicate, corrupt| {
            let fs = FlowsetConfig {
                loss,
                duplicate,
                corrupt,
                ..FlowsetConfig::default()
            };
            impair_line(fs.impairments())
        };
        let ge = LossModel::GilbertElliott {
            p: p(0.01),
            r: p(0.3),
            loss_bad: Probability::ONE,
            loss_good: Probability::ZERO,
        };
        assert_eq!(
            line(
                Some(ge),
                Some(Duplicate(Correlated::new(p(0.01), Probability::ZERO))),
                Some(Corrupt(Correlated::new(p(0.001), Probability::ZERO))),
            ),
            "    impair: loss gemodel p 1% r 30% 1-h 100% 1-k 0% duplicate 1% corrupt 0.1%\n"
        );
        let state = LossModel::FourState {
            p13: p(0.01),
            p31: p(0.99),
            p32: Probability::ZERO,
            p23: Probability::ONE,
            p14: p(0.005),
        };
        assert_eq!(
            line(Some(state), None, None),
            "    impair: loss state p13 1% p31 99% p32 0% p23 100% p14 0.5%\n"
        );
        let random = LossModel::Random(Correlated::new(p(0.05), p(0.25)));
        assert_eq!(
            line(
                Some(random),
                None,
                Some(Corrupt(Correlated::new(p(0.02), p(0.1))))
            ),
            "    impair: loss 5% correlation 25% corrupt 2% correlation 10%\n"
        );
        assert_eq!(line(None, None, None), "");
    }
}
