//! `dummynet ipfw --json ...`: what the read commands show (`show`, `pipe
//! show`, `queue show`, `sched show`, `table ... list`, `set show`,
//! `memory`), as JSON documents whose field names are a promise (the book:
//! "JSON views"). They are built from a [`Snapshot`] on the client's
//! thread, never on the data plane's, through structs of their own rather
//! than the engine's types, so the engine can change without breaking a
//! script. Units are in the names: durations integer nanoseconds (`_ns`),
//! rates bit/s (`_bps`), sizes and byte counters `_bytes`, packet counters
//! `_packets`; probabilities are fractions in 0..1.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use dummynet_engine::config::{QueueLimit, TableKey, DN_MAX_ID, MAX_NUMBER};
use dummynet_engine::flow::{FlowKey, FlowMask};
use dummynet_engine::stats::{FlowCounters, FlowsetView, LinkView, SchedView};
use dummynet_engine::{Nanos, Snapshot};
use serde::Serialize;

use super::stats_json::{Memory, MemoryPart};

/// `ipfw --json show|list [N ...]` (`-d`: with `states`).
#[derive(Debug, Serialize)]
pub struct RulesJson {
    /// The engine's clock when the snapshot was taken (what `last_match_ns`
    /// counts on).
    pub now_ns: Nanos,
    pub rules: Vec<RuleJson>,
    /// Dynamic rules (`keep-state`, `limit`); only with `-d`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub states: Option<Vec<StateJson>>,
}

#[derive(Debug, Serialize)]
pub struct RuleJson {
    pub number: u16,
    pub set: u8,
    /// The rule as `ipfw list` prints it after its number.
    pub rule: String,
    pub packets: u64,
    pub bytes: u64,
    /// When it last matched, on the engine's clock (`now_ns`'s).
    pub last_match_ns: Option<Nanos>,
    /// Matches logged since the last `resetlog`.
    pub logged: u32,
    /// Rule 65535.
    pub default: bool,
}

/// A flow as the engine keys it.
#[derive(Debug, Serialize)]
pub struct FlowJson {
    pub proto: u8,
    pub src: String,
    pub dst: String,
    pub src_port: u16,
    pub dst_port: u16,
    /// IPv6 flow label; 0 for IPv4.
    pub flow_label: u32,
}

#[derive(Debug, Serialize)]
pub struct StateJson {
    /// The rule that made it.
    pub rule: u16,
    pub flow: FlowJson,
    /// Its flow name (`default` unless `:name`).
    pub name: String,
    pub packets: u64,
    pub bytes: u64,
    pub expires_in_ns: Nanos,
    /// Made by `limit` rather than `keep-state`.
    pub limit: bool,
}

/// A mask (`mask src-ip 0xffffff00 ...`); addresses in their usual form.
#[derive(Debug, Serialize)]
pub struct MaskJson {
    pub src_ip: String,
    pub dst_ip: String,
    pub src_ip6: String,
    pub dst_ip6: String,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    pub flow_id: u32,
}

/// A queue's counters (one per flow of a mask, or one without a mask).
#[derive(Debug, Serialize)]
pub struct FlowCountersJson {
    pub flow: FlowJson,
    /// For a queue feeding FQ-CoDel or FQ-PIE: the scheduler's sub-queue
    /// (the 5-tuple's hash bucket) these counters are; `flow` then names no
    /// flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_queue: Option<u32>,
    /// Arrived, dropped ones included.
    pub total_packets: u64,
    pub total_bytes: u64,
    /// Queued now.
    pub queued_packets: u64,
    pub queued_bytes: u64,
    pub dropped_packets: u64,
}

/// `pipe --json show`, `pipe N --json show`.
#[derive(Debug, Serialize)]
pub struct PipesJson {
    pub pipes: Vec<PipeJson>,
}

