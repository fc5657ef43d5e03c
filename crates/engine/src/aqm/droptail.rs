//! Drop tail, FreeBSD's default: the queue limit alone, no state.

use super::{AqmModel, AqmState, AqmType};
use crate::units::QueueLimit;

pub static TYPE: AqmType = AqmType {
    name: "droptail",
    positional: &[],
    params: &[],
    flowset_ecn: false,
    tunables: &[],
    build: |params| match params.first() {
        None => Ok(Box::new(DropTail)),
        Some((k, _)) => Err(format!("droptail takes no parameters, not `{k}`").into()),
    },
};

#[derive(Debug)]
struct DropTail;

impl AqmModel for DropTail {
    fn new_state(&self, _limit: QueueLimit) -> Option<Box<dyn AqmState>> {
        None
    }

    fn display(&self) -> String {
        "droptail".to_string()
    }
}
