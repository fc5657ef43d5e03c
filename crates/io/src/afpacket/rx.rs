//! Receiving a batch: from the ring, or with `recvmmsg`; a frame too long
//! for its ring slot is read whole from the socket's queue.

use std::os::fd::AsRawFd;

use nix::errno::Errno;

use super::frame::{finish_frame, recycle_into};
use super::ring::{read_slot, ReadSlot, SlotOutcome};
use super::{Port, PortError, RxFrame, VnetHdr};

/// How many `recvmmsg` calls one [`Port::recv_batch`] makes when every frame
/// received was skipped (outgoing, truncated): enough to drain a burst, and
/// bounded so a flood of skipped frames cannot hold the caller.
const RECV_ROUNDS: usize = 4;

impl Port {
    /// Reads up to `max` frames (and at most [`PortOptions::batch`](super::PortOptions::batch)) and
    /// appends them to `out`. Returns how many were appended; 0 means nothing
    /// was waiting (the socket is non-blocking: poll [`Port::as_fd`](super::Port#method.as_fd) for
    /// `POLLIN`). Frames too long for a slot are dropped and counted, never
    /// delivered cut. On an error (the interface went away, mostly), frames
    /// read before it are already in `out`.
    pub fn recv_batch(&mut self, out: &mut Vec<RxFrame>, max: usize) -> Result<usize, PortError> {
        let want = max.min(self.opts.batch);
        if self.ring.is_some() {
            return self.recv_ring(out, want);
        }
        let mut appended = 0;
        for _ in 0..RECV_ROUNDS {
            if want == 0 {
                break;
            }
            let got = match self.rx.receive(self.fd.as_raw_fd(), want) {
                Ok(n) => n,
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                // A frame the kernel could not put a virtio_net_hdr on; it is
                // gone, the next ones are not.
                Err(Errno::EINVAL) => {
                    self.stats.rx_vnet_refused += 1;
                    continue;
                }
                Err(errno) => return Err(self.error("recvmmsg", errno)),
            };
            for slot in 0..got {
                if let Some(frame) = self.take(slot) {
                    out.push(frame);
                    appended += 1;
                }
            }
            if got == 0 || appended > 0 {
                break;
            }
        }
        Ok(appended)
    }

    /// [`Port::recv_batch`] from the ring: up to `want` frames, visiting at
    /// most `RECV_ROUNDS * want` slots so a flood of skipped frames cannot
    /// hold the caller.
    fn recv_ring(&mut self, out: &mut Vec<RxFrame>, want: usize) -> Result<usize, PortError> {
        let mut appended = 0;
        for _ in 0..want.saturating_mul(RECV_ROUNDS) {
            if appended == want {
                break;
            }
            let Some(ring) = self.ring.as_mut() else {
                break;
            };
            let Some(slot) = ring.ready() else {
                break;
            };
            let outcome = read_slot(
                slot,
                ReadSlot {
                    skip_outgoing: !self.ignore_outgoing,
                    frame_capacity: self.opts.frame_capacity,
                    with_vnet: self.opts.vnet_hdr,
                },
                &mut self.pool,
                &mut self.stats,
            );
            // The slot is copied out (or given up on): the kernel may have it.
            ring.release();
            let frame = match outcome {
                SlotOutcome::Frame(frame) => Some(frame),
                SlotOutcome::Skipped => None,
                SlotOutcome::Copied { outgoing, stamp_ns } => self
                    .take_copied(outgoing)?
                    .map(|f| RxFrame { stamp_ns, ..f }),
            };
            if let Some(frame) = frame {
                out.push(frame);
                appended += 1;
            }
        }
        Ok(appended)
    }

    /// Reads, whole, the frame whose ring slot said `TP_STATUS_COPY`: it is
    /// the next one on the socket's queue.
    fn take_copied(&mut self, outgoing: bool) -> Result<Option<RxFrame>, PortError> {
        let mut got = 0;
        for _ in 0..RECV_ROUNDS {
            match self.rx.receive(self.fd.as_raw_fd(), 1) {
                Ok(n) => {
                    got = n;
                    break;
                }
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => break,
                // Dequeued, but the kernel could not describe it.
                Err(Errno::EINVAL) => {
                    self.stats.rx_vnet_refused += 1;
                    return Ok(None);
                }
                Err(errno) => return Err(self.error("recvmsg (TP_STATUS_COPY)", errno)),
            }
        }
        if got == 0 {
            // The slot promised a copy that is not there.
            self.stats.rx_malformed += 1;
            return Ok(None);
        }
        // The copy's own address is blank (the kernel zeroes it); whether the
        // frame was outgoing came from its slot.
        if outgoing {
            self.stats.rx_outgoing_skipped += 1;
            return Ok(None);
        }
        let frame = self.take(0);
        if frame.is_some() {
            self.stats.rx_ring_copied += 1;
        }
        Ok(frame)
    }

    /// Gives a frame buffer back for reuse by [`Port::recv_batch`] on this
    /// port. Buffers beyond a few thousand are freed.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        recycle_into(&mut self.pool, buf);
    }

    /// Turns receive slot `slot` into a frame, or counts why it is skipped.
    fn take(&mut self, slot: usize) -> Option<RxFrame> {
        let meta = *self.rx.meta.get(slot)?;
        if !self.ignore_outgoing && meta.pkttype == libc::PACKET_OUTGOING {
            self.stats.rx_outgoing_skipped += 1;
            return None;
        }
        let Some(frame_len) = meta.len.checked_sub(VnetHdr::LEN) else {
            self.stats.rx_malformed += 1;
            return None;
        };
        let buf = self.rx.frames.get(slot)?;
        if meta.truncated || frame_len > buf.len() {
            self.stats.rx_truncated += 1;
            return None;
        }
        let bytes = buf.get(..frame_len)?;
        let Ok(vnet) = VnetHdr::parse(self.rx.vnet.get(slot)?) else {
            self.stats.rx_malformed += 1;
            return None;
        };
        let aux = meta.aux.unwrap_or((0, 0, 0));
        finish_frame(
            bytes,
            vnet,
            aux,
            self.opts.vnet_hdr,
            &mut self.pool,
            &mut self.stats,
        )
    }
}
