//! `recvmmsg(2)` and `sendmmsg(2)`: a batch of frames per system call, the
//! message headers built on the stack.
//!
//! [`PortOptions::rx_ring_frames`] 0 reads with `recvmmsg(2)` instead, into
//! [`PortOptions::batch`] slots of [`PortOptions::frame_capacity`] bytes that
//! never leave the port.
//!
//! [`PortOptions::batch`]: super::PortOptions::batch
//! [`PortOptions::frame_capacity`]: super::PortOptions::frame_capacity
//! [`PortOptions::rx_ring_frames`]: super::PortOptions::rx_ring_frames

use std::mem::{size_of, MaybeUninit};
use std::os::fd::RawFd;

use nix::errno::Errno;

use super::{TxFrame, VnetHdr, MAX_BATCH};

/// Room for the control messages of one received frame: `PACKET_AUXDATA` is
/// the only one asked for (`CMSG_SPACE(20)` is 40 bytes on 64-bit Linux).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(super) struct CmsgSpace(pub(super) [u8; 64]);

/// What the kernel said about one received message.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RxMeta {
    /// Bytes of the message (vnet header included), with `MSG_TRUNC` the
    /// length before truncation.
    pub(super) len: usize,
    pub(super) truncated: bool,
    pub(super) pkttype: u8,
    /// `tpacket_auxdata`: `(tp_status, tp_vlan_tci, tp_vlan_tpid)`.
    pub(super) aux: Option<(u32, u16, u16)>,
}

/// The receive slots: where one `recvmmsg` writes.
pub(super) struct RxSlots {
    pub(super) frames: Vec<Vec<u8>>,
    pub(super) vnet: Vec<[u8; VnetHdr::LEN]>,
    pub(super) addrs: Vec<libc::sockaddr_ll>,
    pub(super) ctrl: Vec<CmsgSpace>,
    pub(super) meta: Vec<RxMeta>,
}

impl RxSlots {
    /// One `recvmmsg` into the first `n` slots; fills `meta` for the slots
    /// written and returns how many.
    ///
    /// nix's `recvmmsg` is not used: it does not reset `msg_controllen` and
    /// `msg_namelen` between calls, and it copies every control message it
    /// does not know (`PACKET_AUXDATA` is one) into a new `Vec`, an
    /// allocation per frame. The headers here are rebuilt on the stack for
    /// each call, pointing into buffers that live in `self`.
    pub(super) fn receive(&mut self, fd: RawFd, n: usize) -> Result<usize, Errno> {
        let n = n
            .min(MAX_BATCH)
            .min(self.frames.len())
            .min(self.vnet.len())
            .min(self.addrs.len())
            .min(self.ctrl.len())
            .min(self.meta.len());
        // Only the headers used are initialised: zeroing all MAX_BATCH of
        // them (24 KiB) cost more than the call itself when a read returns a
        // frame or two.
        let mut iovs = [const { MaybeUninit::<[libc::iovec; 2]>::uninit() }; MAX_BATCH];
        let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; MAX_BATCH];
        let slots = iovs
            .iter_mut()
            .zip(hdrs.iter_mut())
            .zip(self.frames.iter_mut())
            .zip(self.vnet.iter_mut())
            .zip(self.addrs.iter_mut().zip(self.ctrl.iter_mut()))
            .take(n);
        let mut filled = 0;
        for ((((iov, hdr), frame), vnet), (addr, ctrl)) in slots {
            let iov = iov.write([
                libc::iovec {
                    iov_base: vnet.as_mut_ptr().cast(),
                    iov_len: vnet.len(),
                },
                libc::iovec {
                    iov_base: frame.as_mut_ptr().cast(),
                    iov_len: frame.len(),
                },
            ]);
            let mut h = empty_mmsghdr();
            let m = &mut h.msg_hdr;
            m.msg_name = (addr as *mut libc::sockaddr_ll).cast();
            m.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            m.msg_iov = iov.as_mut_ptr();
            m.msg_iovlen = 2;
            m.msg_control = ctrl.0.as_mut_ptr().cast();
            m.msg_controllen = size_of::<CmsgSpace>() as _;
            m.msg_flags = 0;
            hdr.write(h);
            filled += 1;
        }
        // MSG_TRUNC: a packet socket then returns the frame's full length,
        // so a frame longer than its slot is recognised, not delivered cut.
        let flags = libc::MSG_DONTWAIT | libc::MSG_TRUNC;
        // SAFETY: the first `filled` headers were written above (MaybeUninit
        // has the layout of its content, so the array is one of mmsghdr) and
        // point at iovecs, addresses and control buffers that stay alive and
        // unmoved for the call (`iovs`, `hdrs` are locals; the others are
        // owned by `self`, borrowed mutably here), with lengths equal to
        // their sizes; `filled` ≤ MAX_BATCH = hdrs.len(). The kernel reads
        // and writes only the first `filled` headers and inside those bounds.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
                filled as libc::c_uint,
                // c_int in glibc, c_uint in musl: the same bits.
                flags as _,
                std::ptr::null_mut(),
            )
        };
        let got = usize::try_from(Errno::result(r)?).unwrap_or(0).min(filled);
        for ((hdr, addr), meta) in hdrs
            .iter()
            .zip(self.addrs.iter())
            .zip(self.meta.iter_mut())
            .take(got)
        {
            // SAFETY: `got` ≤ `filled`: this header was initialised above
            // (and then updated by the kernel with valid values).
            let hdr = unsafe { hdr.assume_init_ref() };
            *meta = RxMeta {
                len: hdr.msg_len as usize,
                truncated: hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                pkttype: addr.sll_pkttype,
                aux: auxdata(&hdr.msg_hdr),
            };
        }
        Ok(got)
    }
}

