//! tbf's options (tc-tbf(8)): a token bucket of `burst` bytes filled at
//! `rate`, with `limit` bytes (or `latency` of queueing) behind it.

use super::units::{self, fmt_rate, fmt_size, fmt_time_us};
use super::{matches, Args, TcError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tbf {
    pub rate_bps: u64,
    /// The bucket, in bytes.
    pub burst: u64,
    /// Bytes that may wait for tokens (from `limit`, or from `latency`).
    pub limit: u64,
    pub peakrate_bps: Option<u64>,
    pub mtu: Option<u64>,
    pub overhead: u16,
}

fn illegal(what: &str) -> TcError {
    TcError::syntax(format!("Illegal \"{what}\""))
}

/// `BYTES[/CELL]` (the cell size is accepted and left out).
fn size_and_cell(w: &str, what: &str) -> Result<u64, TcError> {
    let size = w.split_once('/').map_or(w, |(s, _)| s);
    units::size_bytes(size).ok_or_else(|| {
        illegal(what).hint(format!(
            "`{w}` is not a size: bytes, or with a unit (k = 1024 bytes, kbit = 128 bytes)"
        ))
    })
}

impl Tbf {
    pub(super) fn parse(a: &mut Args) -> Result<Tbf, TcError> {
        let mut rate = None;
        let mut burst = None;
        let mut limit = None;
        let mut latency_us = None;
        let mut t = Tbf {
            rate_bps: 0,
            burst: 0,
            limit: 0,
            peakrate_bps: None,
            mtu: None,
            overhead: 0,
        };
        while let Some(w) = a.next() {
            if matches(w, "limit") {
                if latency_us.is_some() {
                    return Err(TcError::syntax("tbf: Double \"limit/latency\" spec"));
                }
                let v = a.next_or("limit")?;
                limit = Some(units::size_bytes(v).ok_or_else(|| illegal("limit"))?);
            } else if matches(w, "latency") {
                if limit.is_some() {
                    return Err(TcError::syntax("tbf: Double \"limit/latency\" spec"));
                }
                let v = a.next_or("latency")?;
                latency_us = Some(units::time_us(v).ok_or_else(|| illegal("latency"))?);
            } else if matches(w, "burst") || matches(w, "buffer") || matches(w, "maxburst") {
                let v = a.next_or("buffer")?;
                burst = Some(size_and_cell(v, "buffer")?);
            } else if matches(w, "mtu") || matches(w, "minburst") {
                let v = a.next_or("mtu")?;
                t.mtu = Some(size_and_cell(v, "mtu")?);
            } else if matches(w, "mpu") {
                a.next_or("mpu")?;
            } else if matches(w, "rate") {
                let v = a.next_or("rate")?;
                rate = Some(units::rate_bps(v).ok_or_else(|| illegal("rate"))?);
            } else if matches(w, "peakrate") {
                let v = a.next_or("peakrate")?;
                t.peakrate_bps = Some(units::rate_bps(v).ok_or_else(|| illegal("peakrate"))?);
            } else if matches(w, "overhead") {
                let v = a.next_or("overhead")?;
                t.overhead = v.parse().map_err(|_| illegal("overhead"))?;
            } else if matches(w, "linklayer") {
                let v = a.next_or("linklayer")?;
                if v != "ethernet" {
                    return Err(TcError::not_emulated(format!("tbf's `linklayer {v}`")));
                }
            } else {
                return Err(TcError::syntax(format!("What is \"{w}\"?")).hint(
                    "Usage: ... tbf limit BYTES burst BYTES[/BYTES] rate KBPS [ mtu BYTES[/BYTES] ] [ peakrate KBPS ] [ latency TIME ] [ overhead BYTES ] [ linklayer TYPE ]",
                ));
            }
        }
        t.rate_bps = rate
            .filter(|&r| r > 0)
            .ok_or_else(|| TcError::syntax("tbf: the \"rate\" parameter is mandatory."))?;
        t.burst = burst
            .filter(|&b| b > 0)
            .ok_or_else(|| TcError::syntax("tbf: the \"burst\" parameter is mandatory."))?;
        if t.peakrate_bps.is_some() && t.mtu.is_none() {
            return Err(TcError::syntax(
                "tbf: when \"peakrate\" is specified, \"mtu\" must also be specified.",
            ));
        }
        t.limit = match (limit, latency_us) {
            (Some(l), _) => l,
            (None, Some(us)) => {
                // tc turns a latency into the bytes the rate sends in it,
                // plus the bucket (the smaller of that and the peak rate's
                // bytes plus `mtu`).
                let bytes =
                    |bps: u64, plus: u64| (bps as f64 / 8.0 * us as f64 / 1e6) as u64 + plus;
                let at_rate = bytes(t.rate_bps, t.burst);
                match (t.peakrate_bps, t.mtu) {
                    (Some(p), Some(mtu)) => at_rate.min(bytes(p, mtu)),
                    _ => at_rate,
                }
            }
            (None, None) => {
                return Err(
                    TcError::syntax("tbf: the \"limit\" parameter is mandatory.")
                        .hint("give `limit BYTES` or `latency TIME`"),
                )
            }
        };
        Ok(t)
    }

    /// The longest a byte waits for tokens, as tc prints it (`lat`): the
    /// larger of the rate's and the peak rate's; negative when `limit` is
    /// smaller than the bucket.
    pub(super) fn latency_us(&self) -> f64 {
        let wait =
            |bps: u64, bucket: u64| (self.limit as f64 - bucket as f64) / (bps as f64 / 8.0) * 1e6;
        let at_rate = wait(self.rate_bps, self.burst);
        match (self.peakrate_bps, self.mtu) {
            (Some(p), Some(mtu)) => at_rate.max(wait(p, mtu)),
            _ => at_rate,
        }
    }

    pub fn show(&self, iec: bool) -> String {
        let mut s = format!(
            "rate {} burst {}",
            fmt_rate(self.rate_bps, iec),
            fmt_size(self.burst)
        );
        if let Some(p) = self.peakrate_bps {
            s += &format!(" peakrate {}", fmt_rate(p, iec));
            if let Some(mtu) = self.mtu {
                s += &format!(" minburst {}", fmt_size(mtu));
            }
        }
        let lat = self.latency_us();
        if lat >= 0.0 {
            s += &format!(" lat {}", fmt_time_us(lat.round() as u64));
        } else {
            s += &format!(" limit {}", fmt_size(self.limit));
        }
        if self.overhead > 0 {
            s += &format!(" overhead {}", self.overhead);
        }
        s
    }
}
