//! BPF: the XSK map, the program, the link.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;

use super::{sys, Attach, XdpError};

const BPF_MAP_CREATE: libc::c_long = 0;

const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;

const BPF_PROG_LOAD: libc::c_long = 5;

const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;

const BPF_PROG_TYPE_XDP: u32 = 6;

const BPF_XDP: u32 = 37;

const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;

const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

const BPF_FUNC_REDIRECT_MAP: i32 = 51;

const XDP_PASS: i32 = 2;

/// `union bpf_attr`, as bytes: each command fills the fields it reads.
#[repr(C, align(8))]
struct BpfAttr([u8; 128]);

impl BpfAttr {
    fn new() -> BpfAttr {
        BpfAttr([0; 128])
    }
    fn u32_at(&mut self, at: usize, v: u32) -> &mut Self {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64_at(&mut self, at: usize, v: u64) -> &mut Self {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

/// `bpf(cmd, attr)`: a new descriptor for the commands that make one.
fn bpf(cmd: libc::c_long, attr: &mut BpfAttr) -> Result<libc::c_long, Errno> {
    // SAFETY: `attr` is a live, 128-byte `union bpf_attr` whose pointer
    // fields (set by the callers) point at memory that outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_uint,
        )
    };
    Errno::result(r)
}

fn bpf_fd(cmd: libc::c_long, attr: &mut BpfAttr) -> Result<OwnedFd, Errno> {
    let fd = RawFd::try_from(bpf(cmd, attr)?).map_err(|_| Errno::EBADF)?;
    // SAFETY: the kernel just made this descriptor for us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One BPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0xf),
        off,
        imm,
    }
}

