//! QFQ: Quick Fair Queueing (Checconi, Rizzo, Valente, *QFQ: Efficient
//! Packet Scheduling with Tight Guarantees*, IEEE/ACM ToN 2013), FreeBSD's
//! `dn_sched_qfq`.
//!
//! QFQ approximates WF2Q+ (see [`super::wf2q`]) in O(1) per packet, however
//! many queues there are, with no heap:
//!
//! * A queue ("class") of weight `w` whose packets are at most `lmax` bytes
//!   has `σ = lmax / w`. Classes are put in *groups* by `σ` rounded up to a
//!   power of two: group `i` holds classes with `σ <= 2^i` (in units of
//!   `2^MIN_SLOT_SHIFT`). There are 20 groups, so any set of groups is a
//!   20-bit map and "the first group of a set" is one find-first-set.
//! * Class timestamps are exact (`S`, `F = S + len / w`), but inside a group
//!   a class is filed by its start *rounded down to the group's slot size*
//!   `2^slot_shift`, in a ring of 32 buckets: the bucket list holds every
//!   backlogged class of the group, and the head of its first bucket is the
//!   one to serve. A group's own timestamps are that first bucket's `S` and
//!   `F = S + 2 · slot`.
//! * A group is Eligible when its `S <= V`, and Blocked when a group of
//!   higher index in ER has a smaller `F`. The four sets ER, IR, EB, IB are
//!   bitmaps, and the paper proves that ER groups are ordered by `F` as they
//!   are by index, so the group to serve is simply the first of ER. Moving
//!   groups between sets after `V` or a group's `F` changes is a handful of
//!   mask operations.
//!
//! Constants and limits are FreeBSD's: 32 buckets, groups 0..=19, 30
//! fractional bits, `MTU_SHIFT` 11; `weight` 1..=65536 (2^16) and `lmax`
//! 1..=2000 bytes, default 1500, per flowset (`queue N config ... lmax L`,
//! FreeBSD's `fs.par[1]`). A queue whose flowset sets no `lmax` takes the
//! scheduler's `sched N config type qfq lmax L`, this engine's own default.
//!
//! Where this departs from FreeBSD, on purpose:
//! * `V` advances by `len / Σw`, where `Σw` sums the weights of the queues
//!   the instance holds (as Linux does), kept as a 64-bit reciprocal with
//!   the fraction carried, instead of FreeBSD's fixed `len / 2^17`. So there
//!   is no cap on the weight sum: FreeBSD refuses a queue once weights add
//!   up to more than 2^17, and a masked flowset with a million flows must
//!   work here.
//! * When nothing is eligible, `V` jumps to the smallest start among the
//!   ineligible groups (the paper's definition) rather than to the start of
//!   the first of them.
//! * A class served again without leaving its bucket goes to the back of the
//!   bucket, not the front: order inside a bucket is free in QFQ, and this
//!   interleaves equal classes instead of sending ~`slot / len` packets of
//!   one in a row.
//! * Safety nets for cases FreeBSD leaves unchecked (its comments say so):
//!   a packet longer than the class's group allows (`lmax` rounded up with
//!   the group's slot; a GSO super-packet) is counted at that length, in
//!   the class's finish time and in `V` alike, so it cannot push the class
//!   out of the bucket window; a class that would land beyond the window
//!   has its timestamps pulled back (Linux's remedy); a rotation that would
//!   drop buckets is refused (the newcomer starts later instead); and if ER
//!   is ever found empty while groups are backlogged, the four sets are
//!   rebuilt from the groups' timestamps. The tests check that the set
//!   rebuild never happens, and the window clamps never do unless weights
//!   change under a backlog (which Linux notes can happen).
//! * Queues can leave from anywhere, and weights change, with the group
//!   bookkeeping FreeBSD has under `#if 0`.

use super::{ParamSpec, QueueId, QueueOps, SchedInstance, SchedType, Slot};
use crate::params::{OutOfRange, ParamError};

/// Buckets per group.
const MAX_SLOTS: u32 = 32;
/// Highest group index.
const MAX_INDEX: u32 = 19;
const GROUPS: usize = MAX_INDEX as usize + 1;
/// FreeBSD's `QFQ_MAX_WSHIFT`: weights up to 2^16.
const MAX_WSHIFT: u32 = 16;
pub const MAX_QFQ_WEIGHT: u32 = 1 << MAX_WSHIFT;
/// Fixed-point fraction of timestamps: `1 / w` is `ONE / w`.
const FRAC_BITS: u32 = 30;
const ONE: u64 = 1 << FRAC_BITS;
/// log2 of the largest `lmax` the groups are sized for.
const MTU_SHIFT: u32 = 11;
/// Slot size of group 0 is `2^MIN_SLOT_SHIFT`; group `i` has `2^(MIN_SLOT_SHIFT + i)`.
const MIN_SLOT_SHIFT: u32 = FRAC_BITS + MTU_SHIFT - MAX_INDEX;
/// FreeBSD's `qfq maxlen` bounds and default (`qfq_new_fsk`).
pub const DEFAULT_LMAX: u32 = 1500;
pub const MAX_LMAX: u32 = 2000;

/// Group sets; the state of a group is `ineligible | blocked << 1`.
const ER: usize = 0;
const IR: usize = 1;
const EB: usize = 2;
const IB: usize = 3;

/// End of a bucket list.
const NIL: u32 = u32::MAX;
/// No group allocated for an index.
const NO_GROUP: u8 = u8::MAX;

pub static TYPE: SchedType = SchedType {
    name: "qfq",
    aliases: &[],
    display: "QFQ",
    params: &[ParamSpec::count("lmax")],
    tunables: &[],
    new_instance: |params| Ok(Box::new(Qfq::new(lmax_param(params)?))),
    // V and every class's finish time must see each packet.
    idle_bypass: false,
    // A filed class also takes a word of a bucket chunk.
    queue_state_bytes: std::mem::size_of::<Class>() + std::mem::size_of::<u32>(),
    sub_queues: None,
    describe: None,
    weight_is_priority: false,
    lmax: Some(1..=MAX_LMAX),
};

