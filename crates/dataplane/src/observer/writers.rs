//! The observer's files: the per-packet log, the captures (pcap) and
//! mahimahi's link log of one pipe, written on the observer thread only.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dummynet_engine::config::Trace;
use dummynet_engine::impair::trace::{TraceCursor, OPPORTUNITY_BYTES};
use dummynet_engine::{Nanos, Target};

use super::record::{Kind, Record};
use crate::capture;

/// The files.
pub(super) struct Writers {
    pub(super) log: Option<RecordFile>,
    pub(super) capture_in: Option<Pcap>,
    pub(super) capture_out: Option<Pcap>,
    pub(super) mm: Option<MmLog>,
}

/// A capture: the pcap writer, over a buffer this side can also flush
/// (the writer does not give its output back until it is dropped).
pub(super) struct Pcap {
    pub(super) writer: capture::Writer<SharedFile>,
    pub(super) out: SharedFile,
}

/// A buffered file two owners write through; only the observer thread
/// ever locks it, so the lock is never contended.
#[derive(Clone)]
pub(super) struct SharedFile(pub(super) Arc<Mutex<RecordFile>>);

impl SharedFile {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, RecordFile> {
        match self.0.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

impl Write for SharedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.lock().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.lock().flush()
    }
}

/// A buffered file written in whole records (a log line, a pcap record).
/// It counts the records known to be on disk, and after a write error
/// (a full disk) cuts the file back to the last whole record and writes
/// nothing more: a capture stays readable, a log ends with a whole line.
pub(super) struct RecordFile {
    pub(super) path: PathBuf,
    /// `None` once cut.
    out: Option<BufWriter<File>>,
    /// Bytes handed to the buffer since the start.
    len: u64,
    /// Records ended since the start.
    records: u64,
    /// Where each record ended (offset, records up to it) since the last
    /// flush that got everything to the disk.
    ends: VecDeque<(u64, u64)>,
    /// The last such flush: everything up to here is on disk.
    on_disk: (u64, u64),
    /// The first error a write or flush met, as the OS said it.
    pub(super) error: Option<String>,
}

impl RecordFile {
    pub(super) fn create(path: &Path) -> std::io::Result<RecordFile> {
        Ok(RecordFile {
            path: path.to_path_buf(),
            out: Some(BufWriter::with_capacity(1 << 16, File::create(path)?)),
            len: 0,
            records: 0,
            ends: VecDeque::new(),
            on_disk: (0, 0),
            error: None,
        })
    }

    /// What was written so far is whole (a file header): the file may be
    /// cut back to here.
    pub(super) fn boundary(&mut self) {
        self.ends.push_back((self.len, self.records));
    }

    /// One record ends here.
    pub(super) fn end_record(&mut self) {
        self.records += 1;
        self.boundary();
    }

    /// Flushes; the records on disk.
    pub(super) fn commit(&mut self) -> std::io::Result<u64> {
        self.flush()?;
        self.on_disk = (self.len, self.records);
        self.ends.clear();
        Ok(self.records)
    }

    /// After an error: the file is cut back to the last whole record that
    /// reached it, what is still buffered is thrown away, and nothing more
    /// is written. The records left in the file.
    pub(super) fn cut(&mut self) -> u64 {
        let Some(out) = self.out.take() else {
            return self.on_disk.1;
        };
        // Not flushed: the buffer is what the disk had no room for.
        let (file, _) = out.into_parts();
        let Ok(reached) = file.metadata().map(|m| m.len()) else {
            return self.on_disk.1;
        };
        let (end, records) = self
            .ends
            .iter()
            .rev()
            .find(|(end, _)| *end <= reached)
            .copied()
            .unwrap_or(self.on_disk);
        self.ends.clear();
        self.on_disk = (end, records);
        if reached > end && file.set_len(end).is_err() {
            // Left as it is: at least the count says what is whole.
        }
        records
    }

    pub(super) fn file(&self) -> Option<&File> {
        self.out.as_ref().map(BufWriter::get_ref)
    }

    fn remember<T>(&mut self, res: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &res {
            self.error.get_or_insert_with(|| e.to_string());
        }
        res
    }
}

impl Write for RecordFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(out) = &mut self.out else {
            return Err(std::io::Error::other("not written after an error"));
        };
        let res = out.write(buf);
        if let Ok(n) = res {
            self.len += n as u64;
        }
        self.remember(res)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let Some(out) = &mut self.out else {
            return Err(std::io::Error::other("not written after an error"));
        };
        let res = out.flush();
        self.remember(res)
    }
}