#[derive(Debug, Serialize)]
pub struct PipeJson {
    pub number: u32,
    pub link: LinkJson,
    /// Its own queue (FreeBSD's flowset N + 131072), with its flows.
    pub queue: Option<QueueJson>,
    /// Its scheduler's type (`FIFO`, `WF2Q+`...).
    pub sched_type: Option<&'static str>,
    /// Packets that arrived to find its link busy sending (or packets
    /// queued ahead) and waited for bandwidth, over all its instances.
    pub waited_packets: u64,
}

#[derive(Debug, Serialize)]
pub struct LinkJson {
    /// 0: unlimited.
    pub bandwidth_bps: u64,
    pub delay_ns: Nanos,
    pub burst_bytes: u64,
    /// `profile FILE`'s name, if the link has one.
    pub profile: Option<String>,
    /// Whether `trace FILE` drives it instead of `bandwidth_bps`.
    pub trace: bool,
    /// netem's and mahimahi's link options, as `pipe show` prints them
    /// (`jitter 5ms ...`).
    pub impairments: Vec<String>,
}

/// `queue --json show`.
#[derive(Debug, Serialize)]
pub struct QueuesJson {
    pub queues: Vec<QueueJson>,
}

#[derive(Debug, Serialize)]
pub struct QueueJson {
    pub number: u32,
    /// The scheduler it feeds, and whether that exists yet.
    pub sched: u32,
    pub linked: bool,
    pub weight: u32,
    pub lmax_bytes: u32,
    pub pri: u32,
    /// One of the two is set: `queue N` (slots) or `queue NKbytes`.
    pub limit_packets: Option<u32>,
    pub limit_bytes: Option<u64>,
    /// `plr`, 0..1.
    pub plr: f64,
    /// The hash table's size in use, as `show` prints it: 1 without a
    /// mask (every packet in one queue), else the `buckets` configured.
    pub buckets: u32,
    pub mask: MaskJson,
    /// `droptail`, or the AQM and its parameters as `show` prints them.
    pub aqm: String,
    /// netem's entry options (`loss`, `duplicate`, `corrupt`).
    pub impairments: Vec<String>,
    pub flows: Vec<FlowCountersJson>,
}

/// `sched --json show`.
#[derive(Debug, Serialize)]
pub struct SchedsJson {
    pub scheds: Vec<SchedJson>,
}

#[derive(Debug, Serialize)]
pub struct SchedJson {
    pub number: u32,
    /// `FIFO`, `WF2Q+`, `FQ_CODEL`...
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub mask: MaskJson,
    /// The type's parameters (`quantum`, `target`...), as configured.
    pub params: BTreeMap<String, u64>,
    /// The link it drives.
    pub link: Option<LinkJson>,
    /// One per flow of its mask (one without a mask).
    pub instances: Vec<FlowCountersJson>,
}

/// `table N --json list`, `table all --json list`.
#[derive(Debug, Serialize)]
pub struct TablesJson {
    pub tables: Vec<TableJson>,
}

#[derive(Debug, Serialize)]
pub struct TableJson {
    /// A number (`"1"`) or a name, as ipfw prints it.
    pub name: String,
    /// `addr`, `iface` or `number`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub entries: Vec<TableEntryJson>,
}

#[derive(Debug, Serialize)]
pub struct TableEntryJson {
    /// `10.0.0.0/8`, an interface name, or a number.
    pub key: String,
    pub value: u32,
}

/// `set --json show`.
#[derive(Debug, Serialize)]
pub struct SetsJson {
    pub enabled: Vec<u8>,
    pub disabled: Vec<u8>,
}

/// `ipfw --json memory`: the same object as `stats --json`'s
/// `memory_bytes`.
#[derive(Debug, Serialize)]
pub struct MemoryJson {
    pub memory_bytes: Memory,
}