fn lmax_param(params: &[(String, u64)]) -> Result<u32, ParamError> {
    let mut lmax = DEFAULT_LMAX;
    for (k, v) in params {
        if !k.eq_ignore_ascii_case("lmax") {
            return Err(format!("qfq takes `lmax`, not `{k}`").into());
        }
        lmax = u32::try_from(*v)
            .ok()
            .filter(|l| (1..=MAX_LMAX).contains(l))
            .ok_or_else(|| {
                OutOfRange::new("lmax", v, 1, MAX_LMAX)
                    .owner("qfq")
                    .inclusive()
                    .unit("bytes")
            })?;
    }
    Ok(lmax)
}

/// `a > b` on timestamps that may wrap, as long as live ones are within
/// 2^63 of each other (they stay within a few slots of `V`).
#[inline]
fn gt(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) > 0
}

#[inline]
fn round_down(ts: u64, shift: u32) -> u64 {
    ts & !((1u64 << shift) - 1)
}

#[inline]
fn slot_shift(index: usize) -> u32 {
    MIN_SLOT_SHIFT + index as u32
}

/// `bitmap` without the bits below `from`.
#[inline]
fn mask_from(bitmap: u32, from: usize) -> u32 {
    if from >= 32 {
        0
    } else {
        bitmap & !((1u32 << from) - 1)
    }
}

/// The group of a class whose `σ` in fixed point is `lmax · inv_w`: the
/// smallest `i` with `σ <= 2^(MIN_SLOT_SHIFT + i)`.
fn group_index(inv_w: u32, lmax: u32) -> usize {
    let sigma = u64::from(lmax) * u64::from(inv_w);
    if sigma <= 1 << MIN_SLOT_SHIFT {
        return 0;
    }
    let ceil_log2 = 64 - (sigma - 1).leading_zeros();
    (ceil_log2 - MIN_SLOT_SHIFT).min(MAX_INDEX) as usize
}

