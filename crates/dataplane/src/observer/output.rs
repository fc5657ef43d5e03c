//! What the observer thread does with a message: the start and the
//! interfaces' names kept, a record's event built, written to the files
//! and handed to the subscribers; the files flushed, and the first write
//! error.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::TrySendError;

use dummynet_engine::{DropReason, IfaceId};

use super::record::{Kind, Msg, Record};
use super::thread::Worker;
use super::writers::{MmLog, RecordFile};
use crate::events::{dir_str, split_target, Event, DUPLICATE};

impl Worker {
    pub(super) fn handle(&mut self, w: usize, msg: Msg) {
        match msg {
            // Each worker says; the first is written.
            Msg::Start { .. } if self.wall_ns != 0 => {}
            Msg::Start { wall_ns, clock } => {
                self.wall_ns = wall_ns;
                self.merge.clock = clock;
                let start: Event<String> = Event::Start { t_ns: 0, wall_ns };
                if let Some(mm) = &mut self.writers.mm {
                    let r = mm.header(wall_ns);
                    self.check(r.map(drop));
                }
                self.log(&start);
                for s in &self.subscribers {
                    let _ = s.tx.try_send(start.clone());
                }
            }
            Msg::Iface(i, name) => {
                self.names.insert((w, i), name);
            }
            Msg::Trace { at, trace } => self.mm(|mm, wall| mm.retrace(at, trace, wall)),
            Msg::Packet(r) => self.packet(w, &r, None),
            Msg::Frame(r, buf, orig_len) => {
                self.packet(w, &r, Some((&buf, orig_len)));
                if let Some(spare) = self.spare.get(w) {
                    let _ = spare.try_send(buf);
                }
            }
        }
    }

    /// Worker `w`'s record `r` written and handed out.
    pub(super) fn packet(&mut self, w: usize, r: &Record, frame: Option<(&[u8], u32)>) {
        if let Some((bytes, orig_len)) = frame {
            let ts = self.wall_ns.saturating_add(r.t_ns);
            let w = match r.kind {
                Kind::Arrival => &mut self.writers.capture_in,
                _ => &mut self.writers.capture_out,
            };
            if let Some(w) = w {
                if self.failed {
                    self.shared.unwritten.fetch_add(1, Ordering::Relaxed);
                } else {
                    let res = w.writer.write(ts, orig_len, bytes);
                    if res.is_ok() {
                        // Counted once on disk (`Worker::flush`).
                        w.out.lock().end_record();
                    }
                    self.check(res.map_err(std::io::Error::other));
                }
            }
        }
        self.mm(|mm, wall| mm.record(r, wall));
        if r.kind == Kind::Enqueue {
            return;
        }
        if self.writers.log.is_none() && self.subscribers.is_empty() {
            return;
        }
        let e = self.event(w, r);
        self.log(&e);
        if !self.subscribers.is_empty() {
            self.fan_out(e);
        }
    }

    /// The log's event for a record.
    fn event(&self, w: usize, r: &Record) -> Event<String> {
        let name =
            |i: Option<IfaceId>| i.map(|i| self.names.get(&(w, i)).cloned().unwrap_or_default());
        let note = r.copy.then(|| DUPLICATE.to_string());
        let (pipe, queue) = split_target(r.target);
        match r.kind {
            Kind::Arrival => Event::Arrival {
                t_ns: r.t_ns,
                id: r.id,
                len: r.len,
                iface: name(r.iface).unwrap_or_default(),
                dir: dir_str(r.dir),
                bridge_to: name(r.bridge_to),
            },
            Kind::Forward => Event::Forward {
                t_ns: r.t_ns,
                id: r.id,
                rule: r.rule,
                pipe,
                queue,
                iface: name(r.iface).unwrap_or_default(),
                ce: r.marked,
                note,
            },
            Kind::Departure | Kind::Enqueue => Event::Departure {
                t_ns: r.t_ns,
                id: r.id,
                rule: r.rule,
                pipe,
                queue,
                iface: name(r.iface),
                ce: r.marked,
                note,
            },
            Kind::Drop => Event::Drop {
                t_ns: r.t_ns,
                id: r.id,
                reason: r.reason.map_or("unknown", DropReason::as_str),
                rule: r.rule,
                pipe,
                queue,
                dir: Some(dir_str(r.dir)),
                note,
            },
        }
    }