/// One JSON line of any view.
pub fn to_line<T: Serialize>(view: &T) -> String {
    // Only strings, numbers, booleans and maps with string keys: cannot fail.
    serde_json::to_string(view).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

fn addr(v6: bool, a: u128) -> String {
    if v6 {
        Ipv6Addr::from(a).to_string()
    } else {
        Ipv4Addr::from(u32::try_from(a).unwrap_or(u32::MAX)).to_string()
    }
}

fn flow(k: &FlowKey) -> FlowJson {
    FlowJson {
        proto: k.proto,
        src: addr(k.v6, k.src),
        dst: addr(k.v6, k.dst),
        src_port: k.sport,
        dst_port: k.dport,
        flow_label: k.flow_label,
    }
}

fn mask(m: &FlowMask) -> MaskJson {
    MaskJson {
        src_ip: Ipv4Addr::from(m.src_ip).to_string(),
        dst_ip: Ipv4Addr::from(m.dst_ip).to_string(),
        src_ip6: Ipv6Addr::from(m.src_ip6).to_string(),
        dst_ip6: Ipv6Addr::from(m.dst_ip6).to_string(),
        src_port: m.src_port,
        dst_port: m.dst_port,
        proto: m.proto,
        flow_id: m.flow_id,
    }
}

fn counters(id: &FlowKey, c: &FlowCounters, sub_queue: Option<u32>) -> FlowCountersJson {
    FlowCountersJson {
        flow: flow(id),
        sub_queue,
        total_packets: c.tot_pkts,
        total_bytes: c.tot_bytes,
        queued_packets: u64::from(c.len_pkts),
        queued_bytes: c.len_bytes,
        dropped_packets: c.drops,
    }
}

fn wanted<N: PartialEq>(numbers: &[N], n: N) -> bool {
    numbers.is_empty() || numbers.contains(&n)
}

/// The rules `numbers` names (all if empty), with the dynamic states of
/// those rules when `dynamic` (`-d`).
pub fn rules(snap: &Snapshot, numbers: &[u16], dynamic: bool) -> RulesJson {
    let rules = snap
        .rules
        .iter()
        .filter(|r| wanted(numbers, r.number))
        .map(|r| RuleJson {
            number: r.number,
            set: r.spec.extra.set,
            rule: if r.is_default {
                let line = dummynet_lang::format_rules(snap, &[r.number], false, false);
                line.trim_end()
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .trim_start()
                    .to_string()
            } else {
                dummynet_lang::format_rule_body(&r.spec)
            },
            packets: r.packets,
            bytes: r.bytes,
            last_match_ns: r.last_match,
            logged: r.logged,
            default: r.is_default,
        })
        .collect();
    let states = dynamic.then(|| {
        snap.states
            .iter()
            .filter(|s| wanted(numbers, s.rule))
            .map(|s| StateJson {
                rule: s.rule,
                flow: flow(&s.key),
                name: s.name.clone(),
                packets: s.packets,
                bytes: s.bytes,
                expires_in_ns: s.expires_in,
                limit: s.limit,
            })
            .collect()
    });
    RulesJson {
        now_ns: snap.now,
        rules,
        states,
    }
}

fn link(l: &LinkView) -> LinkJson {
    let c = &l.config;
    LinkJson {
        bandwidth_bps: c.profile.as_ref().and_then(|p| p.bw).unwrap_or(c.bw),
        delay_ns: c.delay,
        burst_bytes: c.burst,
        profile: c.profile.as_ref().map(|p| p.name.clone()),
        trace: c.trace.is_some(),
        impairments: c.impairments().map(|i| i.display()).collect(),
    }
}

fn queue(f: &FlowsetView) -> QueueJson {
    let (limit_packets, limit_bytes) = match f.limit {
        QueueLimit::Slots(n) => (Some(n), None),
        QueueLimit::Bytes(b) => (None, Some(b)),
    };
    let mut flows: Vec<_> = f.flows.iter().collect();
    flows.sort_by_key(|x| x.id);
    QueueJson {
        number: f.number,
        sched: f.sched,
        linked: f.linked,
        weight: f.weight,
        lmax_bytes: f.lmax,
        pri: f.pri,
        limit_packets,
        limit_bytes,
        plr: f.plr.as_f64(),
        buckets: if f.mask.is_empty() { 1 } else { f.buckets },
        mask: mask(&f.mask),
        aqm: f.aqm.clone(),
        impairments: f.impairments().map(|i| i.display()).collect(),
        flows: flows
            .iter()
            .map(|x| counters(&x.id, &x.counters, x.sub_queue))
            .collect(),
    }
}

/// `pipe show`: the pipes `numbers` names (all if empty).
pub fn pipes(snap: &Snapshot, numbers: &[u32]) -> PipesJson {
    let mut links: Vec<&LinkView> = snap
        .links
        .iter()
        .filter(|l| l.number <= MAX_NUMBER && wanted(numbers, l.number))
        .collect();
    links.sort_by_key(|l| l.number);
    PipesJson {
        pipes: links
            .into_iter()
            .map(|l| PipeJson {
                number: l.number,
                link: link(l),
                queue: snap
                    .flowsets
                    .iter()
                    .find(|f| f.number == l.number + 2 * DN_MAX_ID)
                    .map(queue),
                sched_type: snap
                    .scheds
                    .iter()
                    .find(|s| s.number == l.number)
                    .map(|s| s.kind),
                // Its link carries the instances of both its schedulers: N
                // (its queues') and N + 65536 (its own queue's).
                waited_packets: snap
                    .scheds
                    .iter()
                    .filter(|s| s.number == l.number || s.number == l.number + DN_MAX_ID)
                    .flat_map(|s| &s.instances)
                    .map(|i| i.counters.waited)
                    .sum(),
            })
            .collect(),
    }
}

/// `queue show`: the user's queues `numbers` names (all if empty).
pub fn queues(snap: &Snapshot, numbers: &[u32]) -> QueuesJson {
    let mut fs: Vec<&FlowsetView> = snap
        .flowsets
        .iter()
        .filter(|f| f.number <= MAX_NUMBER && wanted(numbers, f.number))
        .collect();
    fs.sort_by_key(|f| f.number);
    QueuesJson {
        queues: fs.into_iter().map(queue).collect(),
    }
}

/// `sched show`: the schedulers `numbers` names (all if empty).
pub fn scheds(snap: &Snapshot, numbers: &[u32]) -> SchedsJson {
    let mut sc: Vec<&SchedView> = snap
        .scheds
        .iter()
        .filter(|s| s.number <= MAX_NUMBER && wanted(numbers, s.number))
        .collect();
    sc.sort_by_key(|s| s.number);
    SchedsJson {
        scheds: sc
            .into_iter()
            .map(|s| {
                let mut inst: Vec<_> = s.instances.iter().collect();
                inst.sort_by_key(|i| i.id);
                SchedJson {
                    number: s.number,
                    kind: s.kind,
                    mask: mask(&s.mask),
                    params: s.params.iter().cloned().collect(),
                    link: snap.links.iter().find(|l| l.number == s.number).map(link),
                    instances: inst
                        .iter()
                        .map(|i| counters(&i.id, &i.counters, None))
                        .collect(),
                }
            })
            .collect(),
    }
}

/// `table NAME list` (`None`: all of them); `None` back when `name` names
/// no table.
pub fn tables(
    snap: &Snapshot,
    name: Option<&dummynet_engine::config::TableName>,
) -> Option<TablesJson> {
    let tables: Vec<TableJson> = snap
        .tables
        .iter()
        .filter(|t| name.is_none_or(|n| *n == t.name))
        .map(|t| TableJson {
            name: t.name.to_string(),
            kind: t.ty.as_str(),
            entries: t
                .entries
                .iter()
                .map(|(k, v)| TableEntryJson {
                    key: match k {
                        TableKey::Addr(m) => format!("{}/{}", m.addr, m.prefix),
                        TableKey::Iface(n) => n.clone(),
                        TableKey::Number(n) => n.to_string(),
                    },
                    value: *v,
                })
                .collect(),
        })
        .collect();
    (name.is_none() || !tables.is_empty()).then_some(TablesJson { tables })
}

/// `set show`.
pub fn sets(snap: &Snapshot) -> SetsJson {
    let (disabled, enabled) = (0..32u8).partition(|s| snap.disabled_sets & (1 << s) != 0);
    SetsJson { enabled, disabled }
}

/// `memory`.
pub fn memory(snap: &Snapshot) -> MemoryJson {
    let m = &snap.memory;
    MemoryJson {
        memory_bytes: Memory {
            parts: m
                .parts
                .iter()
                .map(|p| {
                    (
                        p.name,
                        MemoryPart {
                            now: p.now,
                            worst: p.worst,
                        },
                    )
                })
                .collect(),
            queues: m.queues,
            instances: m.instances,
            instance_limit: m.instance_limit,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `show` and the JSON view say the same number of buckets: 1 without
    /// a mask, the configured number with one.
    #[test]
    fn fq_codel_sub_queues_are_named_by_index_in_json() {
        use dummynet_engine::flow::proto;
        use dummynet_engine::sched::bucket_of;
        use dummynet_engine::{Direction, PacketInfo};
        let mut engine: dummynet_engine::Engine<u64> = dummynet_engine::Engine::new(1);
        for line in [
            "pipe 1 config bw 1Mbit/s",
            "sched 1 config pipe 1 type fq_codel",
            "queue 1 config sched 1",
            "add 100 queue 1 ip from any to any",
        ] {
            let Ok(dummynet_lang::Parsed {
                statement: dummynet_lang::Statement::Apply(c),
                ..
            }) = dummynet_lang::parse_command(line)
            else {
                panic!("{line}")
            };
            engine.apply(0, c).unwrap();
        }
        let key = FlowKey::v4(
            [10, 0, 0, 1].into(),
            [10, 0, 0, 2].into(),
            proto::UDP,
            5000,
            80,
        );
        let info = PacketInfo {
            len: 1000,
            key,
            dir: Direction::In,
            recv_if: None,
            xmit_if: None,
        };
        for _ in 0..3 {
            engine.input(0, info, 0);
        }
        let view = queues(&engine.snapshot(), &[1]);
        let flows = &view.queues[0].flows;
        assert!(!flows.is_empty());
        assert!(
            flows
                .iter()
                .all(|f| f.sub_queue == Some(bucket_of(&key, 1024))),
            "{:?}",
            flows.iter().map(|f| f.sub_queue).collect::<Vec<_>>()
        );
        // And plain queues carry none.
        let text = serde_json::to_string(&queues(&engine.snapshot(), &[])).unwrap();
        assert_eq!(text.matches("sub_queue").count(), flows.len(), "{text}");
    }

    #[test]
    fn text_and_json_agree_on_buckets() {
        let config = dummynet_dataplane::lang::commands(
            "pipe 1 config delay 1ms\npipe 2 config mask src-ip 0xffffff00 buckets 128\n",
            None,
        )
        .unwrap();
        let engine: dummynet_engine::Engine<dummynet_dataplane::Carrier> =
            dummynet_dataplane::lang::configure(&config, 1).unwrap();
        let snap = engine.snapshot();
        for (n, want) in [(1, 1), (2, 128)] {
            let text = dummynet_lang::format_pipes(&snap, &[n]);
            assert!(text.contains(&format!("({want} buckets)")), "{text}");
            let view = pipes(&snap, &[n]);
            let q = view.pipes[0].queue.as_ref().unwrap();
            assert_eq!(q.buckets, want, "pipe {n}: {text}");
        }
    }
}