/// The `PACKET_AUXDATA` control message of a received message, if any:
/// `(tp_status, tp_vlan_tci, tp_vlan_tpid)`.
fn auxdata(m: &libc::msghdr) -> Option<(u32, u16, u16)> {
    if m.msg_flags & libc::MSG_CTRUNC != 0 || m.msg_control.is_null() {
        return None;
    }
    let want = size_of::<libc::tpacket_auxdata>();
    // SAFETY: `m` is a header the kernel just filled: msg_control points at a
    // CmsgSpace owned by the port and msg_controllen (≤ its size; the kernel
    // never grows it) says how much of it holds control messages.
    // CMSG_FIRSTHDR/CMSG_NXTHDR stay within that length and return null at its
    // end; the data of a message is read only when its cmsg_len covers a whole
    // tpacket_auxdata, unaligned because the buffer promises no alignment for
    // the payload type.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(m);
        while !c.is_null() {
            let h = &*c;
            if h.cmsg_level == libc::SOL_PACKET
                && h.cmsg_type == libc::PACKET_AUXDATA
                && h.cmsg_len as usize >= libc::CMSG_LEN(want as libc::c_uint) as usize
            {
                let aux: libc::tpacket_auxdata =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                return Some((aux.tp_status, aux.tp_vlan_tci, aux.tp_vlan_tpid));
            }
            c = libc::CMSG_NXTHDR(m, c);
        }
    }
    None
}

/// One `sendmmsg` of `frames`, each preceded by its virtio_net_hdr in
/// `headers`. Returns how many the kernel took.
///
/// nix's `sendmmsg` is not used: the count it returns can only be read by
/// iterating its results, which reads address slots that a send never fills.
pub(super) fn send_mmsg(
    fd: RawFd,
    frames: &[TxFrame<'_>],
    headers: &[[u8; VnetHdr::LEN]; MAX_BATCH],
) -> Result<usize, Errno> {
    // Only the headers used are initialised (see RxSlots::receive).
    let mut iovs = [const { MaybeUninit::<[libc::iovec; 2]>::uninit() }; MAX_BATCH];
    let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; MAX_BATCH];
    let mut n = 0;
    for (((iov, hdr), frame), header) in iovs
        .iter_mut()
        .zip(hdrs.iter_mut())
        .zip(frames)
        .zip(headers.iter())
    {
        // The kernel only reads through these pointers; iovec has no const
        // variant.
        let iov = iov.write([
            libc::iovec {
                iov_base: header.as_ptr().cast_mut().cast(),
                iov_len: header.len(),
            },
            libc::iovec {
                iov_base: frame.data.as_ptr().cast_mut().cast(),
                iov_len: frame.data.len(),
            },
        ]);
        // No address: the socket is bound, so frames go to its interface.
        let mut h = empty_mmsghdr();
        h.msg_hdr.msg_iov = iov.as_mut_ptr();
        h.msg_hdr.msg_iovlen = 2;
        hdr.write(h);
        n += 1;
    }
    // SAFETY: the first `n` headers were written above (MaybeUninit has the
    // layout of its content) and point at iovecs (locals) that point at
    // header bytes and frame data borrowed for the whole call, with their
    // exact lengths; the kernel reads them and writes only msg_len in the
    // first `n` headers.
    let r = unsafe {
        libc::sendmmsg(
            fd,
            hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
            n as libc::c_uint,
            // c_int in glibc, c_uint in musl: the same bits.
            libc::MSG_DONTWAIT as _,
        )
    };
    let sent = usize::try_from(Errno::result(r)?).unwrap_or(0).min(n);
    if sent == 0 && n > 0 {
        // Not expected (an error is returned instead); never loop on it.
        return Err(Errno::EAGAIN);
    }
    Ok(sent)
}

fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is a C struct of integers and raw pointers, for which
    // all-zero bytes are a valid value (null pointers, zero lengths).
    unsafe { std::mem::zeroed() }
}

pub(super) fn empty_sockaddr_ll() -> libc::sockaddr_ll {
    libc::sockaddr_ll {
        sll_family: 0,
        sll_protocol: 0,
        sll_ifindex: 0,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    }
}