    fn log(&mut self, e: &Event<String>) {
        if let Some(w) = &mut self.writers.log {
            if self.failed {
                self.shared.unwritten.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let res = serde_json::to_writer(&mut *w, e)
                .map_err(std::io::Error::other)
                .and_then(|()| w.write_all(b"\n"));
            if res.is_ok() {
                // Counted once on disk (`Worker::flush`).
                w.end_record();
            }
            self.check(res);
        }
    }

    /// Hands `e` to every subscriber whose filter keeps it.
    fn fan_out(&mut self, e: Event<String>) {
        for s in &self.subscribers {
            if !s.filter.keeps(&e) {
                continue;
            }
            if let Err(TrySendError::Full(_)) = s.tx.try_send(e.clone()) {
                s.state.lost.fetch_add(1, Ordering::Relaxed);
                self.shared.subscriber_lost.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Writes to the mahimahi log, if there is one and writing has not
    /// failed, counting its lines.
    pub(super) fn mm(&mut self, write: impl FnOnce(&mut MmLog, u64) -> std::io::Result<u64>) {
        if let (Some(mm), false) = (&mut self.writers.mm, self.failed) {
            let res = write(mm, self.wall_ns);
            if let Ok(n) = res {
                self.shared.mm_lines.fetch_add(n, Ordering::Relaxed);
            }
            self.check(res.map(drop));
        }
    }

    pub(super) fn flush(&mut self) {
        if self.failed {
            return;
        }
        let w = &mut self.writers;
        let mut res = Ok(());
        if let Some(l) = &mut w.log {
            match l.commit() {
                Ok(n) => self.shared.logged.store(n, Ordering::Relaxed),
                Err(e) => res = Err(e),
            }
        }
        for (c, n) in [
            (&mut w.capture_in, &self.shared.captured_in),
            (&mut w.capture_out, &self.shared.captured_out),
        ] {
            if let Some(c) = c {
                match c.out.lock().commit() {
                    Ok(records) => n.store(records, Ordering::Relaxed),
                    Err(e) => res = res.and(Err(e)),
                }
            }
        }
        if let Some(m) = &mut w.mm {
            res = res.and(m.out.flush());
        }
        self.check(res);
        if self.failed {
            return;
        }
        // What was written goes to the disk now, a little at a time, and
        // leaves the page cache once it is there: left to the kernel's
        // thresholds, a capture at 100 kpps (40 MB/s) piles up gigabytes
        // of dirty pages that are then written back in bursts, while the
        // data plane runs (on a loaded machine, stalls of tens of ms came
        // with captures on disk, not on tmpfs: README, Performance).
        // DONTNEED starts the writeback without waiting for it and drops
        // the pages already written. Advice only: its failure changes
        // nothing.
        let w = &self.writers;
        let advise = |f: &File| {
            let _ = nix::fcntl::posix_fadvise(
                f,
                0,
                0,
                nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
            );
        };
        if let Some(f) = w.log.as_ref().and_then(RecordFile::file) {
            advise(f);
        }
        for c in [&w.capture_in, &w.capture_out].into_iter().flatten() {
            if let Some(f) = c.out.lock().file() {
                advise(f);
            }
        }
        if let Some(m) = &w.mm {
            advise(m.out.get_ref());
        }
    }

    /// On the first write error, stops writing files (a full disk would
    /// otherwise fail every line): the log and captures are cut back to
    /// their last whole record, what they hold is counted, the error is
    /// kept for `stats` and said once on stderr, naming the file. Events
    /// from then on are counted as lost ([`ObserverStats::unwritten`]).
    fn check(&mut self, res: std::io::Result<()>) {
        let Err(e) = res else {
            return;
        };
        if self.failed {
            return;
        }
        self.failed = true;
        let w = &mut self.writers;
        // The file that failed, and the OS's words (a serializer or the
        // pcap writer would wrap them in its own).
        let mut failed: Option<(PathBuf, String)> = None;
        if let Some(l) = &mut w.log {
            if let Some(err) = l.error.clone() {
                failed.get_or_insert((l.path.clone(), err));
            }
            self.shared.logged.store(l.cut(), Ordering::Relaxed);
        }
        for (c, n) in [
            (&mut w.capture_in, &self.shared.captured_in),
            (&mut w.capture_out, &self.shared.captured_out),
        ] {
            if let Some(c) = c {
                let mut out = c.out.lock();
                if let Some(err) = out.error.clone() {
                    failed.get_or_insert((out.path.clone(), err));
                }
                n.store(out.cut(), Ordering::Relaxed);
            }
        }
        let (path, err) = failed.unwrap_or_else(|| {
            let path = w.mm.as_ref().map(|m| m.path.clone()).unwrap_or_default();
            (path, e.to_string())
        });
        let why = format!("writing {}: {err}", path.display());
        say_now!(
            "dummynet: {why}; the log and captures are no longer written (each ends with its \
             last whole record), and events from now on are counted as lost in `dummynet stats`"
        );
        let mut slot = match self.shared.error.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        slot.get_or_insert(why);
    }
}
