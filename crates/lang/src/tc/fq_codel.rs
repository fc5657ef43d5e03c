//! fq_codel's options (tc-fq_codel(8)), with the kernel's defaults.

use super::units::{self, fmt_size, fmt_time_us};
use super::{matches, Args, TcError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FqCodel {
    /// Packets held in all.
    pub limit: u32,
    pub flows: u32,
    pub target_us: u64,
    pub interval_us: u64,
    pub quantum: u32,
    pub ecn: bool,
    pub ce_threshold_us: Option<u64>,
    pub memory_limit: u64,
    pub drop_batch: u32,
}

impl Default for FqCodel {
    fn default() -> FqCodel {
        FqCodel {
            limit: 10240,
            flows: 1024,
            target_us: 5_000,
            interval_us: 100_000,
            quantum: 1514,
            ecn: true,
            ce_threshold_us: None,
            memory_limit: 32 << 20,
            drop_batch: 64,
        }
    }
}

fn illegal(what: &str) -> TcError {
    TcError::syntax(format!("Illegal \"{what}\""))
}

fn number<T: std::str::FromStr>(a: &mut Args, what: &str) -> Result<T, TcError> {
    a.next_or(what)?.parse().map_err(|_| illegal(what))
}

fn time(a: &mut Args, what: &str) -> Result<u64, TcError> {
    units::time_us(a.next_or(what)?).ok_or_else(|| illegal(what))
}

impl FqCodel {
    pub(super) fn parse(a: &mut Args) -> Result<FqCodel, TcError> {
        let mut f = FqCodel::default();
        while let Some(w) = a.next() {
            if matches(w, "limit") {
                f.limit = number(a, "limit")?;
            } else if matches(w, "flows") {
                f.flows = number(a, "flows")?;
            } else if matches(w, "quantum") {
                f.quantum = number(a, "quantum")?;
            } else if matches(w, "drop_batch") {
                f.drop_batch = number(a, "drop_batch")?;
            } else if matches(w, "target") {
                f.target_us = time(a, "target")?;
            } else if matches(w, "ce_threshold") {
                f.ce_threshold_us = Some(time(a, "ce_threshold")?);
            } else if matches(w, "memory_limit") {
                let v = a.next_or("memory_limit")?;
                f.memory_limit = units::size_bytes(v).ok_or_else(|| illegal("memory_limit"))?;
            } else if matches(w, "interval") {
                f.interval_us = time(a, "interval")?;
            } else if matches(w, "ecn") {
                f.ecn = true;
            } else if matches(w, "noecn") {
                f.ecn = false;
            } else {
                return Err(TcError::syntax(format!("What is \"{w}\"?")).hint(
                    "Usage: ... fq_codel [ limit PACKETS ] [ flows NUMBER ] [ memory_limit BYTES ] [ target TIME ] [ interval TIME ] [ quantum BYTES ] [ [no]ecn ] [ ce_threshold TIME ] [ drop_batch SIZE ]",
                ));
            }
        }
        if f.flows == 0 || f.quantum == 0 || f.limit == 0 {
            return Err(TcError::syntax(
                "fq_codel: limit, flows and quantum must be above 0",
            ));
        }
        Ok(f)
    }

    pub fn show(&self) -> String {
        let mut s = format!(
            "limit {}p flows {} quantum {} target {}",
            self.limit,
            self.flows,
            self.quantum,
            fmt_time_us(self.target_us),
        );
        if let Some(ce) = self.ce_threshold_us {
            s += &format!(" ce_threshold {}", fmt_time_us(ce));
        }
        s += &format!(
            " interval {} memory_limit {}",
            fmt_time_us(self.interval_us),
            fmt_size(self.memory_limit)
        );
        if self.ecn {
            s += " ecn";
        }
        if self.drop_batch > 0 {
            s += &format!(" drop_batch {}", self.drop_batch);
        }
        s
    }
}
