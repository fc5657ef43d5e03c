//! `corrupt P [correlation C]`: netem's single-bit corruption.
//!
//! With probability `P` one bit of the packet, at a uniformly drawn byte and
//! bit, is flipped; checksums are left as they are, so the receiver's
//! checksum (or the application) is what notices. netem flips a bit of the
//! bytes it holds, the frame at a device's qdisc, link header included; here
//! it is the IP packet ([`crate::Payload::bytes_mut`]) in every mode, since
//! on a real link a bit flipped in the link header fails the frame check
//! and is a loss, not a corruption the receiver sees. A payload with no
//! bytes is counted as corrupted and left unchanged.

use super::correlated::{self, CorrState, Correlated};
use super::{Impairment, Stage};
use crate::rng::Rng;

/// `corrupt P [correlation C]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Corrupt(pub Correlated);

/// Per-queue state.
#[derive(Debug, Clone, Copy, Default)]
pub struct CorruptState(CorrState);

impl CorruptState {
    #[inline]
    pub fn hit(&mut self, c: Corrupt, rng: &mut Rng) -> bool {
        self.0.chance(c.0, rng)
    }
}

/// Flips one uniformly drawn bit of `bytes` (nothing if empty); returns the
/// bit's index.
pub fn flip_one_bit(bytes: &mut [u8], rng: &mut Rng) -> Option<usize> {
    let n = u32::try_from(bytes.len()).ok().filter(|&n| n > 0)?;
    let at = rng.below(n) as usize;
    let bit = rng.below(8) as usize;
    bytes[at] ^= 1 << bit;
    Some(at * 8 + bit)
}

impl Impairment for Corrupt {
    fn name(&self) -> &'static str {
        "corrupt"
    }

    fn stage(&self) -> Stage {
        Stage::Entry
    }

    fn display(&self) -> String {
        format!("corrupt {}", correlated::display(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_exactly_one_bit() {
        let mut rng = Rng::new(9);
        let mut hits = [0u32; 16];
        for _ in 0..16_000 {
            let mut b = [0u8; 2];
            let i = flip_one_bit(&mut b, &mut rng).unwrap();
            assert_eq!(b[0].count_ones() + b[1].count_ones(), 1);
            assert_eq!(b[i / 8], 1 << (i % 8));
            hits[i] += 1;
        }
        // Every bit position is reachable and roughly equally likely.
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
        assert_eq!(flip_one_bit(&mut [], &mut rng), None);
    }
}
