//! netem's options (tc-netem(8)), read as iproute2 reads them and printed
//! back as `tc qdisc show` prints them, and their dummynet pipe options.

use super::units::{self, fmt_rate, fmt_time_ns, fmt_time_us, Percent};
use super::{matches, Args, TcError};

/// A probability with netem's correlation (0 when none was given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Chance {
    pub p: Percent,
    pub corr: Percent,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loss {
    /// `loss [random] P [C]`.
    Random(Chance),
    /// `loss state P13 [P31 [P32 [P23 [P14]]]]`: the 4-state Markov model.
    State {
        p13: Percent,
        p31: Percent,
        p32: Percent,
        p23: Percent,
        p14: Percent,
    },
    /// `loss gemodel P [R [1-H [1-K]]]`: Gilbert-Elliott.
    GeModel {
        p: Percent,
        r: Percent,
        one_minus_h: Percent,
        one_minus_k: Percent,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rate {
    pub bps: u64,
    pub packet_overhead: i32,
    pub cell_size: u32,
    pub cell_overhead: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotTimes {
    /// `slot MIN [MAX]`: nanoseconds.
    Uniform { min_ns: u64, max_ns: u64 },
    /// `slot distribution D DELAY JITTER`.
    Distribution {
        name: String,
        delay_ns: u64,
        jitter_ns: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub times: SlotTimes,
    pub packets: Option<u32>,
    pub bytes: Option<u64>,
}

/// A netem qdisc's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netem {
    /// Packets the qdisc holds, delayed ones included (default 1000).
    pub limit: u64,
    /// `delay T [J [C]]`, in microseconds.
    pub delay_us: u64,
    pub jitter_us: u64,
    pub delay_corr: Percent,
    /// `distribution NAME`: a table looked up by name, as tc does.
    pub distribution: Option<String>,
    pub loss: Option<Loss>,
    pub ecn: bool,
    pub duplicate: Option<Chance>,
    pub corrupt: Option<Chance>,
    pub reorder: Option<Chance>,
    pub gap: u32,
    pub rate: Option<Rate>,
    pub slot: Option<Slot>,
    pub seed: Option<u64>,
}

impl Default for Netem {
    fn default() -> Netem {
        Netem {
            limit: 1000,
            delay_us: 0,
            jitter_us: 0,
            delay_corr: Percent(0),
            distribution: None,
            loss: None,
            ecn: false,
            duplicate: None,
            corrupt: None,
            reorder: None,
            gap: 0,
            rate: None,
            slot: None,
            seed: None,
        }
    }
}

fn illegal(what: &str) -> TcError {
    TcError::syntax(format!("Illegal \"{what}\""))
}

/// The next word as a percentage, or tc's "Illegal" error naming `what`.
fn percent(a: &mut Args, what: &str) -> Result<Percent, TcError> {
    let w = a.next_or(what)?;
    Percent::parse(w).ok_or_else(|| {
        illegal(what).hint(format!(
            "`{w}` is not a percentage: write `25%` or `25` (tc reads a bare number as percent)"
        ))
    })
}

/// An optional correlation: taken only if the next word starts with a digit.
fn maybe_percent(a: &mut Args, what: &str) -> Result<Option<Percent>, TcError> {
    if a.next_is_number() {
        percent(a, what).map(Some)
    } else {
        Ok(None)
    }
}

/// A loss model's optional parameters, in order, each replacing its
/// default while the next word is a number (tc stops at the first that is not).
fn trailing_percents(a: &mut Args, values: &mut [Percent], names: &[&str]) -> Result<(), TcError> {
    for (value, what) in values.iter_mut().zip(names) {
        match maybe_percent(a, what)? {
            Some(p) => *value = p,
            None => break,
        }
    }
    Ok(())
}

fn delay_time(a: &mut Args, what: &str) -> Result<u64, TcError> {
    let w = a.next_or(what)?;
    let us = units::time_us(w).ok_or_else(|| {
        illegal(what).hint(format!(
            "`{w}` is not a time: a number with s, ms or us (a bare number is microseconds)"
        ))
    })?;
    if us > units::MAX_TICK_US {
        return Err(
            TcError::syntax(format!("Illegal {us} time (too large)")).hint(format!(
                "netem holds delays up to {}s",
                units::fmt_g(units::MAX_TICK_US as f64 / 1e6, 6)
            )),
        );
    }
    Ok(us)
}

fn slot_time(a: &mut Args, what: &str) -> Result<u64, TcError> {
    let w = a.next_or(what)?;
    units::time_ns(w).ok_or_else(|| {
        illegal(what).hint(format!(
            "`{w}` is not a time: a number with s, ms, us or ns (a bare number is nanoseconds)"
        ))
    })
}

fn int<T: std::str::FromStr>(a: &mut Args, what: &str) -> Result<T, TcError> {
    let w = a.next_or(what)?;
    parse_c_int(w).ok_or_else(|| illegal(what))
}

/// `strtol(s, &end, 0)`-style integers as iproute2's get_u32/get_s32 read
/// them: decimal, `0x` hex or leading-zero octal, the whole word.
fn parse_c_int<T: std::str::FromStr>(w: &str) -> Option<T> {
    let (neg, digits) = match w.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, w),
    };
    let value: i128 = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        i128::from_str_radix(h, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        i128::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits.parse::<i128>().ok()?
    };
    let value = if neg { -value } else { value };
    value.to_string().parse().ok()
}

impl Netem {
    /// netem's OPTIONS, after the word `netem`.
    pub(super) fn parse(a: &mut Args) -> Result<Netem, TcError> {
        let mut n = Netem::default();
        let mut reorder: Option<Chance> = None;
        while let Some(w) = a.next() {
            if matches(w, "limit") {
                let v = a.next_or("limit")?;
                n.limit = units::size_bytes(v).ok_or_else(|| illegal("limit"))?;
            } else if matches(w, "latency") || matches(w, "delay") {
                n.delay_us = delay_time(a, "latency")?;
                if a.next_is_number() {
                    n.jitter_us = delay_time(a, "latency")?;
                    if let Some(c) = maybe_percent(a, "latency")? {
                        n.delay_corr = c;
                    }
                }
            } else if matches(w, "loss") || matches(w, "drop") {
                if n.loss.is_some() {
                    return Err(illegal("duplicate loss argument"));
                }
                n.loss = Some(Self::loss(a)?);
            } else if matches(w, "seed") {
                let v = a.next_or("seed")?;
                n.seed = Some(v.parse::<u64>().map_err(|_| illegal("seed"))?);
            } else if matches(w, "ecn") {
                n.ecn = true;
            } else if matches(w, "reorder") {
                let p = percent(a, "reorder")?;
                let corr = maybe_percent(a, "reorder")?.unwrap_or_default();
                reorder = Some(Chance { p, corr });
            } else if matches(w, "corrupt") {
                let p = percent(a, "corrupt")?;
                let corr = maybe_percent(a, "corrupt")?.unwrap_or_default();
                n.corrupt = Some(Chance { p, corr });
            } else if matches(w, "gap") {
                n.gap = int(a, "gap")?;
            } else if matches(w, "duplicate") {
                let p = percent(a, "duplicate")?;
                let corr = maybe_percent(a, "duplicate")?.unwrap_or_default();
                n.duplicate = Some(Chance { p, corr });
            } else if matches(w, "distribution") {
                n.distribution = Some(a.next_or("distribution")?.to_string());
            } else if matches(w, "rate") {
                n.rate = Some(Self::rate(a)?);
            } else if matches(w, "slot") {
                n.slot = Some(Self::slot(a)?);
            } else {
                let mut e = TcError::syntax(format!("What is \"{w}\"?"));
                if let Some(s) = super::suggest(w, NETEM_WORDS) {
                    e = e.hint(format!("did you mean `{s}`?"));
                }
                return Err(e.hint(USAGE.to_string()));
            }
        }
        // The checks tc makes once every option is read.
        match reorder {
            Some(r) if r.p.0 > 0 => {
                if n.delay_us == 0 {
                    return Err(TcError::syntax(
                        "reordering not possible without specifying some delay",
                    ));
                }
                if n.gap == 0 {
                    n.gap = 1;
                }
                n.reorder = Some(r);
            }
            _ if n.gap > 0 => {
                return Err(TcError::syntax("gap specified without reorder probability"))
            }
            _ => n.reorder = reorder,
        }
        let has_loss = match &n.loss {
            Some(Loss::Random(c)) => c.p.0 > 0,
            Some(_) => true,
            None => false,
        };
        if n.ecn && !has_loss {
            return Err(TcError::syntax("ecn requested without loss model"));
        }
        if n.distribution.is_some() && (n.delay_us == 0 || n.jitter_us == 0) {
            return Err(TcError::syntax(
                "distribution specified but no latency and jitter values",
            ));
        }
        Ok(n)
    }

    fn loss(a: &mut Args) -> Result<Loss, TcError> {
        let first = a.peek().ok_or_else(|| illegal("loss percent"))?;
        // The old form: `loss P` without `random`.
        if first.starts_with(|c: char| c.is_ascii_digit()) || first == "random" {
            if first == "random" {
                a.next();
            }
            let p = percent(a, "loss percent")?;
            let corr = maybe_percent(a, "loss correlation")?.unwrap_or_default();
            return Ok(Loss::Random(Chance { p, corr }));
        }
        a.next();
        match first {
            "state" => {
                let p13 = percent(a, "loss p13")?;
                let mut s = [p13, p13.complement(), Percent(0), Percent::ALL, Percent(0)];
                trailing_percents(a, &mut s[1..], &["loss p31", "loss p32", "loss p23", "loss p14"])?;
                Ok(Loss::State {
                    p13: s[0],
                    p31: s[1],
                    p32: s[2],
                    p23: s[3],
                    p14: s[4],
                })
            }
            "gemodel" => {
                let p = percent(a, "loss gemodel p")?;
                let mut g = [p, p.complement(), Percent::ALL, Percent(0)];
                trailing_percents(a, &mut g[1..], &["loss gemodel r", "loss gemodel h", "loss gemodel k"])?;
                Ok(Loss::GeModel {
                    p: g[0],
                    r: g[1],
                    one_minus_h: g[2],
                    one_minus_k: g[3],
                })
            }
            other => Err(TcError::syntax(format!("Unknown loss parameter: {other}"))
                .hint("loss [random] P [C] | loss state P13 [P31 [P32 [P23 [P14]]]] | loss gemodel P [R [1-H [1-K]]]".to_string())),
        }
    }

    fn rate(a: &mut Args) -> Result<Rate, TcError> {
        let w = a.next_or("rate")?;
        if w.contains('%') {
            return Err(TcError::not_emulated(
                "a netem rate as a percentage of the interface's speed",
            ));
        }
        let bps = units::rate_bps(w).ok_or_else(|| {
            illegal("rate").hint(format!(
                "`{w}` is not a rate: e.g. 10mbit (megabits/s), 1mbps (megabytes/s), or a bare number of bit/s"
            ))
        })?;
        let mut r = Rate {
            bps,
            packet_overhead: 0,
            cell_size: 0,
            cell_overhead: 0,
        };
        if a.next_is_signed_number() {
            r.packet_overhead = int(a, "rate")?;
        }
        if a.next_is_number() {
            r.cell_size = int(a, "rate")?;
        }
        if a.next_is_signed_number() {
            r.cell_overhead = int(a, "rate")?;
        }
        Ok(r)
    }

    fn slot(a: &mut Args) -> Result<Slot, TcError> {
        let times = if a.next_is_number() {
            let min_ns = slot_time(a, "slot min_delay")?;
            let max_ns = if a.next_is_number() {
                let max = slot_time(a, "slot max_delay")?;
                if max < min_ns {
                    return Err(illegal("slot max_delay").hint("MAX must not be below MIN"));
                }
                max
            } else {
                min_ns
            };
            SlotTimes::Uniform { min_ns, max_ns }
        } else {
            let w = a.next_or("slot")?;
            if w != "distribution" {
                return Err(TcError::syntax(format!("Unknown slot parameter: {w}")));
            }
            let name = a.next_or("slot distribution")?.to_string();
            let delay_ns = slot_time(a, "slot delay")?;
            let jitter_ns = slot_time(a, "slot jitter")?;
            if jitter_ns == 0 {
                return Err(TcError::syntax("Non-positive jitter"));
            }
            SlotTimes::Distribution {
                name,
                delay_ns,
                jitter_ns,
            }
        };
        let mut s = Slot {
            times,
            packets: None,
            bytes: None,
        };
        if a.peek().is_some_and(|w| matches(w, "packets")) {
            a.next();
            s.packets = Some(int(a, "slot packets")?);
        }
        if a.peek().is_some_and(|w| matches(w, "bytes")) {
            a.next();
            let v = a.next_or("slot bytes")?;
            s.bytes = Some(units::size_bytes(v).ok_or_else(|| illegal("slot bytes"))?);
        }
        Ok(s)
    }

    /// The dummynet pipe options that do what this netem does (see
    /// [`super::Qdisc::pipe_options`]).
    pub fn pipe_options(&self) -> Result<Vec<String>, TcError> {
        fn pct(p: Percent) -> String {
            p.to_string()
        }
        let mut w: Vec<String> = Vec::new();
        let mut push = |words: &[String]| w.extend_from_slice(words);
        push(&["queue".into(), self.limit.to_string()]);
        if self.delay_us > 0 {
            push(&["delay".into(), format!("{}us", self.delay_us)]);
        }
        if self.jitter_us > 0 {
            push(&["jitter".into(), format!("{}us", self.jitter_us)]);
            if self.delay_corr.0 > 0 {
                push(&["correlation".into(), pct(self.delay_corr)]);
            }
            if let Some(d) = self.distribution.as_deref().filter(|d| *d != "uniform") {
                push(&["distribution".into(), d.to_string()]);
            }
            // netem's delay queue is sorted by departure time, so jitter
            // reorders; with a rate, departures follow the link and do not.
            if self.rate.is_none() {
                push(&["unordered".into()]);
            }
        }
        match &self.loss {
            Some(Loss::Random(c)) if c.p.0 > 0 => {
                push(&["loss".into(), pct(c.p)]);
                if c.corr.0 > 0 {
                    push(&["correlation".into(), pct(c.corr)]);
                }
            }
            Some(Loss::State {
                p13,
                p31,
                p32,
                p23,
                p14,
            }) => push(&[
                "loss".into(),
                "state".into(),
                pct(*p13),
                pct(*p31),
                pct(*p32),
                pct(*p23),
                pct(*p14),
            ]),
            Some(Loss::GeModel {
                p,
                r,
                one_minus_h,
                one_minus_k,
            }) => push(&[
                "loss".into(),
                "gemodel".into(),
                pct(*p),
                pct(*r),
                pct(*one_minus_h),
                pct(*one_minus_k),
            ]),
            _ => {}
        }
        if self.ecn {
            return Err(TcError::not_emulated(
                "netem's `ecn` (a loss that marks instead of dropping): dummynet marks through its AQMs",
            ));
        }
        for (word, chance) in [("duplicate", &self.duplicate), ("corrupt", &self.corrupt)] {
            if let Some(c) = chance.as_ref().filter(|c| c.p.0 > 0) {
                push(&[word.into(), pct(c.p)]);
                if c.corr.0 > 0 {
                    push(&["correlation".into(), pct(c.corr)]);
                }
            }
        }
        if let Some(c) = self.reorder.as_ref().filter(|c| c.p.0 > 0) {
            push(&["reorder".into(), pct(c.p)]);
            if c.corr.0 > 0 {
                push(&["correlation".into(), pct(c.corr)]);
            }
            push(&["gap".into(), self.gap.to_string()]);
        }
        if let Some(r) = self.rate.as_ref().filter(|r| r.bps > 0) {
            push(&["bw".into(), format!("{}bit/s", r.bps)]);
            if r.packet_overhead < 0 || r.cell_overhead < 0 {
                return Err(TcError::not_emulated(
                    "a negative netem packet or cell overhead",
                ));
            }
            if r.packet_overhead > 0 || r.cell_size > 0 {
                push(&["overhead".into(), r.packet_overhead.to_string()]);
            }
            if r.cell_size > 0 {
                push(&["cellsize".into(), r.cell_size.to_string()]);
                if r.cell_overhead > 0 {
                    push(&["celloverhead".into(), r.cell_overhead.to_string()]);
                }
            }
        }
        // netem's own generator: the pipe's streams named from it, so
        // interfaces with the same netem and seed draw alike.
        if let Some(seed) = self.seed {
            push(&["seed".into(), seed.to_string()]);
        }
        if let Some(slot) = &self.slot {
            let SlotTimes::Uniform { min_ns, max_ns } = slot.times else {
                return Err(TcError::not_emulated(
                    "`slot distribution`: dummynet's slots are spaced uniformly (`slot MIN MAX`)",
                ));
            };
            push(&["slot".into(), format!("{min_ns}ns"), format!("{max_ns}ns")]);
            if let Some(p) = slot.packets.filter(|&p| p > 0) {
                push(&["packets".into(), p.to_string()]);
            }
            if let Some(b) = slot.bytes.filter(|&b| b > 0) {
                push(&["bytes".into(), b.to_string()]);
            }
        }
        Ok(w)
    }

    /// The options as `tc qdisc show` prints them after the handle and parent.
    pub fn show(&self, iec: bool) -> String {
        let mut s = format!("limit {}", self.limit);
        if self.delay_us > 0 {
            s += &format!(" delay {}", fmt_time_us(self.delay_us));
            if self.jitter_us > 0 {
                s += &format!("  {}", fmt_time_us(self.jitter_us));
                if self.delay_corr.0 > 0 {
                    s += &format!(" {}", self.delay_corr);
                }
            }
        }
        let chance = |s: &mut String, word: &str, c: &Chance| {
            *s += &format!(" {word} {}", c.p);
            if c.corr.0 > 0 {
                *s += &format!(" {}", c.corr);
            }
        };
        match &self.loss {
            Some(Loss::Random(c)) if c.p.0 > 0 => chance(&mut s, "loss", c),
            Some(Loss::State {
                p13,
                p31,
                p32,
                p23,
                p14,
            }) => s += &format!(" loss state p13 {p13} p31 {p31} p32 {p32} p23 {p23} p14 {p14}"),
            Some(Loss::GeModel {
                p,
                r,
                one_minus_h,
                one_minus_k,
            }) => s += &format!(" loss gemodel p {p} r {r} 1-h {one_minus_h} 1-k {one_minus_k}"),
            _ => {}
        }
        if let Some(c) = self.duplicate.as_ref().filter(|c| c.p.0 > 0) {
            chance(&mut s, "duplicate", c);
        }
        if let Some(c) = self.reorder.as_ref().filter(|c| c.p.0 > 0) {
            chance(&mut s, "reorder", c);
        }
        if let Some(c) = self.corrupt.as_ref().filter(|c| c.p.0 > 0) {
            chance(&mut s, "corrupt", c);
        }
        if let Some(r) = self.rate.as_ref().filter(|r| r.bps > 0) {
            s += &format!(" rate {}", fmt_rate(r.bps, iec));
            if r.packet_overhead != 0 {
                s += &format!(" packetoverhead {}", r.packet_overhead);
            }
            if r.cell_size != 0 {
                s += &format!(" cellsize {}", r.cell_size);
            }
            if r.cell_overhead != 0 {
                s += &format!(" celloverhead {}", r.cell_overhead);
            }
        }
        if let Some(slot) = &self.slot {
            match &slot.times {
                SlotTimes::Uniform { min_ns, max_ns } => {
                    s += &format!(" slot {} {}", fmt_time_ns(*min_ns), fmt_time_ns(*max_ns))
                }
                SlotTimes::Distribution {
                    delay_ns,
                    jitter_ns,
                    ..
                } => {
                    s += &format!(
                        " slot distribution {} {}",
                        fmt_time_ns(*delay_ns),
                        fmt_time_ns(*jitter_ns)
                    )
                }
            }
            if let Some(p) = slot.packets.filter(|&p| p != 0) {
                s += &format!(" packets {p}");
            }
            if let Some(b) = slot.bytes.filter(|&b| b != 0) {
                s += &format!(" bytes {b}");
            }
        }
        if let Some(seed) = self.seed {
            s += &format!(" seed {seed}");
        }
        if self.ecn {
            s += " ecn ";
        }
        if self.gap > 0 {
            s += &format!(" gap {}", self.gap);
        }
        s
    }
}

/// netem's keywords, for "did you mean".
const NETEM_WORDS: &[&str] = &[
    "limit",
    "delay",
    "latency",
    "loss",
    "drop",
    "seed",
    "ecn",
    "reorder",
    "corrupt",
    "gap",
    "duplicate",
    "distribution",
    "rate",
    "slot",
];

const USAGE: &str = "Usage: ... netem [ limit PACKETS ] [ delay TIME [ JITTER [CORRELATION]]] \
[ distribution {uniform|normal|pareto|paretonormal} ] [ corrupt PERCENT [CORRELATION]] \
[ duplicate PERCENT [CORRELATION]] [ loss random PERCENT [CORRELATION]] \
[ loss state P13 [P31 [P32 [P23 P14]]] ] [ loss gemodel PERCENT [R [1-H [1-K]]] ] [ ecn ] \
[ reorder PERCENT [CORRELATION] [ gap DISTANCE ]] \
[ rate RATE [PACKETOVERHEAD] [CELLSIZE] [CELLOVERHEAD]] \
[ slot MIN_DELAY [MAX_DELAY] [packets MAX_PACKETS] [bytes MAX_BYTES]] \
[ slot distribution {uniform|normal|pareto|paretonormal|custom} DELAY JITTER [packets MAX_PACKETS] [bytes MAX_BYTES]] \
[ seed SEED ]";