/// Longest packet a class of group `index` can be charged in full.
fn max_len(inv_w: u32, index: usize) -> u32 {
    let len = (1u64 << slot_shift(index)) / u64::from(inv_w.max(1));
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// 32 bytes, two to a cache line: with a million classes, the class state
/// read per packet is a cache miss, and the fewer lines and pages they
/// span the cheaper. The finish time and the weight are therefore not
/// stored but computed: `s + charge(head_len)` and `ONE / inv_w`.
#[derive(Debug, Clone)]
#[repr(align(32))]
struct Class {
    /// Exact virtual start of the head packet while `active`; while idle,
    /// the finish of the last packet sent.
    s: u64,
    /// `ONE / weight`.
    inv_w: u32,
    /// Longest packet counted in full: one slot of the group's worth
    /// (`2^slot_shift / inv_w`, at least `lmax`).
    max_len: u32,
    queue: QueueId,
    /// The length the head packet was priced at.
    head_len: u32,
    /// Where the class is filed in its bucket's list, while `active`.
    pos: u32,
    group: u8,
    /// Physical bucket (0..32) while `active`.
    bucket: u8,
    active: bool,
    vacant: bool,
}

#[derive(Debug, Clone)]
struct Group {
    /// Rounded start of the first bucket, and `s + 2 · slot`.
    s: u64,
    f: u64,
    /// Bit `k`: bucket `(front + k) % 32` is not empty.
    full: u32,
    front: u8,
    /// Per physical bucket, the position in [`Chunks`] of its first class
    /// and the one after its last; both `NIL` while it is empty.
    heads: [u32; MAX_SLOTS as usize],
    tails: [u32; MAX_SLOTS as usize],
}

impl Class {
    /// The weight as counted in `Σw`.
    fn weight(&self) -> u32 {
        (ONE / u64::from(self.inv_w.max(1))) as u32
    }
}

impl Default for Group {
    fn default() -> Self {
        Group {
            s: 0,
            f: 0,
            full: 0,
            front: 0,
            heads: [NIL; MAX_SLOTS as usize],
            tails: [NIL; MAX_SLOTS as usize],
        }
    }
}

/// Instances with fewer classes keep them in cache without help (about
/// 0.75 MB of class state), and [`Qfq::fetch_ahead`] would only cost time.
const FETCH_FROM: usize = 1 << 14;

/// Words in a chunk of a bucket list: `LINK` class indices, then the chunk
/// that follows.
const CHUNK: u32 = 16;
const LINK: u32 = CHUNK - 1;

/// Bucket lists are queues of class indices in 64-byte chunks, not links in
/// the classes. Serving a bucket then reads the indices of the classes to
/// come in order, a chunk ahead, and their state can be fetched all at once
/// (see [`Qfq::fetch_ahead`]). Linked through the classes, the next class
/// was known only once the current one had been read: with a million
/// classes served in an order unrelated to where they lie in memory (mixed
/// weights and sizes), one cache miss after another.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct Chunk([u32; CHUNK as usize]);

/// The chunks of every bucket list of an instance; a position is
/// `chunk · CHUNK + word`.
#[derive(Debug, Default)]
struct Chunks {
    chunks: Vec<Chunk>,
    free: Vec<u32>,
}

impl Chunks {
    #[inline]
    fn get(&self, pos: u32) -> u32 {
        self.chunks[(pos / CHUNK) as usize].0[(pos % CHUNK) as usize]
    }

    #[inline]
    fn set(&mut self, pos: u32, value: u32) {
        self.chunks[(pos / CHUNK) as usize].0[(pos % CHUNK) as usize] = value;
    }

    /// Position of the first word of a new chunk. Freed chunks are reused
    /// last-in first-out, while they are still in cache.
    #[inline]
    fn alloc(&mut self) -> u32 {
        match self.free.pop() {
            Some(chunk) => chunk * CHUNK,
            None => self.grow(),
        }
    }

    #[cold]
    fn grow(&mut self) -> u32 {
        self.chunks.push(Chunk([NIL; CHUNK as usize]));
        // One chunk per `LINK` filed classes (plus one per bucket), and
        // classes are indexed by u32: this stays below 2^32 / CHUNK.
        (self.chunks.len() - 1) as u32 * CHUNK
    }

    #[inline]
    fn release(&mut self, pos: u32) {
        self.free.push(pos / CHUNK);
    }
}

impl Group {
    /// Files class `c` at the back of physical bucket `bucket`.
    #[inline]
    fn push_back(&mut self, chunks: &mut Chunks, classes: &mut [Class], bucket: u8, c: u32) {
        let b = usize::from(bucket) % MAX_SLOTS as usize;
        let mut pos = self.tails[b];
        // An empty bucket's tail is NIL, which also reads as a full chunk.
        if pos % CHUNK == LINK {
            pos = self.new_chunk(chunks, b);
        }
        chunks.set(pos, c);
        self.tails[b] = pos + 1;
        let cl = &mut classes[c as usize];
        cl.pos = pos;
        cl.bucket = bucket;
    }

    /// Bucket `b` is empty or its last chunk full: a chunk for its tail.
    #[inline]
    fn new_chunk(&mut self, chunks: &mut Chunks, b: usize) -> u32 {
        let pos = chunks.alloc();
        if self.heads[b] == NIL {
            self.heads[b] = pos;
        } else {
            chunks.set(self.tails[b], pos / CHUNK);
        }
        pos
    }

    /// Drops the first class of bucket `bucket`; true if it is now empty.
    #[inline]
    fn pop_front(&mut self, chunks: &mut Chunks, bucket: u8) -> bool {
        let b = usize::from(bucket) % MAX_SLOTS as usize;
        let next = self.heads[b].wrapping_add(1);
        if next != self.tails[b] && next % CHUNK != LINK {
            self.heads[b] = next;
            return false;
        }
        self.leave_chunk(chunks, b, next)
    }

    /// The first class of bucket `b` was the last of its chunk.
    #[inline]
    fn leave_chunk(&mut self, chunks: &mut Chunks, b: usize, next: u32) -> bool {
        if next == self.tails[b] {
            chunks.release(next - 1);
            self.heads[b] = NIL;
            self.tails[b] = NIL;
            return true;
        }
        self.heads[b] = chunks.get(next) * CHUNK;
        chunks.release(next);
        false
    }

    /// Takes `c` out of its bucket, wherever it is: the bucket's first class
    /// takes its place (order inside a bucket is free). True if the bucket
    /// is now empty.
    fn remove(&mut self, chunks: &mut Chunks, classes: &mut [Class], c: u32) -> bool {
        let (pos, bucket) = {
            let cl = &classes[c as usize];
            (cl.pos, cl.bucket)
        };
        let head = self.heads[usize::from(bucket)];
        if pos != head {
            let first = chunks.get(head);
            chunks.set(pos, first);
            classes[first as usize].pos = pos;
        }
        self.pop_front(chunks, bucket)
    }

    /// Offset of physical bucket `b` from the front.
    fn offset(&self, b: u8) -> u32 {
        (u32::from(b) + MAX_SLOTS - u32::from(self.front)) % MAX_SLOTS
    }

    /// The first class of the first non-empty bucket, moving `front` there.
    fn scan(&mut self, chunks: &Chunks) -> Option<u32> {
        if self.full == 0 {
            return None;
        }
        let i = self.full.trailing_zeros();
        if i > 0 {
            self.front = ((u32::from(self.front) + i) % MAX_SLOTS) as u8;
            self.full >>= i;
        }
        let head = self.heads[usize::from(self.front)];
        (head != NIL).then(|| chunks.get(head))
    }
}

/// One QFQ scheduler instance.
#[derive(Debug)]
pub struct Qfq {
    /// System virtual time, and its fraction below one unit (2^-32 units).
    v: u64,
    v_frac: u32,
    /// `Σw` over the queues held, and `2^62 / Σw`.
    wsum: u64,
    inv_wsum: u64,
    /// ER, IR, EB, IB.
    sets: [u32; 4],
    /// Group index -> position in `groups`, or `NO_GROUP`: only groups in
    /// use cost memory, as a masked scheduler makes an instance per flow.
    group_at: [u8; GROUPS],
    groups: Vec<Group>,
    classes: Vec<Class>,
    chunks: Chunks,
    free: Vec<Slot>,
    lmax: u32,
    /// Per slot, the `lmax` its class was grouped by (its flowset's, else
    /// `lmax`), kept for a change of weight.
    class_lmax: Vec<u32>,
    /// Times a class was pulled back into the bucket window, or a rotation
    /// refused: safety nets that fixed weights never need.
    clamps: u64,
    /// Times the group sets had to be rebuilt.
    repairs: u64,
}

impl Qfq {
    pub fn new(lmax: u32) -> Self {
        Qfq {
            v: 0,
            v_frac: 0,
            wsum: 0,
            inv_wsum: 1 << 62,
            sets: [0; 4],
            group_at: [NO_GROUP; GROUPS],
            groups: Vec::new(),
            classes: Vec::new(),
            chunks: Chunks::default(),
            free: Vec::new(),
            lmax: lmax.clamp(1, MAX_LMAX),
            class_lmax: Vec::new(),
            clamps: 0,
            repairs: 0,
        }
    }

    fn group(&self, index: usize) -> &Group {
        &self.groups[usize::from(self.group_at[index])]
    }

    fn group_mut(&mut self, index: usize) -> &mut Group {
        &mut self.groups[usize::from(self.group_at[index])]
    }

    fn ensure_group(&mut self, index: usize) {
        if self.group_at[index] == NO_GROUP {
            // At most 20 groups, so the position fits below NO_GROUP.
            self.group_at[index] = self.groups.len() as u8;
            self.groups.push(Group::default());
        }
    }

    fn set_wsum(&mut self, wsum: u64) {
        self.wsum = wsum;
        self.inv_wsum = (1u64 << 62) / wsum.max(1);
    }

    /// Virtual time a packet of `len` bytes costs class `c`.
    fn charge(c: &Class, len: u32) -> u64 {
        u64::from(len.min(c.max_len)) * u64::from(c.inv_w)
    }

    /// `V += len / Σw`, carrying the fraction.
    fn advance_v(&mut self, len: u32) {
        let prod = u128::from(len) * u128::from(self.inv_wsum);
        let (frac, carry) = self.v_frac.overflowing_add(prod as u32);
        self.v_frac = frac;
        self.v = self
            .v
            .wrapping_add((prod >> 32) as u64)
            .wrapping_add(u64::from(carry));
    }

    fn jump_v(&mut self, to: u64) {
        if gt(to, self.v) {
            self.v = to;
            self.v_frac = 0;
        }
    }

    fn clear_group(&mut self, index: usize) {
        let bit = !(1u32 << index);
        for set in &mut self.sets {
            *set &= bit;
        }
    }

    /// ER or IR, plus blocked if a group after it in ER finishes earlier.
    fn state_of(&self, index: usize) -> usize {
        let g = self.group(index);
        let mut state = usize::from(gt(g.s, self.v));
        let after = mask_from(self.sets[ER], index);
        if after != 0 {
            let next = self.group(after.trailing_zeros() as usize);
            if gt(g.f, next.f) {
                state |= EB;
            }
        }
        state
    }

    fn move_groups(&mut self, mask: u32, from: usize, to: usize) {
        self.sets[to] |= self.sets[from] & mask;
        self.sets[from] &= !mask;
    }

    /// Group `index` left ER or its finish grew from `old_f`: the groups
    /// before it that it blocked are unblocked, unless the next group in ER
    /// still blocks them.
    fn unblock_groups(&mut self, index: usize, old_f: u64) {
        let after = mask_from(self.sets[ER], index + 1);
        if after != 0 {
            let next = self.group(after.trailing_zeros() as usize);
            if !gt(next.f, old_f) {
                return;
            }
        }
        let before = (1u32 << index) - 1;
        self.move_groups(before, EB, ER);
        self.move_groups(before, IB, IR);
    }

    /// `V` went from `old_v` to `self.v`: group `i` can only have become
    /// eligible if `V` crossed a multiple of its slot size, i.e. if bit
    /// `MIN_SLOT_SHIFT + i` or above changed.
    fn make_eligible(&mut self, old_v: u64) {
        let vslot = self.v >> MIN_SLOT_SHIFT;
        let old = old_v >> MIN_SLOT_SHIFT;
        if vslot == old {
            return;
        }
        let top = 63 - (vslot ^ old).leading_zeros();
        let mask = if top >= 31 {
            u32::MAX
        } else {
            (2u32 << top) - 1
        };
        self.move_groups(mask, IR, ER);
        self.move_groups(mask, IB, EB);
    }

    /// With nothing eligible, `V` jumps to the earliest ineligible start;
    /// then whatever `V` has reached becomes eligible.
    fn update_eligible(&mut self, old_v: u64) {
        let ineligible = self.sets[IR] | self.sets[IB];
        if ineligible == 0 {
            return;
        }
        if self.sets[ER] == 0 {
            let mut bits = ineligible;
            let mut earliest: Option<u64> = None;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let s = self.group(i).s;
                if earliest.is_none_or(|e| gt(e, s)) {
                    earliest = Some(s);
                }
            }
            if let Some(s) = earliest {
                self.jump_v(s);
            }
        }
        self.make_eligible(old_v);
    }

    /// The safety net: rebuilds the four sets from the groups' own
    /// timestamps, with `V` at least the earliest start.
    fn repair(&mut self) {
        self.repairs += 1;
        let all = self.sets.iter().fold(0, |a, s| a | s);
        self.sets = [0; 4];
        let mut bits = all;
        let mut earliest: Option<u64> = None;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if self.group(i).full == 0 {
                continue;
            }
            let s = self.group(i).s;
            if earliest.is_none_or(|e| gt(e, s)) {
                earliest = Some(s);
            }
        }
        let Some(earliest) = earliest else {
            return;
        };
        self.jump_v(earliest);
        // From the last group down, so `state_of` sees the ER groups after
        // each one already placed.
        for i in (0..GROUPS).rev() {
            if all & (1 << i) != 0 && self.group(i).full != 0 {
                let state = self.state_of(i);
                self.sets[state] |= 1 << i;
            }
        }
    }

    /// Start of a class that was idle: its old finish if that is still
    /// ahead of `V` (it may not jump the queue by going quiet); otherwise
    /// `V`, but no earlier than the finish of a group it would otherwise
    /// overtake in ER.
    fn update_start(&mut self, c: usize) {
        // Idle, its `s` is the finish of its last packet.
        let (f, index) = (self.classes[c].s, usize::from(self.classes[c].group));
        let shift = slot_shift(index);
        let rounded_f = round_down(f, shift);
        let limit = round_down(self.v, shift).wrapping_add(1 << shift);
        let s = if !gt(f, self.v) || gt(rounded_f, limit) {
            // Stale: from an earlier busy period (or wrapped).
            let after = mask_from(self.sets[ER], index);
            let blocking = (after != 0)
                .then(|| self.group(after.trailing_zeros() as usize).f)
                .filter(|&next_f| gt(rounded_f, next_f));
            match blocking {
                Some(next_f) if gt(limit, next_f) => next_f,
                Some(_) => limit,
                None => self.v,
            }
        } else {
            f
        };
        self.classes[c].s = s;
    }

    /// Files class `c` in its group's bucket for `rounded_s`, at most 30
    /// buckets after the front (pulling its timestamps back if needed, so a
    /// later one-bucket rotation cannot overflow).
    fn insert(&mut self, c: u32, rounded_s: u64) {
        let index = usize::from(self.classes[c as usize].group);
        let shift = slot_shift(index);
        let g_s = self.group(index).s;
        let mut offset = rounded_s.wrapping_sub(g_s) >> shift;
        if offset > u64::from(MAX_SLOTS - 2) {
            let back = rounded_s
                .wrapping_sub(g_s)
                .wrapping_sub(u64::from(MAX_SLOTS - 2) << shift);
            let cl = &mut self.classes[c as usize];
            cl.s = cl.s.wrapping_sub(back);
            offset = u64::from(MAX_SLOTS - 2);
            self.clamps += 1;
        }
        let g = &mut self.groups[usize::from(self.group_at[index])];
        let bucket = ((u64::from(g.front) + offset) % u64::from(MAX_SLOTS)) as u8;
        g.push_back(&mut self.chunks, &mut self.classes, bucket, c);
        g.full |= 1 << offset;
        self.classes[c as usize].active = true;
    }

    /// An idle class gets a packet of `len` bytes.
    fn activate(&mut self, c: u32, len: u32) {
        let ci = c as usize;
        self.classes[ci].head_len = len;
        self.update_start(ci);
        let cl = &self.classes[ci];
        let index = usize::from(cl.group);
        let shift = slot_shift(index);
        let mut rounded = round_down(cl.s, shift);
        let g = self.group(index);
        if g.full != 0 {
            if !gt(g.s, self.classes[ci].s) {
                // Behind the group's first bucket: no change to the group.
                self.insert(c, rounded);
                return;
            }
            // The group's start moves back: rotate the buckets so the new
            // one is first, unless that would push occupied buckets out of
            // the window, in which case the class starts later instead.
            let top = 31 - g.full.leading_zeros();
            let mut by = g.s.wrapping_sub(rounded) >> shift;
            if by + u64::from(top) > u64::from(MAX_SLOTS - 1) {
                by = u64::from(MAX_SLOTS - 1 - top);
                let to = g.s.wrapping_sub(by << shift);
                let forward = to.wrapping_sub(rounded);
                let cl = &mut self.classes[ci];
                cl.s = cl.s.wrapping_add(forward);
                rounded = to;
                self.clamps += 1;
            }
            let g = self.group_mut(index);
            g.full <<= by;
            g.front = ((u64::from(g.front) + u64::from(MAX_SLOTS) - by % u64::from(MAX_SLOTS))
                % u64::from(MAX_SLOTS)) as u8;
        } else if self.sets[ER] == 0 {
            // The only backlogged group, or nothing eligible: V catches up.
            self.jump_v(rounded);
        }
        self.clear_group(index);
        let g = self.group_mut(index);
        g.s = rounded;
        g.f = rounded.wrapping_add(2 << shift);
        let state = self.state_of(index);
        self.sets[state] |= 1 << index;
        self.insert(c, rounded);
    }

    /// The group's first bucket changed (its head left or moved): refresh
    /// the group's timestamps and set, and unblock groups it held back.
    fn front_changed(&mut self, index: usize) {
        let old_f = self.group(index).f;
        let shift = slot_shift(index);
        let g = &mut self.groups[usize::from(self.group_at[index])];
        let head = g.scan(&self.chunks);
        match head {
            None => {
                let was_er = self.sets[ER] & (1 << index) != 0;
                self.clear_group(index);
                if !was_er {
                    return;
                }
            }
            Some(h) => {
                let rounded = round_down(self.classes[h as usize].s, shift);
                if self.group(index).s == rounded {
                    return;
                }
                let was_er = self.sets[ER] & (1 << index) != 0;
                let g = self.group_mut(index);
                g.s = rounded;
                g.f = rounded.wrapping_add(2 << shift);
                self.clear_group(index);
                let state = self.state_of(index);
                self.sets[state] |= 1 << index;
                if !was_er {
                    return;
                }
            }
        }
        self.unblock_groups(index, old_f);
    }

    /// Serving bucket `bucket` of group `index` has just entered a new chunk.
    /// The queues of the next chunk's classes are asked their head's length
    /// (those classes were read when this chunk's predecessor was entered),
    /// and the classes of the chunk after that are read: so both a class and
    /// its queue are in cache by the time it is served. All at once, the
    /// misses overlap, where one by one, as each class is served, they would
    /// add up. Plain reads: a prefetch instruction would take `unsafe`.
    #[inline]
    fn fetch_ahead(&self, index: usize, bucket: u8, ops: &dyn QueueOps) {
        let g = self.group(index);
        let head = g.heads[usize::from(bucket) % MAX_SLOTS as usize];
        if head.is_multiple_of(CHUNK) && self.classes.len() > FETCH_FROM {
            self.fetch_chunk(head, g.tails[usize::from(bucket) % MAX_SLOTS as usize], ops);
        }
    }

    #[inline(never)]
    fn fetch_chunk(&self, head: u32, tail: u32, ops: &dyn QueueOps) {
        let chunks = &self.chunks.chunks;
        // The classes filed in the chunk at `pos`, and the chunk after it.
        let filed = |pos: u32| -> Option<(&[u32], u32)> {
            let chunk = &chunks.get((pos / CHUNK) as usize)?.0;
            if tail / CHUNK == pos / CHUNK {
                Some((&chunk[..(tail % CHUNK) as usize], NIL))
            } else {
                Some((
                    &chunk[..LINK as usize],
                    chunk[LINK as usize].wrapping_mul(CHUNK),
                ))
            }
        };
        let Some((_, next)) = filed(head) else {
            return;
        };
        let Some((soon, after)) = filed(next) else {
            return;
        };
        let mut seen = 0u32;
        for &c in soon {
            if let Some(cl) = self.classes.get(c as usize) {
                seen ^= ops.head_len(cl.queue).unwrap_or(0);
            }
        }
        if let Some((later, _)) = filed(after) {
            for &c in later {
                if let Some(cl) = self.classes.get(c as usize) {
                    seen ^= cl.s as u32;
                }
            }
        }
        std::hint::black_box(seen);
    }

    /// Takes an active class out of its group, wherever it is.
    fn deactivate(&mut self, c: u32) {
        let ci = c as usize;
        if !self.classes[ci].active {
            return;
        }
        let index = usize::from(self.classes[ci].group);
        let bucket = self.classes[ci].bucket;
        let g = &mut self.groups[usize::from(self.group_at[index])];
        let was_front = bucket == g.front;
        if g.remove(&mut self.chunks, &mut self.classes, c) {
            let off = g.offset(bucket);
            g.full &= !(1 << off);
        }
        // Its head was never sent: no charge, `s` stays.
        self.classes[ci].active = false;
        if !was_front && self.group(index).full != 0 {
            return;
        }
        if was_front && self.group(index).full & 1 != 0 {
            // Others remain in the first bucket: nothing moves.
            return;
        }
        let old_v = self.v;
        self.front_changed(index);
        self.update_eligible(old_v);
    }
}