/// mahimahi's link log of one pipe.
pub(super) struct MmLog {
    pub(super) path: PathBuf,
    pub(super) out: BufWriter<File>,
    pub(super) pipe: u32,
    /// The start, ms since the Unix epoch.
    pub(super) base_ms: u64,
    /// When each packet inside the pipe entered it (ms), by (id, copy).
    pub(super) entered: HashMap<(u64, bool), u64>,
    /// The pipe's trace while it is trace-driven.
    pub(super) trace: Option<Opportunities>,
}

/// A trace's delivery opportunities, walked in time order.
pub(super) struct Opportunities {
    pub(super) trace: Arc<Trace>,
    pub(super) start: Nanos,
    /// The next opportunity not yet logged; none once a `once` trace ends.
    pub(super) next: Option<TraceCursor>,
}

impl MmLog {
    pub(super) fn header(&mut self, wall_ns: u64) -> std::io::Result<()> {
        self.base_ms = wall_ns / 1_000_000;
        writeln!(
            self.out,
            "# dummynet mm-log of pipe {} (times in ms since the Unix epoch)",
            self.pipe
        )?;
        writeln!(self.out, "# base timestamp: {}", self.base_ms)
    }

    /// Logs the trace's opportunities before `until` (engine time), one
    /// `T # 1504` line each, as mahimahi's link does; how many.
    pub(super) fn opportunities(&mut self, until: Nanos, wall_ns: u64) -> std::io::Result<u64> {
        let Some(o) = &mut self.trace else {
            return Ok(0);
        };
        let mut n = 0;
        while let Some(c) = o.next {
            let at = o.trace.at(o.start, c);
            if at >= until {
                break;
            }
            let ms = wall_ns.saturating_add(at) / 1_000_000;
            writeln!(self.out, "{ms} # {OPPORTUNITY_BYTES}")?;
            n += 1;
            o.next = o.trace.next(c);
        }
        Ok(n)
    }

    /// The pipe's trace changed at `at`: the old one's opportunities
    /// before then are logged, and the new one's follow from its start.
    pub(super) fn retrace(
        &mut self,
        at: Nanos,
        trace: Option<(Arc<Trace>, Nanos)>,
        wall_ns: u64,
    ) -> std::io::Result<u64> {
        let n = self.opportunities(at, wall_ns)?;
        self.trace = trace.map(|(trace, start)| Opportunities {
            trace,
            start,
            next: Some(TraceCursor::default()),
        });
        Ok(n)
    }

    /// The lines `r` makes, if it concerns the pipe (the opportunities
    /// up to it first, those at its very time included: a packet leaves
    /// at the opportunity that carries it); how many.
    pub(super) fn record(&mut self, r: &Record, wall_ns: u64) -> std::io::Result<u64> {
        let n = self.opportunities(r.t_ns.saturating_add(1), wall_ns)?;
        if r.target != Some(Target::Pipe(self.pipe)) {
            return Ok(n);
        }
        self.event(r, wall_ns).map(|m| m + n)
    }

    /// The `+` and `-` lines of a record of the pipe.
    pub(super) fn event(&mut self, r: &Record, wall_ns: u64) -> std::io::Result<u64> {
        let ms = wall_ns.saturating_add(r.t_ns) / 1_000_000;
        match r.kind {
            Kind::Enqueue => {
                self.entered.insert((r.id, r.copy), ms);
                writeln!(self.out, "{ms} + {}", r.len)?;
                Ok(1)
            }
            Kind::Drop if r.at_entry => {
                writeln!(self.out, "{ms} + {}", r.len)?;
                Ok(1)
            }
            Kind::Drop => {
                self.entered.remove(&(r.id, r.copy));
                Ok(0)
            }
            Kind::Departure | Kind::Forward => {
                // A copy made inside the pipe entered with its original.
                let since = self
                    .entered
                    .remove(&(r.id, r.copy))
                    .or_else(|| self.entered.get(&(r.id, false)).copied())
                    .unwrap_or(ms)
                    .min(ms);
                writeln!(self.out, "{ms} - {} {}", r.len, ms - since)?;
                Ok(1)
            }
            Kind::Arrival => Ok(0),
        }
    }
}
