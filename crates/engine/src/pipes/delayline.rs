//! What happens to a packet between the end of its transmission and its
//! exit: the delay line, with netem's jitter and reordering and the
//! registered impairments of the stage.
//!
//! A plain pipe's delay line is a FIFO: every packet waits the same `delay`,
//! so exit times only grow. Jitter in order (the default) keeps that: a
//! packet's exit is its own draw or the exit of the packet ahead, whichever
//! is later. Only packets that may overtake (`reorder`, `jitter ...
//! unordered`) go to a second line ordered by exit time, and the release
//! takes from whichever line is due first; a pipe without them never
//! touches it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::link::LinkParams;
use super::{Held, Slab};
use crate::impair::jitter::JitterState;
use crate::impair::reorder::ReorderState;
use crate::impair::slot::SlotState;
use crate::impair::staged::States;
use crate::impair::trace::TraceCursor;
use crate::rng::Rng;
use crate::time::Nanos;

/// An instance's impairment state (made when its link first needs it).
pub(crate) struct LinkFx<P> {
    pub jitter: JitterState,
    pub reorder: ReorderState,
    pub slot: SlotState,
    /// Registered impairments' state ([`crate::impair::staged`]).
    pub staged: States,
    /// A traced link's next opportunity.
    pub cursor: Option<TraceCursor>,
    /// A traced link's packet in transmission and the bytes it still needs.
    pub head: Option<(Held<P>, u64)>,
    /// Packets that may overtake: their exit times (then the order they
    /// came, then where they are) in a heap of small keys, the packets
    /// themselves in a slab, so that a pop moves 24 bytes per level of a
    /// heap that can hold a delay's worth of packets, not whole packets.
    early: BinaryHeap<Reverse<(Nanos, u64, u32)>>,
    early_held: Slab<Held<P>>,
    early_seq: u64,
}

impl<P> Default for LinkFx<P> {
    fn default() -> Self {
        LinkFx {
            jitter: JitterState::default(),
            reorder: ReorderState::default(),
            slot: SlotState::default(),
            staged: States::default(),
            cursor: None,
            head: None,
            early: BinaryHeap::new(),
            early_held: Slab::default(),
            early_seq: 0,
        }
    }
}

impl<P> LinkFx<P> {
    /// Packets it holds (the early line and a traced link's head).
    pub fn held(&self) -> usize {
        self.early.len() + usize::from(self.head.is_some())
    }

    pub fn early_is_empty(&self) -> bool {
        self.early.is_empty()
    }

    /// When the first packet of the early line leaves.
    pub fn early_next(&self) -> Option<Nanos> {
        self.early.peek().map(|Reverse((t, ..))| *t)
    }

    /// Takes the first packet of the early line.
    pub fn pop_early(&mut self) -> Option<Held<P>> {
        let Reverse((_, _, at)) = self.early.pop()?;
        self.early_held.remove(at)
    }
}

/// Puts a packet that leaves the link at `exit` on the delay line. Returns
/// true if it went to the early line, where it may overtake (the caller
/// then re-arms the release for it).
#[inline]
pub(crate) fn place<P>(
    params: &LinkParams,
    fx: Option<&mut LinkFx<P>>,
    rng: &mut Rng,
    dline: &mut VecDeque<Held<P>>,
    mut held: Held<P>,
    exit: Nanos,
) -> bool {
    let Some(fx) = fx.filter(|_| params.shaped_delay) else {
        held.out_time = exit.saturating_add(params.delay);
        // The line is a FIFO: after the delay was lowered live, a packet
        // waits for the one ahead, which left the link before it (found by
        // the engine_sequence fuzzer: departures went back in time).
        if let Some(ahead) = dline.back() {
            held.out_time = held.out_time.max(ahead.out_time);
        }
        dline.push_back(held);
        return false;
    };
    if let Some(r) = &params.reorder {
        if fx.reorder.skip_delay(r, rng) {
            held.out_time = exit;
            push_early(fx, held);
            return true;
        }
    }
    let mut delay = match &params.jitter {
        Some(j) => fx.jitter.delay(params.delay, j, rng),
        None => params.delay,
    };
    if let Some(models) = &params.staged {
        let extra = fx.staged.extra_delay(models, exit, held.info.len, rng);
        delay = delay.saturating_add(extra);
    }
    held.out_time = exit.saturating_add(delay);
    if params.jitter.as_ref().is_some_and(|j| j.unordered) {
        push_early(fx, held);
        return true;
    }
    if let Some(ahead) = dline.back() {
        held.out_time = held.out_time.max(ahead.out_time);
    }
    dline.push_back(held);
    false
}

fn push_early<P>(fx: &mut LinkFx<P>, held: Held<P>) {
    fx.early_seq += 1;
    let key = (held.out_time, fx.early_seq);
    let at = fx.early_held.insert(held);
    fx.early.push(Reverse((key.0, key.1, at)));
}

/// The line whose head leaves first, and when: `true` for the FIFO line.
#[inline]
pub(crate) fn next_out<P>(
    dline: &VecDeque<Held<P>>,
    fx: Option<&LinkFx<P>>,
) -> Option<(Nanos, bool)> {
    let a = dline.front().map(|h| h.out_time);
    let b = fx.and_then(LinkFx::early_next);
    match (a, b) {
        (Some(a), Some(b)) if b < a => Some((b, false)),
        (Some(a), _) => Some((a, true)),
        (None, Some(b)) => Some((b, false)),
        (None, None) => None,
    }
}
