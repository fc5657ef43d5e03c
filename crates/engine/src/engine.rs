//! The engine: ruleset + dummynet + event queue. (In progress: API first.)

use crate::config::{Command, Settings};
use crate::packet::{IfaceId, Output, PacketInfo, Payload, Verdict};
use crate::stats::{Snapshot, Totals};
use crate::time::Nanos;

/// A configuration command the engine refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

pub struct Engine<P> {
    _p: std::marker::PhantomData<P>,
}

impl<P: Payload> Engine<P> {
    pub fn new(_seed: u64) -> Self {
        todo!()
    }
    pub fn with_settings(_seed: u64, _settings: Settings) -> Self {
        todo!()
    }
    pub fn iface(&mut self, _name: &str) -> IfaceId {
        todo!()
    }
    pub fn apply(&mut self, _now: Nanos, _cmd: Command) -> Result<(), ConfigError> {
        todo!()
    }
    pub fn input(&mut self, _now: Nanos, _info: PacketInfo, _payload: P) -> Verdict<P> {
        todo!()
    }
    pub fn poll(&mut self, _now: Nanos) -> Option<Output<P>> {
        todo!()
    }
    pub fn next_deadline(&self) -> Option<Nanos> {
        todo!()
    }
    pub fn snapshot(&self) -> Snapshot {
        todo!()
    }
    pub fn totals(&self) -> Totals {
        todo!()
    }
}
