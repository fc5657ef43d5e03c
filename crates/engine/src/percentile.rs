//! Percentiles of samples: one definition for every report (release
//! lateness, the timer's wake-ups, the demo's RTTs), so that a p99 means
//! the same thing wherever it is printed.

/// The `pct`th percentile (0 to 100) of `sorted`, which must be in
/// ascending order, by nearest rank: the smallest sample with at least
/// `pct`% of the samples at or below it. `None` if there are no samples.
///
/// Nearest rank always answers with a sample that was seen (no
/// interpolation): the median of 1, 2, 3, 4 is 2, p99 of 100 samples is
/// the 99th smallest and p100 the largest.
pub fn nearest_rank<T: Copy>(sorted: &[T], pct: u32) -> Option<T> {
    let n = sorted.len();
    let rank = (n * pct.min(100) as usize).div_ceil(100).max(1);
    sorted.get(rank.min(n).checked_sub(1)?).copied()
}

#[cfg(test)]
mod tests {
    use super::nearest_rank;

    #[test]
    fn nearest_rank_picks_a_sample() {
        let hundred: Vec<u32> = (1..=100).collect();
        assert_eq!(nearest_rank(&hundred, 50), Some(50));
        assert_eq!(nearest_rank(&hundred, 99), Some(99));
        assert_eq!(nearest_rank(&hundred, 100), Some(100));
        assert_eq!(nearest_rank(&hundred, 0), Some(1));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 50), Some(2));
        assert_eq!(nearest_rank(&[5, 6, 7, 9, 50], 50), Some(7));
        assert_eq!(nearest_rank(&[7], 99), Some(7));
        assert_eq!(nearest_rank(&[1, 2], 250), Some(2), "clamped to p100");
        assert_eq!(nearest_rank::<u32>(&[], 50), None);
    }
}
