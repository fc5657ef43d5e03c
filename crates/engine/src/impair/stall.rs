//! `stall D every P [from T]`: the delay line stops for D once every P, as a
//! radio link stops during a handover or a scan. A packet leaving the link
//! while the line is stopped waits until it moves again, behind those ahead
//! of it; the first stall begins at T (default P) on the engine's clock. A
//! registered impairment ([`super::staged`]): this file and a line in the
//! registry.

use std::sync::Arc;

use super::staged::{ImpairType, StageModel, StageState};
use super::Stage;
use crate::params::{get, time_in, ParamError, ParamSpec, Params};
use crate::rng::Rng;
use crate::time::{Nanos, NS_PER_SEC, NS_PER_US};
use crate::units::fmt_time;

pub static TYPE: ImpairType = ImpairType {
    name: "stall",
    stage: Stage::DelayLine,
    summary: "stops the delay line for `length` once every `every`, the first time at \
              `from` (default `every`), as a handover or a scan stops a radio link",
    positional: &[ParamSpec::time("length")],
    params: &[ParamSpec::time("every"), ParamSpec::time("from")],
    build,
};

/// The longest `every` or `from`: a day.
const MAX: Nanos = 86_400 * NS_PER_SEC;

fn build(params: &Params) -> Result<Arc<dyn StageModel>, ParamError> {
    let Some(every) = get(params, "every") else {
        return Err(
            "stall needs its period: `stall D every P`, such as `stall 200ms every 5s`".into(),
        );
    };
    let every = time_in("stall", "every", every, (2 * NS_PER_US, MAX))?;
    let length = time_in(
        "stall",
        "length",
        get(params, "length").unwrap_or(0),
        (NS_PER_US, MAX),
    )?;
    let from = time_in(
        "stall",
        "from",
        get(params, "from").unwrap_or(every),
        (0, MAX),
    )?;
    if length >= every {
        return Err(format!(
            "stall {} must be shorter than its period {}",
            fmt_time(length),
            fmt_time(every)
        )
        .into());
    }
    Ok(Arc::new(Stall {
        length,
        every,
        from,
    }))
}

/// Stopped over `[from + k·every, from + k·every + length)` for every k ≥ 0.
#[derive(Debug, Clone, Copy)]
struct Stall {
    length: Nanos,
    every: Nanos,
    from: Nanos,
}

impl StageModel for Stall {
    fn new_state(&self) -> Box<dyn StageState> {
        Box::new(*self)
    }
}

impl StageState for Stall {
    fn extra_delay(&mut self, exit: Nanos, _len: u32, _rng: &mut Rng) -> Nanos {
        let Some(since) = exit.checked_sub(self.from) else {
            return 0;
        };
        let phase = since % self.every;
        self.length.saturating_sub(phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;

    fn stall(params: &[(&str, u64)]) -> Result<Box<dyn StageState>, ParamError> {
        let p: Vec<_> = params.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        Ok(build(&p)?.new_state())
    }

    #[test]
    fn a_packet_in_a_stall_waits_for_its_end() {
        let ms = NS_PER_MS;
        let mut s = stall(&[("length", 200 * ms), ("every", 1000 * ms)]).unwrap();
        let mut rng = Rng::new(1);
        let mut wait = |t: Nanos| s.extra_delay(t * ms, 1500, &mut rng) / ms;
        // The first stall is at 1 s (from = every), then every second.
        assert_eq!(
            [wait(0), wait(999), wait(1000), wait(1150), wait(1200)],
            [0, 0, 200, 50, 0]
        );
        assert_eq!([wait(5000), wait(5199), wait(5500)], [200, 1, 0]);
    }

    #[test]
    fn from_moves_the_first_stall() {
        let ms = NS_PER_MS;
        let mut s = stall(&[("length", 10 * ms), ("every", 100 * ms), ("from", 0)]).unwrap();
        let mut rng = Rng::new(1);
        assert_eq!(s.extra_delay(0, 1, &mut rng), 10 * ms);
        assert_eq!(s.extra_delay(105 * ms, 1, &mut rng), 5 * ms);
    }

    #[test]
    fn refuses_what_would_never_move() {
        let e = stall(&[("length", 5 * NS_PER_SEC)]).unwrap_err();
        assert!(e.to_string().contains("stall 200ms every 5s"), "{e}");
        let e = stall(&[("length", 2 * NS_PER_SEC), ("every", NS_PER_SEC)]).unwrap_err();
        assert_eq!(e.to_string(), "stall 2s must be shorter than its period 1s");
        let e = stall(&[("length", 0), ("every", NS_PER_SEC)]).unwrap_err();
        assert_eq!(e.to_string(), "stall length 0 is out of range 1us..86400s");
    }
}
