//! The two ports of a bridge sharing one UMEM: receive, send, refill, reap.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nix::errno::Errno;

use super::bpf::{attach, Attached};
use super::checksum::finish_checksum;
use super::umem::{give_back, Area, XdpFrame};
use super::xsk::{mtu_of, open_probe, rx_queues, Xsk, XskStats};
use super::{check_options, sys, Attach, Mode, XdpError, XdpOptions, KERNEL_HEADROOM};

/// Two interfaces joined by AF_XDP sockets over one UMEM.
pub struct XdpPorts {
    area: Arc<Area>,
    frame_size: u32,
    /// Chunks that are free: on no ring and in no frame.
    free: Vec<u64>,
    socks: [Xsk; 2],
    // Dropped after the sockets: detaching the programs.
    _attached: [Attached; 2],
    mode: Mode,
    /// Turns the fill ring of a port could not be topped up for want of
    /// free chunks.
    umem_exhausted: u64,
    /// Chunks lent to the kernel: on fill or rx rings, or on tx rings and
    /// not yet completed.
    lent: u64,
    sending: u64,
    frames: u64,
    /// A plain socket to ask about the ports' interfaces, and their
    /// indices when opened.
    probe: OwnedFd,
    ifindex: [u32; 2],
}

impl XdpPorts {
    /// Opens both ports (in the calling thread's network namespace):
    /// zero-copy where the drivers allow, copy mode otherwise.
    pub fn open(a: &str, b: &str, opts: &XdpOptions) -> Result<XdpPorts, XdpError> {
        check_options(opts)?;
        let mut ifindex = [0u32; 2];
        for (i, name) in [a, b].iter().enumerate() {
            ifindex[i] = nix::net::if_::if_nametoindex(*name).map_err(|errno| {
                XdpError::NoSuchInterface {
                    ifname: name.to_string(),
                    errno,
                }
            })?;
        }
        // A plain socket to ask the interfaces about their queues and MTU.
        let probe = open_probe(a)?;
        let room = opts.frame_size - KERNEL_HEADROOM;
        for name in [a, b] {
            if let Some(queues) = rx_queues(&probe, name).filter(|&q| q > 1) {
                return Err(XdpError::Queues {
                    ifname: name.to_string(),
                    queues,
                });
            }
            // Ethernet header and one VLAN tag. In generic XDP a longer
            // frame is passed to the kernel instead (see the program).
            let max = room - 18;
            if opts.attach == Attach::Generic {
                continue;
            }
            if let Some(mtu) = mtu_of(&probe, name).filter(|&m| m > max) {
                return Err(XdpError::Mtu {
                    ifname: name.to_string(),
                    mtu,
                    room,
                    max,
                });
            }
        }
        let tries: &[bool] = if opts.zero_copy && opts.attach == Attach::Driver {
            &[true, false]
        } else {
            &[false]
        };
        let mut last = None;
        for &zero_copy in tries {
            match Self::open_as(a, b, ifindex, opts, zero_copy) {
                Ok(mut p) => {
                    p.probe = probe;
                    return Ok(p);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| sys(a, "open", Errno::EINVAL)))
    }

    fn open_as(
        a: &str,
        b: &str,
        ifindex: [u32; 2],
        opts: &XdpOptions,
        zero_copy: bool,
    ) -> Result<XdpPorts, XdpError> {
        let area = Arc::new(Area::new(opts.frames as usize * opts.frame_size as usize)?);
        let flags = libc::XDP_USE_NEED_WAKEUP
            | if zero_copy {
                libc::XDP_ZEROCOPY
            } else {
                libc::XDP_COPY
            };
        let sa = Xsk::open(a, ifindex[0], &area, opts, None, flags)?;
        let sb = Xsk::open(b, ifindex[1], &area, opts, Some(&sa.fd), flags)?;
        // Driver mode first, unless told generic; zero-copy needs it.
        let room = opts.frame_size - KERNEL_HEADROOM;
        let pa = attach(a, ifindex[0], &sa.fd, opts.attach, room)?;
        let pb = attach(b, ifindex[1], &sb.fd, opts.attach, room)?;
        if zero_copy && !(pa.driver && pb.driver) {
            return Err(sys(a, "zero-copy", Errno::EOPNOTSUPP));
        }
        let mode = Mode {
            driver: pa.driver && pb.driver,
            zero_copy,
        };
        let free = (0..u64::from(opts.frames))
            .rev()
            .map(|i| i * u64::from(opts.frame_size))
            .collect();
        let mut ports = XdpPorts {
            area,
            frame_size: opts.frame_size,
            free,
            socks: [sa, sb],
            _attached: [pa, pb],
            mode,
            umem_exhausted: 0,
            lent: 0,
            sending: 0,
            frames: u64::from(opts.frames),
            probe: open_probe(a)?,
            ifindex,
        };
        ports.refill(0);
        ports.refill(1);
        Ok(ports)
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn ifname(&self, side: usize) -> &str {
        &self.socks[side & 1].ifname
    }

    /// The socket of port `side`: readable when frames wait.
    pub fn fd(&self, side: usize) -> BorrowedFd<'_> {
        self.socks[side & 1].fd.as_fd()
    }

    /// False once port `side`'s interface is gone (deleted, or replaced by
    /// another of the same name): its socket's queue went with it, and an
    /// AF_XDP socket does not say so when polled. One `ioctl`; true when
    /// the kernel cannot tell.
    pub fn link_present(&self, side: usize) -> bool {
        let side = side & 1;
        match crate::afpacket::ifreq_ioctl(
            &self.probe,
            &self.socks[side].ifname,
            libc::SIOCGIFINDEX,
        ) {
            // SAFETY: SIOCGIFINDEX succeeded, so the kernel wrote `ifru_ifindex`.
            Ok(req) => {
                u32::try_from(unsafe { req.ifr_ifru.ifru_ifindex }) == Ok(self.ifindex[side])
            }
            Err(Errno::ENODEV | Errno::ENXIO) => false,
            Err(_) => true,
        }
    }

    /// Chunks free now (neither lent to the kernel nor held in a frame).
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    /// Where the UMEM's chunks are: `(free, lent to the kernel to receive
    /// into, being sent, held in frames)`; the four add up to the UMEM.
    pub fn chunks(&mut self) -> (u64, u64, u64, u64) {
        self.take_strays();
        let free = self.free.len() as u64;
        let held = self.frames - free - self.lent - self.sending;
        (free, self.lent, self.sending, held)
    }

    /// Turns a port's fill ring could not be topped up: the UMEM was full.
    pub fn umem_exhausted(&self) -> u64 {
        self.umem_exhausted
    }

    fn take_strays(&mut self) {
        if self.area.stray_count.load(Ordering::Relaxed) == 0 {
            return;
        }
        if let Ok(mut strays) = self.area.strays.lock() {
            self.area.stray_count.store(0, Ordering::Relaxed);
            // A stray is a frame's address: its chunk starts below it.
            let mask = !(u64::from(self.frame_size) - 1);
            self.free.extend(strays.drain(..).map(|a| a & mask));
        }
    }

    /// Lends free chunks to the kernel on port `side`'s fill ring.
    fn refill(&mut self, side: usize) {
        let fill = &mut self.socks[side].fill;
        let room = fill.room() as usize;
        if room == 0 {
            return;
        }
        let n = room.min(self.free.len());
        if n < room && n == 0 {
            self.umem_exhausted += 1;
        }
        for _ in 0..n {
            if let Some(addr) = self.free.pop() {
                fill.put(addr);
                self.lent += 1;
            }
        }
        fill.publish();
        if fill.needs_wakeup() {
            // SAFETY: a zero-length, non-blocking receive with no buffer,
            // which AF_XDP takes as "the fill ring has chunks again".
            unsafe {
                libc::recvfrom(
                    self.socks[side].fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    /// Reads up to `max` frames waiting on port `side` into `out`; returns
    /// how many.
    pub fn recv_batch(&mut self, side: usize, out: &mut Vec<XdpFrame>, max: usize) -> usize {
        let side = side & 1;
        self.take_strays();
        self.reap(side);
        let limit = self.area.len as u64;
        let chunk_mask = !(u64::from(self.frame_size) - 1);
        let sock = &mut self.socks[side];
        let n = (sock.rx.ready() as usize).min(max);
        for _ in 0..n {
            let d = sock.rx.take();
            if d.addr.saturating_add(u64::from(d.len)) > limit
                || (d.addr & chunk_mask) != ((d.addr + u64::from(d.len).max(1) - 1) & chunk_mask)
            {
                // Not a frame this UMEM can hold: never from a sound kernel.
                sock.stats.rx_invalid += 1;
                continue;
            }
            let mut frame = XdpFrame {
                area: self.area.clone(),
                addr: d.addr,
                len: d.len,
            };
            finish_checksum(&mut frame);
            out.push(frame);
        }
        sock.rx.release();
        sock.stats.rx_frames += n as u64;
        self.lent -= n as u64;
        self.refill(side);
        n
    }

    /// Gives a frame's chunk back (the frame was dropped).
    pub fn recycle(&mut self, frame: XdpFrame) {
        let (area, addr) = frame.into_addr();
        if Arc::ptr_eq(&area, &self.area) {
            self.free.push(addr & !(u64::from(self.frame_size) - 1));
        } else {
            give_back(&area, addr);
        }
    }

    /// Queues `frame` to be sent out of port `side` (sent by
    /// [`XdpPorts::flush`]). False when the tx ring is full: the frame is
    /// dropped, counted in [`XskStats::tx_ring_full`].
    pub fn send(&mut self, side: usize, frame: XdpFrame) -> bool {
        let side = side & 1;
        let len = frame.len;
        let (area, addr) = frame.into_addr();
        if !Arc::ptr_eq(&area, &self.area) {
            give_back(&area, addr);
            return false;
        }
        let sock = &mut self.socks[side];
        if sock.tx.room() == 0 {
            // Let the kernel take what is there, then look again.
            sock.tx.publish();
            sock.tx_pending = true;
            sock.kick();
            self.reap(side);
            if self.socks[side].tx.room() == 0 {
                self.socks[side].stats.tx_ring_full += 1;
                self.free.push(addr & !(u64::from(self.frame_size) - 1));
                return false;
            }
        }
        let sock = &mut self.socks[side];
        sock.tx.put(libc::xdp_desc {
            addr,
            len,
            options: 0,
        });
        sock.tx_pending = true;
        sock.stats.tx_frames += 1;
        self.sending += 1;
        true
    }

    /// Copies `bytes` into a free chunk and queues it on port `side`. False
    /// when no chunk is free, the frame is too long, or the ring is full.
    pub fn send_copy(&mut self, side: usize, bytes: &[u8]) -> bool {
        let Some(frame) = self.alloc(bytes) else {
            return false;
        };
        self.send(side, frame)
    }

    /// A frame holding a copy of `bytes`, in a free chunk; `None` if no
    /// chunk is free or `bytes` does not fit one.
    pub fn alloc(&mut self, bytes: &[u8]) -> Option<XdpFrame> {
        if bytes.len() > (self.frame_size - KERNEL_HEADROOM) as usize {
            return None;
        }
        self.take_strays();
        let chunk = self.free.pop()? & !(u64::from(self.frame_size) - 1);
        let mut f = XdpFrame {
            area: self.area.clone(),
            addr: chunk + u64::from(KERNEL_HEADROOM),
            len: bytes.len() as u32,
        };
        f.copy_from_slice(bytes);
        Some(f)
    }

    /// Hands the frames queued on port `side` to the kernel and takes back
    /// the chunks it has sent.
    pub fn flush(&mut self, side: usize) {
        let side = side & 1;
        let sock = &mut self.socks[side];
        if sock.tx_pending {
            sock.tx.publish();
            sock.kick();
        }
        self.reap(side);
    }

    /// Frames wait on port `side`'s tx ring that the kernel did not take
    /// at the last [`XdpPorts::flush`] (it said `ENOBUFS`, `EBUSY` or
    /// `EAGAIN`): the next flush tries again.
    pub fn tx_pending(&self, side: usize) -> bool {
        self.socks[side & 1].tx_pending
    }

    /// Takes sent chunks back from port `side`'s completion ring.
    fn reap(&mut self, side: usize) {
        let comp = &mut self.socks[side].comp;
        let n = comp.ready();
        if n == 0 {
            return;
        }
        let mask = !(u64::from(self.frame_size) - 1);
        for _ in 0..n {
            self.free.push(comp.take() & mask);
        }
        comp.release();
        self.sending -= u64::from(n);
    }

    /// Port `side`'s counters.
    pub fn stats(&self, side: usize) -> XskStats {
        let sock = &self.socks[side & 1];
        let mut s = sock.stats;
        if let Some(k) = sock.kernel_stats() {
            s.rx_dropped = k.rx_dropped;
            s.rx_ring_full = k.rx_ring_full;
            s.rx_fill_ring_empty = k.rx_fill_ring_empty_descs;
            s.rx_invalid += k.rx_invalid_descs;
            s.tx_invalid = k.tx_invalid_descs;
        }
        s
    }
}
