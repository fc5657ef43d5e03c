//! What the caller tells the engine about a packet, and what the engine answers.

use crate::flow::FlowKey;
use crate::stats::DropReason;
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
}

impl<P> Output<P> {
    pub fn delivered(&self) -> bool {
        self.drop.is_none()
    }
}
