//! The per-packet event log's schema, one JSON object a line: what
//! `dummynet sim --log` writes, what `dummynet run|shell --log` writes, and
//! what the live daemon's event tap hands its subscribers
//! ([`crate::live::observer`]). One type for all of them, so sim and live
//! cannot drift apart.
//!
//! Every event has `event` (its kind), `t_ns` and `id`:
//! - sim: `t_ns` is virtual time, ns since the first captured packet; `id`
//!   numbers packets in arrival order from 0.
//! - live: `t_ns` is ns since the data plane started (`CLOCK_MONOTONIC`),
//!   and the log's first line is a [`Event::Start`] giving that moment's
//!   wall-clock time (`wall_ns`, ns since the Unix epoch), so a time maps to
//!   the wall clock as `wall_ns + t_ns`; `id` numbers the packets the
//!   engine saw from 0.
//!
//! A packet has one `arrival`, zero or more `forward` (a bridged frame's
//! `in` pass let it through and its `out` pass runs), and one end:
//! `departure` or `drop`. A copy made by `duplicate` shares its original's
//! `id` and ends with `"note": "duplicate"`. A packet an AQM marked ECN CE
//! rather than drop (CoDel, FQ-CoDel, PIE or RED with `ecn`) has `"ce":
//! true` on the forward or departure leaving the pipe or queue that marked
//! it.
//!
//! The type is generic over its strings (`S`): sim borrows them (`&str`),
//! the live observer owns them (`String`) so that events outlive the
//! moment they were built in.

use dummynet_engine::{Direction, Nanos, Target};
use serde::Serialize;

/// The note on a copy made by `duplicate`.
pub const DUPLICATE: &str = "duplicate";

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event<S> {
    /// Live only, the first line: the wall-clock time of `t_ns` 0.
    Start {
        t_ns: Nanos,
        /// `CLOCK_REALTIME` at `t_ns` 0, ns since the Unix epoch.
        wall_ns: u64,
    },
    Arrival {
        t_ns: Nanos,
        id: u64,
        len: u32,
        iface: S,
        dir: &'static str,
        /// A bridged frame: the port its `out` pass is for.
        #[serde(skip_serializing_if = "Option::is_none")]
        bridge_to: Option<S>,
    },
    /// A bridged frame's `in` pass let it through (`rule`, and the pipe or
    /// queue it left): its `out` pass on `iface` runs now.
    Forward {
        t_ns: Nanos,
        id: u64,
        rule: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pipe: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        queue: Option<u32>,
        iface: S,
        /// An AQM of that pipe or queue marked it ECN CE (Congestion
        /// Experienced) rather than drop it; left out when not.
        #[serde(skip_serializing_if = "is_false")]
        ce: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<S>,
    },
    Departure {
        t_ns: Nanos,
        id: u64,
        rule: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pipe: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        queue: Option<u32>,
        /// The interface it leaves by, when known (`xmit`).
        #[serde(skip_serializing_if = "Option::is_none")]
        iface: Option<S>,
        /// As a forward's.
        #[serde(skip_serializing_if = "is_false")]
        ce: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<S>,
    },
    Drop {
        t_ns: Nanos,
        id: u64,
        /// A [`dummynet_engine::DropReason`]'s name, or sim's `malformed`.
        reason: &'static str,
        rule: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pipe: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        queue: Option<u32>,
        /// The pass that dropped it, for a packet the rules saw.
        #[serde(skip_serializing_if = "Option::is_none")]
        dir: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<S>,
    },
}

impl<S> Event<S> {
    /// The event's time (ns, on the log's clock).
    pub fn t_ns(&self) -> Nanos {
        match self {
            Event::Start { t_ns, .. }
            | Event::Arrival { t_ns, .. }
            | Event::Forward { t_ns, .. }
            | Event::Departure { t_ns, .. }
            | Event::Drop { t_ns, .. } => *t_ns,
        }
    }

    /// The pipe or queue it names, if any: (pipe, queue).
    pub fn target(&self) -> (Option<u32>, Option<u32>) {
        match self {
            Event::Forward { pipe, queue, .. }
            | Event::Departure { pipe, queue, .. }
            | Event::Drop { pipe, queue, .. } => (*pipe, *queue),
            Event::Start { .. } | Event::Arrival { .. } => (None, None),
        }
    }

    /// The rule it names, if any.
    pub fn rule(&self) -> Option<u16> {
        match self {
            Event::Forward { rule, .. }
            | Event::Departure { rule, .. }
            | Event::Drop { rule, .. } => *rule,
            Event::Start { .. } | Event::Arrival { .. } => None,
        }
    }