impl SchedInstance for Qfq {
    fn add_queue(&mut self, q: QueueId, weight: u32) -> Slot {
        self.add_queue_with_lmax(q, weight, 0)
    }

    /// FreeBSD's QFQ takes `lmax` per flowset (`qfq_new_fsk`, `fs.par[1]`);
    /// 0 (not set) falls back to the instance's.
    fn add_queue_with_lmax(&mut self, q: QueueId, weight: u32, lmax: u32) -> Slot {
        let lmax = if lmax == 0 {
            self.lmax
        } else {
            lmax.clamp(1, MAX_LMAX)
        };
        let w = weight.clamp(1, MAX_QFQ_WEIGHT);
        let inv_w = (ONE / u64::from(w)) as u32;
        let eff = (ONE / u64::from(inv_w)) as u32;
        let index = group_index(inv_w, lmax);
        self.ensure_group(index);
        self.set_wsum(self.wsum + u64::from(eff));
        let class = Class {
            // A finish at V reads as stale: the first packet starts at V.
            s: self.v,
            inv_w,
            max_len: max_len(inv_w, index),
            queue: q,
            head_len: 0,
            pos: NIL,
            group: index as u8,
            bucket: 0,
            active: false,
            vacant: false,
        };
        let slot = if let Some(s) = self.free.pop() {
            self.classes[s as usize] = class;
            s
        } else {
            self.classes.push(class);
            (self.classes.len() - 1) as Slot
        };
        self.class_lmax.resize(self.classes.len(), self.lmax);
        self.class_lmax[slot as usize] = lmax;
        slot
    }

