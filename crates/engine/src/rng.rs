//! The engine's single source of randomness.
//!
//! Xoshiro256++ (Blackman & Vigna) seeded through SplitMix64, as `rand_xoshiro`
//! specifies: the stream for a seed is fixed by the algorithm, not by this
//! crate's version or the machine, so a seeded run is reproducible anywhere.

use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Name of the PRNG, reported by tools that print their configuration.
pub const ALGORITHM: &str = "xoshiro256++ (seeded by splitmix64)";

#[derive(Debug, Clone)]
pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// An independent stream for one object of the engine (a queue, a
    /// scheduler instance), from the engine's seed and words that name the
    /// object. The words are mixed with SplitMix64's finalizer, so the
    /// stream depends only on the seed and the name: configuring another
    /// object, or the order objects are made in, changes nothing here.
    pub fn stream(seed: u64, name: &[u64]) -> Self {
        let mut x = mix64(seed ^ 0x6a09_e667_f3bc_c908);
        for &w in name {
            x = mix64(x ^ mix64(w.wrapping_add(0x9e37_79b9_7f4a_7c15)));
        }
        Rng(Xoshiro256PlusPlus::seed_from_u64(x))
    }

    pub fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// True with probability `p`, where `p` is a [`Probability`].
    pub fn chance(&mut self, p: Probability) -> bool {
        match p.0 {
            0 => false,
            Probability::ONE_RAW => true,
            t => self.next_u32() < t,
        }
    }

    /// Uniform integer in `0..n` (n > 0), without modulo bias.
    pub fn below(&mut self, n: u32) -> u32 {
        // Lemire's multiply-shift; the rejection keeps it exactly uniform.
        let n64 = u64::from(n.max(1));
        loop {
            let m = u64::from(self.next_u32()) * n64;
            let low = m as u32;
            if low >= (n64 as u32).wrapping_neg() % (n64 as u32) || n64 == 1 {
                return (m >> 32) as u32;
            }
        }
    }
}

/// SplitMix64's output function (Steele, Lea & Flood 2014).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A probability stored as a threshold on a uniform `u32`, so the draw is one
/// comparison and the same seed gives the same outcomes everywhere.
/// `1.0` is represented specially so that it always succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Probability(u32);

impl Probability {
    const ONE_RAW: u32 = u32::MAX;
    pub const ZERO: Probability = Probability(0);
    pub const ONE: Probability = Probability(Self::ONE_RAW);

    /// `p` must lie in `[0, 1]`; returns `None` otherwise (including NaN).
    pub fn new(p: f64) -> Option<Self> {
        if !(0.0..=1.0).contains(&p) {
            return None;
        }
        if p >= 1.0 {
            return Some(Self::ONE);
        }
        // 2^32 * p, rounded; capped below ONE_RAW so only p == 1 is certain.
        let t = (p * 4_294_967_296.0).round();
        Some(Probability(
            (t as u64).min(u64::from(Self::ONE_RAW - 1)) as u32
        ))
    }

    pub fn as_f64(self) -> f64 {
        if self == Self::ONE {
            1.0
        } else {
            f64::from(self.0) / 4_294_967_296.0
        }
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// The threshold a uniform `u32` is compared with (`u32::MAX` for 1).
    pub fn threshold(self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn stream_is_reference_xoshiro256pp() {
        // An independent transcription of the published algorithms: seeding by
        // SplitMix64, output rotl(s0 + s3, 23) + s0. If a dependency ever
        // changed the stream, seeded results would silently change with it.
        fn splitmix(x: &mut u64) -> u64 {
            *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = *x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        for seed in [0u64, 1, 42, u64::MAX] {
            let mut x = seed;
            let mut s = [0u64; 4];
            for w in &mut s {
                *w = splitmix(&mut x);
            }
            let mut ours = Rng::new(seed);
            for _ in 0..64 {
                let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
                let t = s[1] << 17;
                s[2] ^= s[0];
                s[3] ^= s[1];
                s[1] ^= s[2];
                s[0] ^= s[3];
                s[2] ^= t;
                s[3] = s[3].rotate_left(45);
                assert_eq!(ours.next_u64(), out, "seed {seed}");
            }
        }
    }

    #[test]
    fn streams_are_fixed_by_seed_and_name() {
        let a = Rng::stream(7, &[1, 2]).next_u64();
        assert_eq!(a, Rng::stream(7, &[1, 2]).next_u64());
        assert_ne!(a, Rng::stream(7, &[2, 1]).next_u64());
        assert_ne!(a, Rng::stream(8, &[1, 2]).next_u64());
        assert_ne!(a, Rng::stream(7, &[1, 2, 0]).next_u64());
    }

    #[test]
    fn probability_bounds() {
        assert!(Probability::new(-0.1).is_none());
        assert!(Probability::new(1.5).is_none());
        assert!(Probability::new(f64::NAN).is_none());
        let mut r = Rng::new(7);
        assert!((0..1000).all(|_| r.chance(Probability::ONE)));
        assert!((0..1000).all(|_| !r.chance(Probability::ZERO)));
        let p = Probability::new(0.25).unwrap();
        let hits = (0..100_000).filter(|_| r.chance(p)).count();
        assert!((24_000..26_000).contains(&hits), "hits = {hits}");
    }

    #[test]
    fn below_is_in_range_and_uniform() {
        let mut r = Rng::new(3);
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[r.below(7) as usize] += 1;
        }
        for c in counts {
            assert!((9_300..10_700).contains(&c), "{counts:?}");
        }
        assert_eq!(r.below(1), 0);
    }
}