/// ```c
/// if (ctx->data + room < ctx->data_end) return XDP_PASS;
/// if (tcp_to_kernel && is_tcp_over_ip(ctx)) return XDP_PASS;
/// return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
/// ```
/// A frame longer than `room` (what a chunk holds) could not be written
/// into the UMEM, and redirected it would be dropped: passed, the
/// kernel's stack gets it, and in generic XDP an AF_PACKET socket on the
/// port reads it whole. (In driver mode no frame is that long: the MTU
/// was checked.) With `tcp_to_kernel`, every TCP frame over IPv4 or IPv6
/// (untagged) is passed too, whatever its length: a TCP flow then never
/// has its segments split between two ways into the bridge, whose order
/// against each other nothing keeps (its super-packets must take the
/// kernel's way), and which TCP takes for loss.
fn redirect_program(map_fd: RawFd, room: u32, tcp_to_kernel: bool) -> [Insn; 23] {
    let room = i32::try_from(room).unwrap_or(i32::MAX);
    // The EtherType as a 16-bit load of the frame reads it on this machine.
    let ipv4 = i32::from(u16::from_ne_bytes([0x08, 0x00]));
    let ipv6 = i32::from(u16::from_ne_bytes([0x86, 0xdd]));
    // A protocol number no byte holds: the TCP test never passes.
    let tcp = if tcp_to_kernel { 6 } else { 0x100 };
    [
        // 0: r2 = ctx->data, r3 = ctx->data_end (struct xdp_md, offsets 0, 4)
        insn(0x61, 2, 1, 0, 0),
        insn(0x61, 3, 1, 4, 0),
        // 2: r4 = r2 + room; if r3 > r4 goto pass (21)
        insn(0xbf, 4, 2, 0, 0),
        insn(0x07, 4, 0, 0, room),
        insn(0x2d, 3, 4, 16, 0),
        // 5: r4 = r2 + 34 (Ethernet and IPv4 headers); if r4 > r3 goto
        // redirect (15): too short to be TCP
        insn(0xbf, 4, 2, 0, 0),
        insn(0x07, 4, 0, 0, 34),
        insn(0x2d, 4, 3, 7, 0),
        // 8: r5 = EtherType; IPv4 goto 13; not IPv6 goto redirect (15)
        insn(0x69, 5, 2, 12, 0),
        insn(0x15, 5, 0, 3, ipv4),
        insn(0x55, 5, 0, 4, ipv6),
        // 11: r5 = IPv6 next header; goto 14
        insn(0x71, 5, 2, 20, 0),
        insn(0x05, 0, 0, 1, 0),
        // 13: r5 = IPv4 protocol
        insn(0x71, 5, 2, 23, 0),
        // 14: if r5 == tcp goto pass (21)
        insn(0x15, 5, 0, 6, tcp),
        // 15: redirect: r2 = ctx->rx_queue_index (offset 16)
        insn(0x61, 2, 1, 16, 0),
        // r1 = the map (ld_imm64 with BPF_PSEUDO_MAP_FD: two slots)
        insn(0x18, 1, 1, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS: what happens when the queue has no socket
        insn(0xb7, 3, 0, 0, XDP_PASS),
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        insn(0x95, 0, 0, 0, 0),
        // 21: pass: r0 = XDP_PASS
        insn(0xb7, 0, 0, 0, XDP_PASS),
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// An XSK map holding one socket at key 0, and the program attached to
/// one interface. Dropping it detaches the program.
pub(super) struct Attached {
    _map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    pub(super) driver: bool,
}

pub(super) fn attach(
    ifname: &str,
    ifindex: u32,
    xsk: &OwnedFd,
    how: Attach,
    room: u32,
) -> Result<Attached, XdpError> {
    let mut attr = BpfAttr::new();
    attr.u32_at(0, BPF_MAP_TYPE_XSKMAP)
        .u32_at(4, 4)
        .u32_at(8, 4)
        .u32_at(12, 1);
    let map = bpf_fd(BPF_MAP_CREATE, &mut attr)
        .map_err(|e| sys(ifname, "bpf(BPF_MAP_CREATE xskmap)", e))?;
    let key: u32 = 0;
    let value = u32::try_from(xsk.as_raw_fd()).map_err(|_| sys(ifname, "xskmap", Errno::EBADF))?;
    let mut attr = BpfAttr::new();
    attr.u32_at(0, map.as_raw_fd() as u32)
        .u64_at(8, &key as *const u32 as u64)
        .u64_at(16, &value as *const u32 as u64)
        .u64_at(24, 0);
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map_err(|e| sys(ifname, "bpf(BPF_MAP_UPDATE_ELEM)", e))?;

    let prog = redirect_program(map.as_raw_fd(), room, how == Attach::Generic);
    let license = c"BSD";
    let mut log = vec![0u8; 4096];
    let mut attr = BpfAttr::new();
    attr.u32_at(0, BPF_PROG_TYPE_XDP)
        .u32_at(4, prog.len() as u32)
        .u64_at(8, prog.as_ptr() as u64)
        .u64_at(16, license.as_ptr() as u64)
        .u32_at(24, 1)
        .u32_at(28, log.len() as u32)
        .u64_at(32, log.as_mut_ptr() as u64)
        .u32_at(68, BPF_XDP);
    attr.0[48..48 + 11].copy_from_slice(b"dummynet_xs");
    let prog = bpf_fd(BPF_PROG_LOAD, &mut attr).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
        XdpError::Sys {
            what: format!("{ifname}: XDP program refused by the verifier: {text}"),
            op: "bpf(BPF_PROG_LOAD)",
            errno: e,
            hint: "",
        }
    })?;
    let modes: &[u32] = match how {
        Attach::Driver => &[XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE],
        Attach::Generic => &[XDP_FLAGS_SKB_MODE],
    };
    let mut last = Errno::EINVAL;
    for &flags in modes {
        let mut attr = BpfAttr::new();
        attr.u32_at(0, prog.as_raw_fd() as u32)
            .u32_at(4, ifindex)
            .u32_at(8, BPF_XDP)
            .u32_at(12, flags);
        match bpf_fd(BPF_LINK_CREATE, &mut attr) {
            Ok(link) => {
                return Ok(Attached {
                    _map: map,
                    _prog: prog,
                    _link: link,
                    driver: flags == XDP_FLAGS_DRV_MODE,
                })
            }
            Err(e) => last = e,
        }
    }
    Err(sys(ifname, "bpf(BPF_LINK_CREATE xdp)", last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_redirects_by_queue_and_passes_the_rest() {
        let p = redirect_program(7, 1792, true);
        // Where a jump at `at` lands.
        let to = |at: usize| at + 1 + p[at].off as usize;
        assert_eq!(p[3].imm, 1792, "a chunk's room");
        assert_eq!((p[4].code, to(4)), (0x2d, 21), "longer: pass");
        assert_eq!((p[7].code, to(7)), (0x2d, 15), "short: redirect");
        assert_eq!(to(9), 13, "IPv4");
        assert_eq!(to(10), 15, "neither IPv4 nor IPv6: redirect");
        assert_eq!(to(12), 14);
        assert_eq!(
            (p[11].off, p[13].off),
            (14 + 6, 14 + 9),
            "IPv6, IPv4 protocol"
        );
        assert_eq!((p[14].imm, to(14)), (6, 21), "TCP: pass");
        assert_eq!(p[15].off, 16, "rx_queue_index");
        assert_eq!(p[16].imm, 7, "the map's descriptor");
        assert_eq!(p[16].regs, 0x11, "BPF_PSEUDO_MAP_FD into r1");
        assert_eq!(p[18].imm, XDP_PASS);
        assert_eq!(p[19].imm, BPF_FUNC_REDIRECT_MAP);
        assert_eq!(p[20].code, 0x95, "exit");
        assert_eq!((p[21].code, p[21].imm), (0xb7, XDP_PASS));
        assert_eq!(p[22].code, 0x95, "exit");
        let d = redirect_program(7, 1792, false);
        assert!(d[14].imm > 255, "driver mode: TCP is redirected too");
    }
}