    fn remove_queue(&mut self, slot: Slot) {
        match self.classes.get(slot as usize) {
            Some(c) if !c.vacant => {}
            _ => return,
        }
        // Normally idle already; if queue management emptied it behind our
        // back it is still filed, and leaves now.
        self.deactivate(slot);
        let c = &mut self.classes[slot as usize];
        c.vacant = true;
        let w = u64::from(c.weight());
        self.set_wsum(self.wsum.saturating_sub(w));
        self.free.push(slot);
    }

    fn set_weight(&mut self, slot: Slot, weight: u32) {
        match self.classes.get(slot as usize) {
            Some(c) if !c.vacant => {}
            _ => return,
        }
        let was_active = self.classes[slot as usize].active;
        self.deactivate(slot);
        let w = weight.clamp(1, MAX_QFQ_WEIGHT);
        let inv_w = (ONE / u64::from(w)) as u32;
        let eff = (ONE / u64::from(inv_w)) as u32;
        let lmax = self
            .class_lmax
            .get(slot as usize)
            .copied()
            .unwrap_or(self.lmax);
        let index = group_index(inv_w, lmax);
        self.ensure_group(index);
        let c = &mut self.classes[slot as usize];
        let old = u64::from(c.weight());
        c.inv_w = inv_w;
        c.max_len = max_len(inv_w, index);
        c.group = index as u8;
        let head_len = c.head_len;
        self.set_wsum(self.wsum.saturating_sub(old) + u64::from(eff));
        if was_active {
            // Back in at its new group, starting where it stopped (or at V).
            self.activate(slot, head_len);
        }
    }

