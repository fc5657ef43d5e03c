//! `overhead N [cellsize C [celloverhead O]]`: what the link bills a packet.
//!
//! netem's rate shaping adds a per-packet overhead and rounds up to whole
//! cells (`packet_overhead`, `cell_size`, `cell_overhead`): each packet of
//! `len` bytes occupies the link as `len + N` bytes, or, with a cell size,
//! as `ceil((len + N) / C)` cells of `C + O` bytes. `overhead 24` bills an
//! Ethernet frame's preamble, start delimiter, FCS and inter-frame gap, so a
//! 10 Mbit/s pipe carries what 10 Mbit/s Ethernet carries; `overhead 10
//! cellsize 48 celloverhead 5` is ATM with AAL5 (a DSL line). A negative `N`
//! removes bytes (a header the wire does not carry). Queues, AQMs and
//! counters still see the packet's own length.

use super::{Impairment, On, Stage};
use crate::params::ParamError;

/// Largest absolute `overhead` / `celloverhead`, bytes.
pub const MAX_OVERHEAD: i32 = 65_535;
/// Largest `cellsize`, bytes.
pub const MAX_CELL: u32 = 65_535;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Overhead {
    /// Bytes added to every packet (may be negative).
    pub bytes: i32,
    /// Cell size in bytes; 0: no cells.
    pub cell_size: u32,
    /// Bytes added to every cell (may be negative, with cells only).
    pub cell_overhead: i32,
}

impl Overhead {
    /// Bytes the link carries for a packet of `len` bytes.
    #[inline]
    pub fn billed(&self, len: u32) -> u64 {
        let len = (i64::from(len) + i64::from(self.bytes)).max(0) as u64;
        if self.cell_size == 0 {
            return len;
        }
        let cell = u64::from(self.cell_size);
        let cells = len.div_ceil(cell);
        let per_cell = (i64::from(self.cell_size) + i64::from(self.cell_overhead)).max(0) as u64;
        cells * per_cell
    }
}

impl Impairment for Overhead {
    fn name(&self) -> &'static str {
        "overhead"
    }

    fn stage(&self) -> Stage {
        Stage::Link
    }

    fn check(&self, _on: On<'_>) -> Result<(), ParamError> {
        let o = self;
        if o.bytes.abs() > MAX_OVERHEAD || o.cell_overhead.abs() > MAX_OVERHEAD {
            return Err(
                format!("overhead is out of range -{MAX_OVERHEAD}..{MAX_OVERHEAD} bytes").into(),
            );
        }
        if o.cell_size > MAX_CELL {
            return Err(format!(
                "cellsize {} is out of range 1..{MAX_CELL} bytes",
                o.cell_size
            )
            .into());
        }
        if o.cell_size == 0 && o.cell_overhead != 0 {
            return Err("celloverhead needs a cellsize".into());
        }
        if o.cell_size != 0 && i64::from(o.cell_size) + i64::from(o.cell_overhead) <= 0 {
            return Err(format!(
                "celloverhead {} leaves nothing of a {}-byte cell",
                o.cell_overhead, o.cell_size
            )
            .into());
        }
        Ok(())
    }

    fn display(&self) -> String {
        let o = self;
        let mut s = format!("overhead {}", o.bytes);
        if o.cell_size != 0 {
            s.push_str(&format!(" cellsize {}", o.cell_size));
            if o.cell_overhead != 0 {
                s.push_str(&format!(" celloverhead {}", o.cell_overhead));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_cells() {
        let eth = Overhead {
            bytes: 24,
            ..Default::default()
        };
        assert_eq!(eth.billed(1500), 1524);
        let atm = Overhead {
            bytes: 10,
            cell_size: 48,
            cell_overhead: 5,
        };
        // 40 + 10 = 50 bytes: two cells of 53.
        assert_eq!(atm.billed(40), 106);
        // 86 + 10 = 96: exactly two cells.
        assert_eq!(atm.billed(86), 106);
        assert_eq!(atm.billed(87), 159);
        let strip = Overhead {
            bytes: -100,
            ..Default::default()
        };
        assert_eq!(strip.billed(60), 0);
        let on = On::Link(&crate::command::LinkConfig::default());
        assert!(atm.check(on).is_ok());
        let orphan = Overhead {
            cell_overhead: 3,
            ..Default::default()
        };
        assert!(orphan.check(on).is_err());
    }
}
