//! The backends' slots: attached and detached at run time, by generation.

use std::os::fd::BorrowedFd;

use dummynet_engine::Engine;

use crate::{Arrival, Backend, Carrier};

/// The data plane's backends, in slots that keep their place: a backend
/// attached at run time (`shell --join`: [`RequestKind::Attach`]) takes a
/// vacant slot or a new one, and one detached leaves its slot vacant. A
/// packet carries its backend's slot and the slot's generation
/// ([`Carrier::backend`]), so one read by a detached backend is never sent
/// out of the backend that took its slot since.
pub struct Backends {
    pub(super) slots: Vec<Box<dyn Backend>>,
    pub(super) generations: Vec<u16>,
    pub(super) vacant: Vec<bool>,
    /// The engine configuration epoch the backends (and the late reads)
    /// were last told of ([`super::DataPlane::reconfigured`]).
    pub(super) epoch: Option<u64>,
}

impl Backends {
    pub(super) fn new(backends: Vec<Box<dyn Backend>>) -> Self {
        let n = backends.len();
        Backends {
            slots: backends,
            generations: vec![0; n],
            vacant: vec![false; n],
            epoch: None,
        }
    }

    /// What a packet read by slot `i` carries ([`Carrier::backend`]).
    pub(super) fn id(&self, i: usize) -> u32 {
        let generation = self.generations.get(i).copied().unwrap_or(0);
        (u32::from(generation) << 16) | (i as u32 & 0xffff)
    }

    /// Puts `b` in the first vacant slot (or a new one, up to
    /// [`MAX_BACKENDS`]); returns the slot, or gives `b` back.
    pub(super) fn attach(&mut self, b: Box<dyn Backend>) -> Result<usize, Box<dyn Backend>> {
        if let Some(i) = self.vacant.iter().position(|v| *v) {
            self.slots[i] = b;
            self.vacant[i] = false;
            return Ok(i);
        }
        if self.slots.len() >= MAX_BACKENDS {
            return Err(b);
        }
        self.slots.push(b);
        self.generations.push(0);
        self.vacant.push(false);
        Ok(self.slots.len() - 1)
    }

    pub(super) fn has_room(&self) -> bool {
        self.slots.len() < MAX_BACKENDS || self.vacant.iter().any(|v| *v)
    }

    /// Takes the backend out of slot `i`, leaving it vacant for a later
    /// generation.
    pub(super) fn detach(&mut self, i: usize) -> Option<Box<dyn Backend>> {
        if self.vacant.get(i) != Some(&false) {
            return None;
        }
        self.vacant[i] = true;
        self.generations[i] = self.generations[i].wrapping_add(1);
        Some(std::mem::replace(&mut self.slots[i], Box::new(Vacant)))
    }

    /// Backends attached (vacant slots left out).
    pub fn attached(&self) -> usize {
        self.vacant.iter().filter(|v| !**v).count()
    }
}

/// Most backend slots: a packet carries its slot in 16 bits.
pub const MAX_BACKENDS: usize = 1 << 16;

/// What a detached backend leaves in its slot: no descriptors, no packets,
/// and no say in how late arrivals may be read.
pub(super) struct Vacant;

impl Backend for Vacant {
    fn describe(&self) -> String {
        "vacant".into()
    }
    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        Vec::new()
    }
    fn receive(&mut self, _: &mut Engine<Carrier>, _: &mut Vec<Arrival>) -> bool {
        false
    }
    fn late_reading(&self) -> Option<crate::LateReading> {
        Some(crate::LateReading {
            room: usize::MAX,
            ifaces: Vec::new(),
        })
    }
    fn complete(&mut self, _: Carrier, _: bool) {}
    fn flush(&mut self) {}
    fn stats(&mut self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// Hands a packet back to the backend that read it, if it is still
/// attached: one detached since ([`RequestKind::Detach`]) has left a vacant
/// slot, or a slot taken by another backend of a later generation, and the
/// packet is let go.
pub(super) fn complete(backends: &mut Backends, carrier: Carrier, deliver: bool) {
    let slot = (carrier.backend & 0xffff) as usize;
    let generation = (carrier.backend >> 16) as u16;
    if backends.generations.get(slot) == Some(&generation) {
        if let Some(b) = backends.slots.get_mut(slot) {
            b.complete(carrier, deliver);
        }
    }
}
