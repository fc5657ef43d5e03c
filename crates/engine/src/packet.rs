//! What the caller tells the engine about a packet, and what the engine answers.

use crate::flow::FlowKey;
use crate::time::Nanos;

/// Direction through the firewall, as ipfw's `in` / `out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    In,
    Out,
}

/// An interface interned by [`crate::Engine::iface`]; cheap to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfaceId(pub u16);

/// The facts the classifier and dummynet need about one packet. The caller
/// parses headers (see [`crate::wire`]); the engine never touches payload bytes
/// on the forwarding path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    /// Bytes billed to links and queues (the IP packet, or the frame for layer 2).
    pub len: u32,
    pub key: FlowKey,
    pub dir: Direction,
    /// Receive interface (`recv`), if any.
    pub recv_if: Option<IfaceId>,
    /// Transmit interface (`xmit`), if known.
    pub xmit_if: Option<IfaceId>,
}

/// Payload types the engine can carry. The engine only moves payloads around;
/// the hook exists so AQMs can mark ECN on payloads that expose their bytes.
pub trait Payload {
    /// The packet bytes starting at the IP header, if the payload has them,
    /// to read (an AQM asks whether the packet is ECN-capable).
    fn ip_bytes(&self) -> Option<&[u8]> {
        None
    }
    /// The whole frame from its Ethernet header, if the packet came with
    /// one (a bridge's): for `mac`, `mac-type` and `layer2` rules.
    fn frame_bytes(&self) -> Option<&[u8]> {
        None
    }
    /// The same bytes to change (an AQM sets ECN CE).
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
        None
    }
    /// The bytes `corrupt` may flip a bit in: by default the IP packet, since
    /// a bit flipped in a link header would fail the link's own check (an
    /// Ethernet FCS) and be a loss, not a corruption the receiver sees.
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        self.ip_bytes_mut()
    }
    /// A copy of the packet for `duplicate`, or `None` if this payload
    /// cannot be copied (the copy is then not made, and counted so).
    fn duplicate(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
}

macro_rules! copy_payload {
    ($($t:ty),*) => {$(
        impl Payload for $t {
            fn duplicate(&self) -> Option<Self> {
                Some(*self)
            }
        }
    )*};
}
copy_payload!((), u32, u64, usize);

/// A dummynet object a packet was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Pipe(u32),
    Queue(u32),
}

/// The immediate outcome of [`crate::Engine::input`].
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<P> {
    /// Leaves now, accepted by `rule` (65535 is the default rule).
    Pass { payload: P, rule: u16 },
    /// Dropped now.
    Drop {
        payload: P,
        reason: DropReason,
        rule: Option<u16>,
        target: Option<Target>,
    },
    /// Held by dummynet; it comes back from [`crate::Engine::poll`].
    Queued { rule: u16, target: Target },
}

/// A packet leaving the engine later, from [`crate::Engine::poll`].
#[derive(Debug, PartialEq, Eq)]
pub struct Output<P> {
    pub payload: P,
    pub info: PacketInfo,
    /// When it happened: for a delivery, the departure time (never later than
    /// the `now` passed to `poll`; earlier if `poll` was called late).
    pub at: Nanos,
    /// `None`: delivered. `Some`: dropped after having been queued.
    pub drop: Option<DropReason>,
    /// The rule that last decided its fate.
    pub rule: Option<u16>,
    /// The last pipe or queue it went through.
    pub target: Option<Target>,
    /// An AQM of that pipe or queue marked it ECN CE (Congestion
    /// Experienced) rather than drop it.
    pub marked: bool,
}

impl<P> Output<P> {
    pub fn delivered(&self) -> bool {
        self.drop.is_none()
    }
}

/// Why a packet was dropped. Every drop has exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// A `deny` rule, or the default rule when it denies.
    RuleDeny,
    /// The queue was full (slots or bytes).
    QueueFull,
    /// `plr` random loss at enqueue.
    Plr,
    /// A profile sample above its `loss-level`.
    ProfileLoss,
    /// The rule named a pipe or queue that does not exist.
    NoSuchTarget,
    /// The queue's scheduler does not exist yet.
    Unlinked,
    /// The object holding it was deleted or flushed.
    Deleted,
    /// Dropped by an AQM (RED, CoDel, PIE...).
    Aqm,
    /// netem's `loss` models (random, gemodel, state) at the pipe's entry.
    Loss,
    /// A `keep-state` or `limit` rule could not make its dynamic state
    /// (`dyn_max` reached, or the rule's limit).
    StateRefused,
    /// Taking it in would have put more packet bytes inside the engine than
    /// `net.inet.ip.dummynet.held_limit` allows (see [`crate::Totals::held_bytes`]).
    MemoryLimit,
    /// Delivered by the engine, but the caller could not send it (the
    /// kernel refused the frame, the port went away): reported back with
    /// [`crate::Engine::unsent`].
    TxFailed,
    /// It needed a new per-flow queue or scheduler instance (a new flow of
    /// a mask), and `net.inet.ip.dummynet.instance_limit` of them exist.
    InstanceLimit,
    /// A data plane sharded over workers ([`crate::Engine::classify`] on
    /// one, the pipe on another) found the ring to the pipe's worker full:
    /// dropped rather than waiting for room.
    HandoffFull,
}

impl DropReason {
    pub const ALL: [DropReason; 14] = [
        DropReason::RuleDeny,
        DropReason::QueueFull,
        DropReason::Plr,
        DropReason::ProfileLoss,
        DropReason::NoSuchTarget,
        DropReason::Unlinked,
        DropReason::Deleted,
        DropReason::Aqm,
        DropReason::Loss,
        DropReason::StateRefused,
        DropReason::MemoryLimit,
        DropReason::TxFailed,
        DropReason::InstanceLimit,
        DropReason::HandoffFull,
    ];

    /// Stable short name used in logs and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::RuleDeny => "rule-deny",
            DropReason::QueueFull => "queue-full",
            DropReason::Plr => "plr",
            DropReason::ProfileLoss => "profile-loss",
            DropReason::NoSuchTarget => "no-such-pipe",
            DropReason::Unlinked => "unlinked-queue",
            DropReason::Deleted => "deleted",
            DropReason::Aqm => "aqm",
            DropReason::Loss => "loss",
            DropReason::StateRefused => "state-refused",
            DropReason::MemoryLimit => "memory-limit",
            DropReason::TxFailed => "tx-failed",
            DropReason::InstanceLimit => "instance-limit",
            DropReason::HandoffFull => "handoff-full",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
