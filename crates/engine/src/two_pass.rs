//! FreeBSD's bridge runs a frame through the rules twice: `in` on the port
//! it came by, then `out` on the port it leaves by, as soon as the `in` pass
//! (and any pipe it sent the frame to) lets it go. [`settle`] and
//! [`released`] are that driver, the one copy the live data plane, its
//! workers and `sim` share; what a pass is and what leaving means are the
//! caller's, through [`Passes`].

use crate::{Direction, DropReason, IfaceId, Nanos, PacketInfo, Target, Verdict};

/// A packet that may still owe the rules its `out` pass.
pub trait OutPass {
    /// The port of the `out` pass still to run, taken: `None` once it has
    /// run, or for a packet that is not bridged.
    fn take_out_pass(&mut self) -> Option<IfaceId>;
}

/// What let a packet go: a rule, or a pipe or queue (whose AQM may have
/// marked it ECN CE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LetGo {
    pub rule: Option<u16>,
    pub target: Option<Target>,
    pub ce: bool,
}

impl LetGo {
    /// A verdict straight from a pass through the rules.
    fn by<P>(verdict: &Verdict<P>) -> LetGo {
        let rule = match verdict {
            Verdict::Pass { rule, .. } => Some(*rule),
            _ => None,
        };
        LetGo {
            rule,
            ..LetGo::default()
        }
    }
}

/// The caller's side of the two passes: running one, and the fates.
pub trait Passes<P> {
    type Error;

    /// One pass through the rules (the engine's `input`, or a hand-off to
    /// the worker that runs it: `None`, the packet is no longer here).
    fn pass(
        &mut self,
        now: Nanos,
        info: PacketInfo,
        payload: P,
    ) -> Result<Option<Verdict<P>>, Self::Error>;

    /// Every verdict, before it is acted on (an event tap).
    #[inline]
    fn seen(
        &mut self,
        _now: Nanos,
        _info: &PacketInfo,
        _verdict: &Verdict<P>,
        _by: LetGo,
    ) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A frame that passed `in` goes to its `out` pass on `xmit`.
    fn forward(
        &mut self,
        now: Nanos,
        info: &PacketInfo,
        payload: &P,
        xmit: IfaceId,
        by: LetGo,
    ) -> Result<(), Self::Error>;

    /// The packet leaves.
    fn leave(
        &mut self,
        now: Nanos,
        info: PacketInfo,
        payload: P,
        by: LetGo,
    ) -> Result<(), Self::Error>;

    /// The packet is dropped (`rule` and `target` from the verdict).
    fn drop(
        &mut self,
        now: Nanos,
        info: PacketInfo,
        payload: P,
        reason: DropReason,
        by: LetGo,
    ) -> Result<(), Self::Error>;
}

/// Where a packet ended up after [`settle`] or [`released`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Given to [`Passes::leave`].
    Left,
    /// Given to [`Passes::drop`].
    Dropped,
    /// Held by a pipe; it comes back from the engine's `poll`.
    Held,
    /// [`Passes::pass`] handed it elsewhere.
    Away,
}

/// Acts on the verdict of a pass through the rules at `now`: a bridged
/// frame that passed `in` runs its `out` pass at once.
#[inline]
pub fn settle<P: OutPass, S: Passes<P>>(
    s: &mut S,
    now: Nanos,
    info: PacketInfo,
    verdict: Verdict<P>,
) -> Result<Settled, S::Error> {
    let by = LetGo::by(&verdict);
    drive(s, now, info, verdict, by)
}

/// A packet a pipe let go at `now` (`by`: the rule that sent it there, the
/// pipe, its mark): it leaves, or a bridged frame runs its `out` pass.
#[inline]
pub fn released<P: OutPass, S: Passes<P>>(
    s: &mut S,
    now: Nanos,
    info: PacketInfo,
    payload: P,
    by: LetGo,
) -> Result<Settled, S::Error> {
    let pass = Verdict::Pass {
        payload,
        rule: by.rule.unwrap_or(0),
    };
    drive(s, now, info, pass, by)
}

