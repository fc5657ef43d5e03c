//! `drop-every N [from K]`: a deterministic loss pattern. Each queue drops
//! its K-th arrival and every N-th after it (K defaults to N), so a test can
//! lose exactly the packets it means to, with no random draw. A registered
//! impairment ([`super::staged`]): this file and a line in the registry.

use std::sync::Arc;

use super::staged::{ImpairType, StageModel, StageState};
use super::Stage;
use crate::params::{get, OutOfRange, ParamError, ParamSpec, Params};
use crate::rng::Rng;
use crate::time::Nanos;

pub static TYPE: ImpairType = ImpairType {
    name: "drop-every",
    stage: Stage::Entry,
    summary: "drops each queue's `from`-th arrival and every `n`-th after it \
              (`from` defaults to `n`), with no random draw",
    positional: &[ParamSpec::count("n")],
    params: &[ParamSpec::count("from")],
    build,
};

fn build(params: &Params) -> Result<Arc<dyn StageModel>, ParamError> {
    let n = get(params, "n").unwrap_or(0);
    let from = get(params, "from").unwrap_or(n);
    let max = u64::from(u32::MAX);
    if !(1..=max).contains(&n) {
        return Err(OutOfRange::new("n", n, 1, max)
            .owner("drop-every")
            .inclusive()
            .into());
    }
    if !(1..=max).contains(&from) {
        return Err(OutOfRange::new("from", from, 1, max)
            .owner("drop-every")
            .inclusive()
            .into());
    }
    Ok(Arc::new(DropEvery { n, from }))
}

/// Every `n`-th arrival from the `from`-th (counted from 1).
#[derive(Debug, Clone, Copy)]
struct DropEvery {
    n: u64,
    from: u64,
}

impl StageModel for DropEvery {
    fn new_state(&self) -> Box<dyn StageState> {
        Box::new(Counter {
            rule: *self,
            seen: 0,
        })
    }
}

/// Arrivals counted so far on one queue.
#[derive(Debug)]
struct Counter {
    rule: DropEvery,
    seen: u64,
}

impl StageState for Counter {
    fn lost(&mut self, _now: Nanos, _len: u32, _rng: &mut Rng) -> bool {
        self.seen += 1;
        self.seen >= self.rule.from && (self.seen - self.rule.from).is_multiple_of(self.rule.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dropped(params: &[(&str, u64)], arrivals: u64) -> Vec<u64> {
        let p: Vec<_> = params.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        let mut s = build(&p).unwrap().new_state();
        let mut rng = Rng::new(1);
        (1..=arrivals)
            .filter(|_| s.lost(0, 100, &mut rng))
            .collect()
    }

    #[test]
    fn drops_the_kth_and_every_nth_after() {
        assert_eq!(dropped(&[("n", 3)], 10), [3, 6, 9]);
        assert_eq!(dropped(&[("n", 4), ("from", 2)], 11), [2, 6, 10]);
        assert_eq!(dropped(&[("n", 1)], 3), [1, 2, 3]);
    }

    #[test]
    fn refuses_zero() {
        let e = build(&[("n".into(), 0)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "drop-every n 0 is out of range 1..=4294967295"
        );
        let e = build(&[("n".into(), 2), ("from".into(), 0)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "drop-every from 0 is out of range 1..=4294967295"
        );
    }
}