    #[inline]
    fn enqueue(&mut self, slot: Slot, len: u32, _was_empty: bool) {
        // Our own view of backlog decides: an active class already has its
        // head priced, whatever queue management did to its packets.
        match self.classes.get(slot as usize) {
            Some(c) if !c.active && !c.vacant => self.activate(slot, len),
            _ => {}
        }
    }

    fn dequeue(&mut self, ops: &mut dyn QueueOps) -> Option<QueueId> {
        loop {
            if self.sets[ER] == 0 {
                if self.sets.iter().all(|&s| s == 0) {
                    return None;
                }
                // Backlogged yet nothing eligible and ready: cannot happen
                // while the invariants hold; rebuild rather than stall.
                self.repair();
                if self.sets[ER] == 0 {
                    return None;
                }
            }
            let index = self.sets[ER].trailing_zeros() as usize;
            let g = &mut self.groups[usize::from(self.group_at[index])];
            let Some(c) = g.scan(&self.chunks) else {
                self.repairs += 1;
                self.clear_group(index);
                continue;
            };
            let ci = c as usize;
            let q = self.classes[ci].queue;
            let old_v = self.v;
            let popped = ops.pop(q);
            let next = match popped {
                Some(len) => {
                    // Charged for what left, which queue management may
                    // have made another packet than the head we priced.
                    let cl = &mut self.classes[ci];
                    cl.s = cl.s.wrapping_add(Self::charge(cl, len));
                    let counted = len.min(cl.max_len);
                    self.advance_v(counted);
                    ops.head_len(q)
                }
                None => {
                    // Everything was dropped by queue management: nothing
                    // sent, nothing charged; the class goes idle.
                    None
                }
            };
            let shift = slot_shift(index);
            let front_moved = match next {
                None => {
                    let g = &mut self.groups[usize::from(self.group_at[index])];
                    let front = g.front;
                    if g.pop_front(&mut self.chunks, front) {
                        g.full &= !1;
                    } else {
                        self.fetch_ahead(index, front, ops);
                    }
                    self.classes[ci].active = false;
                    true
                }
                Some(next_len) => {
                    let cl = &mut self.classes[ci];
                    cl.head_len = next_len;
                    let rounded = round_down(cl.s, shift);
                    let g = &mut self.groups[usize::from(self.group_at[index])];
                    let front = g.front;
                    let emptied = g.pop_front(&mut self.chunks, front);
                    if !emptied {
                        self.fetch_ahead(index, front, ops);
                    }
                    let g = &mut self.groups[usize::from(self.group_at[index])];
                    if rounded == g.s {
                        // Same bucket: to its back, so equal classes take
                        // turns.
                        g.push_back(&mut self.chunks, &mut self.classes, front, c);
                        false
                    } else {
                        if emptied {
                            g.full &= !1;
                        }
                        self.insert(c, rounded);
                        true
                    }
                }
            };
            if front_moved {
                self.front_changed(index);
            }
            self.update_eligible(old_v);
            if popped.is_some() {
                return Some(q);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;

    use super::super::testkit::Queues;

    struct Rig {
        s: Qfq,
        ops: Queues,
        slots: Vec<Slot>,
    }

    impl Rig {
        fn new(lmax: u32, weights: &[u32]) -> Self {
            let mut rig = Rig {
                s: Qfq::new(lmax),
                ops: Queues::default(),
                slots: Vec::new(),
            };
            for &w in weights {
                let q = rig.ops.q.len() as QueueId;
                rig.ops.q.push(VecDeque::new());
                rig.slots.push(rig.s.add_queue(q, w));
            }
            rig
        }
        fn push(&mut self, q: QueueId, len: u32) {
            let was_empty = self.ops.q[q as usize].is_empty();
            self.ops.q[q as usize].push_back(len);
            self.s.enqueue(self.slots[q as usize], len, was_empty);
        }
        fn serve(&mut self) -> Option<QueueId> {
            self.s.dequeue(&mut self.ops)
        }
        /// Serves `n` packets, refilling the served queue with `lens[q]`.
        fn serve_backlogged(&mut self, n: usize, lens: &[u32]) -> Vec<(QueueId, u32)> {
            (0..n)
                .map(|_| {
                    let q = self.serve().expect("backlogged");
                    self.push(q, lens[q as usize]);
                    (q, lens[q as usize])
                })
                .collect()
        }
    }

    #[test]
    fn parameters_follow_freebsd_bounds() {
        assert_eq!(lmax_param(&[]).unwrap(), 1500);
        assert_eq!(lmax_param(&[("lmax".into(), 2000)]).unwrap(), 2000);
        assert!(lmax_param(&[("lmax".into(), 0)]).is_err());
        assert!(lmax_param(&[("lmax".into(), 2001)]).is_err());
        assert!(lmax_param(&[("quantum".into(), 100)]).is_err());
        assert_eq!(super::super::lookup("QFQ").unwrap().display, "QFQ");
        assert_eq!(MIN_SLOT_SHIFT, 22);
    }

    #[test]
    fn a_class_is_half_a_cache_line() {
        assert_eq!(std::mem::size_of::<Class>(), 32);
        assert_eq!(std::mem::align_of::<Class>(), 32);
    }

    #[test]
    fn groups_are_the_rounded_up_log_of_lmax_over_weight() {
        // σ = lmax · 2^30 / w; group i holds σ <= 2^(22 + i).
        assert_eq!(group_index(ONE as u32, 1500), 19);
        assert_eq!(group_index(ONE as u32, 2000), 19);
        assert_eq!(group_index((ONE / 2) as u32, 1024), 17, "2^39 exactly");
        assert_eq!(group_index((ONE / 2) as u32, 1025), 18);
        assert_eq!(group_index((ONE / 65536) as u32, 1), 0);
        assert_eq!(
            group_index((ONE / 100) as u32, 1500),
            12,
            "15 · 2^30 < 2^34"
        );
    }

    #[test]
    fn weights_69_30_1_get_their_shares() {
        let w = [69, 30, 1];
        let mut rig = Rig::new(1500, &w);
        let lens = [1000, 1000, 1000];
        for q in 0..3 {
            for _ in 0..3 {
                rig.push(q, 1000);
            }
        }
        let order = rig.serve_backlogged(20_000, &lens);
        let mut c = [0usize; 3];
        for &(q, _) in &order {
            c[q as usize] += 1;
        }
        // 20,000 packets at 69/30/1 percent, within a few packets.
        assert!(c[0].abs_diff(13_800) <= 4, "{c:?}");
        assert!(c[1].abs_diff(6_000) <= 4, "{c:?}");
        assert!(c[2].abs_diff(200) <= 4, "{c:?}");
        assert_eq!((rig.s.clamps, rig.s.repairs), (0, 0));
    }

    /// QFQ's worst-case fair index for a class of weight `w`, in bytes:
    /// `3 · w · σ + 2 · L`, `σ` the group's slot in bytes per unit weight.
    fn bwfi(w: u32, lmax: u32) -> f64 {
        let sigma = (1u64 << slot_shift(group_index((ONE / u64::from(w)) as u32, lmax))) as f64
            / ONE as f64;
        3.0 * f64::from(w) * sigma + 2.0 * 1500.0
    }

    #[test]
    fn random_weights_and_sizes_stay_within_the_fair_index() {
        // 30 always-backlogged classes, weights 1..=100 and sizes 64..=1500
        // drawn from a fixed LCG; every interval starting at a multiple of
        // 97 departures is checked against each class's B-WFI.
        for seed in [1u64, 2, 3] {
            let mut x = seed;
            let mut next = |m: u64| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) % m
            };
            let weights: Vec<u32> = (0..30).map(|_| 1 + next(100) as u32).collect();
            let lens: Vec<u32> = (0..30).map(|_| 64 + next(1437) as u32).collect();
            let mut rig = Rig::new(1500, &weights);
            for q in 0..30 {
                rig.push(q, lens[q as usize]);
                rig.push(q, lens[q as usize]);
            }
            let order = rig.serve_backlogged(6000, &lens);
            let wsum: f64 = weights.iter().map(|&w| f64::from(w)).sum();
            let b: Vec<f64> = weights.iter().map(|&w| bwfi(w, 1500)).collect();
            for start in (0..order.len()).step_by(97) {
                let mut bytes = [0f64; 30];
                let mut total = 0f64;
                for &(q, len) in &order[start..] {
                    bytes[q as usize] += f64::from(len);
                    total += f64::from(len);
                    for k in 0..30 {
                        let fluid = f64::from(weights[k]) / wsum * total;
                        assert!(
                            bytes[k] >= fluid - b[k],
                            "seed {seed} from {start}: class {k} (w {}) {} < {fluid} - {}",
                            weights[k],
                            bytes[k],
                            b[k]
                        );
                    }
                }
            }
            assert_eq!((rig.s.clamps, rig.s.repairs), (0, 0));
        }
    }

    #[test]
    fn virtual_time_wraps_without_a_hitch() {
        // With one queue of weight 1, V gains 1500 · 2^30 per packet and
        // wraps after ~11 million packets (seconds at 10 Gbit/s). Start just
        // below the wrap, offset by a multiple of every slot size, and the
        // order of service must be the same as from zero.
        let run = |v0: u64| {
            let weights = [1, 3, 17, 100];
            let mut rig = Rig::new(1500, &[]);
            rig.s.v = v0;
            for (q, &w) in weights.iter().enumerate() {
                rig.ops.q.push(VecDeque::new());
                rig.slots.push(rig.s.add_queue(q as QueueId, w));
            }
            let lens = [1500, 64, 700, 1200];
            for q in 0..4 {
                rig.push(q, lens[q as usize]);
                rig.push(q, lens[q as usize]);
            }
            let order: Vec<QueueId> = rig
                .serve_backlogged(20_000, &lens)
                .iter()
                .map(|x| x.0)
                .collect();
            (order, rig.s.v)
        };
        let (plain, _) = run(0);
        let (wrapped, v) = run(0u64.wrapping_sub(1 << 45));
        assert!(v < 1 << 50, "V wrapped past zero: {v:#x}");
        assert_eq!(plain, wrapped);
    }

    #[test]
    fn ten_thousand_equal_queues_take_turns() {
        const N: usize = 10_000;
        let mut rig = Rig::new(1500, &vec![10; N]);
        for q in 0..N as QueueId {
            rig.push(q, 1500);
            rig.push(q, 1500);
        }
        let order = rig.serve_backlogged(5 * N, &vec![1500; N]);
        for round in order.chunks(N) {
            let mut seen = vec![0u8; N];
            for &(q, _) in round {
                seen[q as usize] += 1;
            }
            assert!(seen.iter().all(|&n| n == 1));
        }
        assert_eq!((rig.s.clamps, rig.s.repairs), (0, 0));
    }

    #[test]
    fn small_packets_of_one_class_interleave_with_its_peers() {
        // Two equal classes of 64-byte packets: a slot spans ~23 packets of
        // each, yet they alternate.
        let mut rig = Rig::new(1500, &[1, 1]);
        for _ in 0..3 {
            rig.push(0, 64);
            rig.push(1, 64);
        }
        let order = rig.serve_backlogged(100, &[64, 64]);
        for pair in order.chunks(2) {
            assert_ne!(pair[0].0, pair[1].0, "{order:?}");
        }
    }

    #[test]
    fn a_giant_packet_is_charged_one_slot_and_breaks_nothing() {
        let mut rig = Rig::new(1500, &[1, 1]);
        for _ in 0..50 {
            rig.push(0, 65_000);
            rig.push(1, 1500);
        }
        let mut n = 0;
        while rig.serve().is_some() {
            n += 1;
        }
        assert_eq!(n, 100);
        assert_eq!((rig.s.clamps, rig.s.repairs), (0, 0));
    }

    #[test]
    fn a_queue_leaving_from_the_middle_of_a_bucket() {
        let mut rig = Rig::new(1500, &[5, 5, 5]);
        for q in 0..3 {
            rig.push(q, 500);
            rig.push(q, 500);
        }
        // Queue 1 is emptied behind the scheduler's back and removed.
        rig.ops.q[1].clear();
        rig.s.remove_queue(rig.slots[1]);
        let mut served = Vec::new();
        while let Some(q) = rig.serve() {
            served.push(q);
        }
        assert_eq!(served.len(), 4);
        assert!(!served.contains(&1));
        assert_eq!(rig.ops.empty_pops, 0);
        assert_eq!(rig.s.wsum, 10);
    }

    #[test]
    fn queues_leave_from_the_middle_of_buckets_many_chunks_long() {
        // 200 equal classes fill one bucket over 14 chunks; every third
        // leaves (emptied behind the scheduler's back), every fifth changes
        // weight, and the rest must all be served, each packet once.
        const N: u32 = 200;
        let mut rig = Rig::new(1500, &vec![7; N as usize]);
        for q in 0..N {
            rig.push(q, 1000);
            rig.push(q, 1000);
        }
        for q in (0..N).step_by(3) {
            rig.ops.q[q as usize].clear();
            rig.s.remove_queue(rig.slots[q as usize]);
        }
        for q in (1..N).step_by(5) {
            rig.s.set_weight(rig.slots[q as usize], 3);
        }
        let mut served = vec![0u32; N as usize];
        while let Some(q) = rig.serve() {
            served[q as usize] += 1;
        }
        for q in 0..N {
            assert_eq!(
                served[q as usize],
                if q % 3 == 0 { 0 } else { 2 },
                "queue {q}"
            );
        }
        assert_eq!(rig.ops.empty_pops, 0);
        assert_eq!(rig.s.sets, [0; 4]);
        assert_eq!(rig.s.repairs, 0);
        assert_eq!(
            rig.s.chunks.free.len(),
            rig.s.chunks.chunks.len(),
            "every chunk returned"
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u8, u32),
        Serve(u8),
        Weight(u8, u32),
        AqmDrop(u8),
        Replace(u8, u32),
    }

    fn op(weight_changes: u32) -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..8u8, 1..1500u32).prop_map(|(q, l)| Op::Push(q, l)),
            3 => (1..4u8).prop_map(Op::Serve),
            weight_changes => (0..8u8, 0..70_000u32).prop_map(|(q, w)| Op::Weight(q, w)),
            1 => (0..8u8).prop_map(Op::AqmDrop),
            1 => (0..8u8, 0..70_000u32).prop_map(|(q, w)| Op::Replace(q, w)),
        ]
    }

    /// Runs `ops`, checks every packet left once and the scheduler ends
    /// empty; returns the rig for further checks.
    fn run_ops(lmax: u32, weights: &[u32], ops: Vec<Op>) -> Result<Rig, TestCaseError> {
        let mut rig = Rig::new(lmax, weights);
        let mut pushed = Vec::new();
        let mut tags = 0u32;
        for op in ops {
            match op {
                Op::Push(q, len) => {
                    // Unique lengths, most of them longer than lmax.
                    tags += 1;
                    let tag = (tags << 11) | len;
                    pushed.push(tag);
                    rig.push(u32::from(q), tag);
                }
                Op::Serve(n) => {
                    for _ in 0..n {
                        let backlogged = rig.ops.q.iter().any(|q| !q.is_empty());
                        let aqm = !rig.ops.aqm_drops.is_empty();
                        let served = rig.serve();
                        prop_assert!(backlogged || served.is_none());
                        prop_assert!(!backlogged || aqm || served.is_some());
                    }
                }
                Op::Weight(q, w) => rig.s.set_weight(rig.slots[usize::from(q)], w),
                Op::AqmDrop(q) => {
                    if !rig.ops.aqm_drops.contains(&u32::from(q)) {
                        rig.ops.aqm_drops.push(u32::from(q));
                    }
                }
                Op::Replace(q, w) => {
                    let q = usize::from(q);
                    if rig.ops.q[q].is_empty() {
                        rig.s.remove_queue(rig.slots[q]);
                        rig.slots[q] = rig.s.add_queue(q as QueueId, w);
                    }
                }
            }
        }
        while rig.serve().is_some() {}
        prop_assert!(rig.ops.q.iter().all(VecDeque::is_empty));
        prop_assert_eq!(rig.ops.empty_pops, 0);
        prop_assert_eq!(rig.s.sets, [0; 4]);
        prop_assert_eq!(rig.s.repairs, 0, "the group sets never needed a rebuild");
        let mut out: Vec<u32> = rig
            .ops
            .served
            .iter()
            .map(|s| s.1)
            .chain(rig.ops.aqm_dropped.iter().copied())
            .collect();
        out.sort_unstable();
        prop_assert_eq!(out, pushed);
        Ok(rig)
    }

    proptest! {
        #[test]
        fn every_packet_leaves_exactly_once(
            lmax in 1..2001u32,
            weights in prop::collection::vec(0..70_000u32, 8),
            ops in prop::collection::vec(op(1), 1..400),
        ) {
            run_ops(lmax, &weights, ops)?;
        }

        #[test]
        fn without_weight_changes_no_class_leaves_the_window(
            lmax in 1..2001u32,
            weights in prop::collection::vec(0..70_000u32, 8),
            ops in prop::collection::vec(op(0), 1..400),
        ) {
            let rig = run_ops(lmax, &weights, ops)?;
            prop_assert_eq!(rig.s.clamps, 0);
        }
    }
}