#[inline]
fn drive<P: OutPass, S: Passes<P>>(
    s: &mut S,
    now: Nanos,
    mut info: PacketInfo,
    mut verdict: Verdict<P>,
    mut by: LetGo,
) -> Result<Settled, S::Error> {
    loop {
        s.seen(now, &info, &verdict, by)?;
        match verdict {
            Verdict::Queued { .. } => return Ok(Settled::Held),
            Verdict::Drop {
                payload,
                reason,
                rule,
                target,
            } => {
                let by = LetGo {
                    rule,
                    target,
                    ce: false,
                };
                s.drop(now, info, payload, reason, by)?;
                return Ok(Settled::Dropped);
            }
            Verdict::Pass { mut payload, .. } => {
                let Some(xmit) = payload.take_out_pass() else {
                    s.leave(now, info, payload, by)?;
                    return Ok(Settled::Left);
                };
                s.forward(now, &info, &payload, xmit, by)?;
                info = PacketInfo {
                    dir: Direction::Out,
                    xmit_if: Some(xmit),
                    ..info
                };
                let Some(v) = s.pass(now, info, payload)? else {
                    return Ok(Settled::Away);
                };
                by = LetGo::by(&v);
                verdict = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FlowKey;
    use std::convert::Infallible;

    /// A frame: its number and the `out` pass it still owes.
    struct Frame(u32, Option<IfaceId>);

    impl OutPass for Frame {
        fn take_out_pass(&mut self) -> Option<IfaceId> {
            self.1.take()
        }
    }

    /// Rules written as a closure over (direction, frame), and a log of
    /// what the driver did.
    struct Log<F> {
        rules: F,
        log: Vec<String>,
    }

    impl<F: FnMut(&PacketInfo, u32) -> Option<Verdict<Frame>>> Passes<Frame> for Log<F> {
        type Error = Infallible;
        fn pass(
            &mut self,
            _: Nanos,
            info: PacketInfo,
            f: Frame,
        ) -> Result<Option<Verdict<Frame>>, Infallible> {
            self.log.push(format!("pass {:?} {}", info.dir, f.0));
            let n = f.0;
            Ok((self.rules)(&info, n).map(|v| match v {
                Verdict::Pass { rule, .. } => Verdict::Pass { payload: f, rule },
                Verdict::Drop {
                    reason,
                    rule,
                    target,
                    ..
                } => Verdict::Drop {
                    payload: f,
                    reason,
                    rule,
                    target,
                },
                q => q,
            }))
        }
        fn seen(
            &mut self,
            _: Nanos,
            _: &PacketInfo,
            v: &Verdict<Frame>,
            by: LetGo,
        ) -> Result<(), Infallible> {
            let what = match v {
                Verdict::Pass { rule, .. } => format!("pass by {rule}"),
                Verdict::Drop { reason, .. } => format!("drop {}", reason.as_str()),
                Verdict::Queued { .. } => "queued".into(),
            };
            self.log.push(format!("seen {what} ce={}", by.ce));
            Ok(())
        }
        fn forward(
            &mut self,
            _: Nanos,
            _: &PacketInfo,
            f: &Frame,
            xmit: IfaceId,
            by: LetGo,
        ) -> Result<(), Infallible> {
            self.log
                .push(format!("forward {} to {} after {:?}", f.0, xmit.0, by.rule));
            Ok(())
        }
        fn leave(
            &mut self,
            _: Nanos,
            info: PacketInfo,
            f: Frame,
            by: LetGo,
        ) -> Result<(), Infallible> {
            self.log.push(format!(
                "leave {} on {:?} by {:?}",
                f.0,
                info.xmit_if.map(|i| i.0),
                by.rule
            ));
            Ok(())
        }
        fn drop(
            &mut self,
            _: Nanos,
            _: PacketInfo,
            f: Frame,
            reason: DropReason,
            by: LetGo,
        ) -> Result<(), Infallible> {
            self.log
                .push(format!("drop {} {} by {:?}", f.0, reason.as_str(), by.rule));
            Ok(())
        }
    }

    fn info() -> PacketInfo {
        PacketInfo {
            len: 100,
            key: FlowKey::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), 17, 1, 2),
            dir: Direction::In,
            recv_if: Some(IfaceId(0)),
            xmit_if: None,
        }
    }

    fn pass(rule: u16) -> Option<Verdict<Frame>> {
        Some(Verdict::Pass {
            payload: Frame(u32::MAX, None),
            rule,
        })
    }

    #[test]
    fn a_bridged_frame_runs_its_out_pass_on_the_port_it_leaves_by() {
        let mut s = Log {
            rules: |i: &PacketInfo, _| {
                assert_eq!(i.dir, Direction::Out);
                assert_eq!(i.xmit_if, Some(IfaceId(1)));
                pass(200)
            },
            log: vec![],
        };
        let v = Verdict::Pass {
            payload: Frame(7, Some(IfaceId(1))),
            rule: 100,
        };
        let r = settle(&mut s, 0, info(), v);
        assert_eq!(r, Ok(Settled::Left));
        assert_eq!(
            s.log,
            [
                "seen pass by 100 ce=false",
                "forward 7 to 1 after Some(100)",
                "pass Out 7",
                "seen pass by 200 ce=false",
                "leave 7 on Some(1) by Some(200)",
            ]
        );
    }

    #[test]
    fn the_out_pass_may_drop_what_in_passed() {
        let mut s = Log {
            rules: |_: &PacketInfo, _| {
                Some(Verdict::Drop {
                    payload: Frame(u32::MAX, None),
                    reason: DropReason::RuleDeny,
                    rule: Some(300),
                    target: None,
                })
            },
            log: vec![],
        };
        let by = LetGo {
            rule: Some(100),
            target: None,
            ce: true,
        };
        let r = released(&mut s, 5, info(), Frame(9, Some(IfaceId(2))), by);
        assert_eq!(r, Ok(Settled::Dropped));
        assert_eq!(
            s.log,
            [
                "seen pass by 100 ce=true",
                "forward 9 to 2 after Some(100)",
                "pass Out 9",
                "seen drop rule-deny ce=false",
                "drop 9 rule-deny by Some(300)",
            ]
        );
    }

    #[test]
    fn a_frame_with_no_out_pass_leaves_and_a_handed_one_is_away() {
        let mut s = Log {
            rules: |_: &PacketInfo, _| None,
            log: vec![],
        };
        let left = released(&mut s, 0, info(), Frame(1, None), LetGo::default());
        assert_eq!(left, Ok(Settled::Left));
        let away = released(
            &mut s,
            0,
            info(),
            Frame(2, Some(IfaceId(1))),
            LetGo::default(),
        );
        assert_eq!(away, Ok(Settled::Away));
        let held = settle(
            &mut s,
            0,
            info(),
            Verdict::Queued {
                rule: 5,
                target: Target::Pipe(1),
            },
        );
        assert_eq!(held, Ok(Settled::Held));
        assert_eq!(s.log.iter().filter(|l| l.starts_with("leave")).count(), 1);
        assert!(s.log.contains(&"pass Out 2".to_string()), "{:?}", s.log);
    }
}