    /// The same event with a queue it names named as the pipe `pipe_of`
    /// says that queue feeds (an event naming a pipe, or nothing, as it
    /// is): a path's view counts a queue's packets as its pipe's.
    pub fn queue_as_pipe(mut self, pipe_of: impl Fn(u32) -> u32) -> Self {
        if let Event::Forward { pipe, queue, .. }
        | Event::Departure { pipe, queue, .. }
        | Event::Drop { pipe, queue, .. } = &mut self
        {
            if let (None, Some(q)) = (*pipe, *queue) {
                *pipe = Some(pipe_of(q));
                *queue = None;
            }
        }
        self
    }

    /// An AQM of the pipe or queue it names marked the packet ECN CE.
    pub fn ce(&self) -> bool {
        matches!(
            self,
            Event::Forward { ce: true, .. } | Event::Departure { ce: true, .. }
        )
    }

    /// The packet's id (`None` for the start line).
    pub fn id(&self) -> Option<u64> {
        match self {
            Event::Start { .. } => None,
            Event::Arrival { id, .. }
            | Event::Forward { id, .. }
            | Event::Departure { id, .. }
            | Event::Drop { id, .. } => Some(*id),
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A pipe or queue as the log's two fields: (pipe, queue).
pub fn split_target(t: Option<Target>) -> (Option<u32>, Option<u32>) {
    match t {
        Some(Target::Pipe(n)) => (Some(n), None),
        Some(Target::Queue(n)) => (None, Some(n)),
        None => (None, None),
    }
}

/// A direction as the log writes it.
pub fn dir_str(d: Direction) -> &'static str {
    match d {
        Direction::In => "in",
        Direction::Out => "out",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names a script reads are the documented ones, whoever builds
    /// the event.
    #[test]
    fn events_serialize_with_the_documented_names() {
        let line = |e: &Event<&str>| serde_json::to_string(e).unwrap();
        assert_eq!(
            line(&Event::Start {
                t_ns: 0,
                wall_ns: 7
            }),
            r#"{"event":"start","t_ns":0,"wall_ns":7}"#
        );
        assert_eq!(
            line(&Event::Arrival {
                t_ns: 5,
                id: 1,
                len: 84,
                iface: "eth0",
                dir: "in",
                bridge_to: Some("eth1"),
            }),
            r#"{"event":"arrival","t_ns":5,"id":1,"len":84,"iface":"eth0","dir":"in","bridge_to":"eth1"}"#
        );
        let (pipe, queue) = split_target(Some(Target::Pipe(3)));
        assert_eq!(
            line(&Event::Drop {
                t_ns: 9,
                id: 1,
                reason: "queue-full",
                rule: Some(100),
                pipe,
                queue,
                dir: Some(dir_str(Direction::Out)),
                note: None,
            }),
            r#"{"event":"drop","t_ns":9,"id":1,"reason":"queue-full","rule":100,"pipe":3,"dir":"out"}"#
        );
        let d: Event<&str> = Event::Departure {
            t_ns: 10,
            id: 2,
            rule: None,
            pipe: None,
            queue: Some(4),
            iface: None,
            ce: false,
            note: Some(DUPLICATE),
        };
        assert_eq!(
            line(&d),
            r#"{"event":"departure","t_ns":10,"id":2,"rule":null,"queue":4,"note":"duplicate"}"#
        );
        // A packet an AQM marked says so; one it did not, nothing.
        let marked: Event<&str> = Event::Departure {
            t_ns: 11,
            id: 3,
            rule: Some(100),
            pipe: Some(1),
            queue: None,
            iface: None,
            ce: true,
            note: None,
        };
        assert_eq!(
            line(&marked),
            r#"{"event":"departure","t_ns":11,"id":3,"rule":100,"pipe":1,"ce":true}"#
        );
        assert!(marked.ce() && !d.ce());
        assert_eq!(
            (d.t_ns(), d.id(), d.target()),
            (10, Some(2), (None, Some(4)))
        );
        // A queue's event names its pipe instead; a pipe's stays.
        let d = d.queue_as_pipe(|q| q + 10);
        assert_eq!(
            (d.target(), d.id(), d.t_ns()),
            ((Some(14), None), Some(2), 10)
        );
        let drop: Event<&str> = Event::Drop {
            t_ns: 1,
            id: 3,
            reason: "aqm",
            rule: None,
            pipe: Some(2),
            queue: None,
            dir: None,
            note: None,
        };
        assert_eq!(drop.clone().queue_as_pipe(|q| q + 10), drop);
    }
}
