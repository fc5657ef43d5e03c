//! AF_XDP ports: the two ends of `dummynet run --bridge IF_A IF_B --xdp`.
//!
//! An [`XdpPorts`] is two `AF_XDP` sockets, one on receive queue 0 of each
//! interface, sharing one UMEM: a region of this process's memory cut in
//! equal chunks, each holding one frame. The kernel writes arriving frames
//! into chunks the bridge lends it (the *fill* ring), says which on the
//! *rx* ring, and sends chunks the bridge names on the *tx* ring, giving
//! them back on the *completion* ring. Because both sockets use the same
//! UMEM, a frame read on one port is sent out of the other from the chunk
//! it arrived in: with a driver that does zero-copy, no byte of it is ever
//! copied; in copy mode (veth, or a driver without zero-copy support) the
//! kernel copies it once in and once out, and the bridge still does not.
//!
//! While the engine holds a frame in a pipe, the frame stays in its chunk:
//! an [`XdpFrame`] owns one chunk, reads and writes its bytes, and goes
//! back to the bridge's free list when sent or dropped. A UMEM whose
//! chunks all sit in pipes has none left to lend, so the kernel drops what
//! arrives (counted in [`XskStats::rx_fill_ring_empty`]); nothing waits.
//!
//! # The XDP program
//!
//! Frames reach an AF_XDP socket only through an XDP program that
//! redirects them to it. This module carries its own, 23 BPF
//! instructions assembled here and loaded with `bpf(2)` (no compiler, no
//! object file, no libbpf): `bpf_redirect_map(xsks, rx_queue_index,
//! XDP_PASS)` for every frame that fits a chunk, IP or not (the bridge
//! forwards ARP and the rest itself, as the AF_PACKET bridge does). A
//! frame longer than a chunk, or on a queue without a socket, is passed
//! to the kernel's stack (`XDP_PASS`); in generic XDP so is every TCP
//! frame ([`Attach::Generic`]).
//!
//! # Driver or generic XDP
//!
//! [`Attach::Driver`] runs the program in the driver: the only way to
//! zero-copy. On a veth it has a price: attaching a driver XDP program to
//! a veth makes the kernel clear GSO from its peer (`veth_xdp_set`,
//! `veth_fix_features`), so the far side's TCP arrives in MTU-sized
//! segments, one trip each. [`Attach::Generic`] runs it on socket
//! buffers, after the driver: the peer keeps its GSO, and what the program
//! passes (super-packets, and TCP, so that no TCP flow is split between
//! two ways into the bridge, which would reorder it) an AF_PACKET socket
//! on the port reads whole, beside the AF_XDP one (the caller opens it). The program is attached with a BPF link
//! (`BPF_LINK_CREATE`, Linux 5.9), which the kernel detaches when the last
//! descriptor of the link closes, so a daemon that dies leaves no program
//! behind.
//!
//! # Parts
//!
//! `ports` is the bridge's pair ([`XdpPorts`]), `xsk` one socket on one
//! queue, `umem` the shared memory and the frames in it, `ring` the four
//! rings a socket maps, `bpf` the program and its attachment, `checksum`
//! the checksums a veth peer left unfinished.
//!
//! # Limits
//!
//! - One queue: the socket serves receive queue 0, so an interface with
//!   more receive queues is refused ([`XdpError::Queues`]); `ethtool -L IF
//!   combined 1` makes one. veth pairs have one unless made with more.
//! - Frames fit a chunk: in driver XDP, an interface whose MTU would make
//!   a frame longer than a chunk minus the kernel's headroom is refused
//!   ([`XdpError::Mtu`]); generic XDP passes such frames to the kernel.
//! - Checksums: XDP sees a frame as its sender's stack left it, and a
//!   veth peer that offloads checksums (the default) leaves TCP and UDP
//!   checksums unfinished, with nothing in the frame to say so; sent on
//!   as they are, the far side's stack drops them. So every TCP and UDP
//!   frame read gets its checksum computed ([`finish_checksum`]): a few
//!   hundred nanoseconds for a full-size frame, nothing for a small one.
//!   A frame that arrived with a wrong checksum leaves with a right one.

#![allow(unsafe_code)]

mod bpf;
mod checksum;
mod ports;
mod ring;
mod umem;
mod xsk;

use nix::errno::Errno;

pub use checksum::finish_checksum;
pub use ports::XdpPorts;
pub use umem::XdpFrame;
pub use xsk::{driver_name, XskStats};

/// What went wrong opening or using the ports.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// No interface by that name in the caller's network namespace.
    #[error("no interface named {ifname:?} in this thread's network namespace ({errno})")]
    NoSuchInterface { ifname: String, errno: Errno },
    /// An option is out of range.
    #[error("AF_XDP option {name} = {value} is out of range: allowed {allowed}")]
    BadOption {
        name: &'static str,
        value: u64,
        allowed: &'static str,
    },
    /// The interface has more receive queues than the one socket serves.
    #[error(
        "{ifname} has {queues} receive queues; the AF_XDP bridge serves queue 0 only \
         (`ethtool -L {ifname} combined 1` leaves one)"
    )]
    Queues { ifname: String, queues: u32 },
    /// The interface's MTU makes frames longer than a UMEM chunk holds.
    #[error(
        "{ifname} has MTU {mtu}: its frames would not fit the {room} bytes a UMEM chunk \
         leaves them (MTU {max} at most)"
    )]
    Mtu {
        ifname: String,
        mtu: u32,
        room: u32,
        max: u32,
    },
    /// A system call failed.
    #[error("{what}: {op} failed: {errno}{hint}")]
    Sys {
        what: String,
        op: &'static str,
        errno: Errno,
        hint: &'static str,
    },
}

fn sys(what: &str, op: &'static str, errno: Errno) -> XdpError {
    let hint = match errno {
        Errno::EAFNOSUPPORT => " (the kernel has no AF_XDP: CONFIG_XDP_SOCKETS)",
        Errno::EPERM => " (AF_XDP and BPF need CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW)",
        Errno::ENOSYS => " (the kernel has no bpf(2))",
        Errno::EBUSY => " (another XDP program or socket holds the interface's queue)",
        _ => "",
    };
    XdpError::Sys {
        what: what.to_string(),
        op,
        errno,
        hint,
    }
}

/// Sizes of the UMEM and the rings.
#[derive(Debug, Clone)]
pub struct XdpOptions {
    /// Chunks in the UMEM: frames held at once, in the kernel's rings and
    /// in pipes together. A power of two, 64 to 2^20.
    pub frames: u32,
    /// Bytes per chunk: 2048 or 4096.
    pub frame_size: u32,
    /// Slots of each ring (fill, rx, tx, completion) of each socket: a
    /// power of two, 64 to 16384, at most `frames / 4`.
    pub ring: u32,
    /// Try zero-copy first (falls back to copy mode when the driver has
    /// none). Driver XDP only.
    pub zero_copy: bool,
    /// Where the XDP program runs: in the driver (generic XDP if the
    /// driver has none), or in the kernel's generic XDP, after the socket
    /// buffer is built ([`Attach`]).
    pub attach: Attach,
}

/// Where the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// In the driver (`XDP_FLAGS_DRV_MODE`), the kernel's generic XDP if
    /// the driver has no XDP: the only way to zero-copy. On a veth this
    /// makes the peer stop building super-packets (see the module docs).
    Driver,
    /// In the kernel's generic XDP (`XDP_FLAGS_SKB_MODE`), on socket
    /// buffers: always copy mode, but a veth's peer keeps its GSO, and
    /// frames longer than a chunk are passed to the kernel's stack (where
    /// an AF_PACKET socket can read them whole) instead of refused.
    Generic,
}

impl Default for XdpOptions {
    fn default() -> Self {
        XdpOptions {
            frames: 16384,
            frame_size: 2048,
            ring: 2048,
            zero_copy: true,
            attach: Attach::Driver,
        }
    }
}

/// Room the kernel keeps before a frame in its chunk (`XDP_PACKET_HEADROOM`).
const KERNEL_HEADROOM: u32 = 256;

/// How the ports move frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// The driver runs the XDP program (`false`: the kernel's generic XDP,
    /// after the socket buffer is built).
    pub driver: bool,
    /// Frames go between the NIC and the UMEM with no copy.
    pub zero_copy: bool,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} XDP, {}",
            if self.driver { "driver" } else { "generic" },
            if self.zero_copy {
                "zero-copy"
            } else {
                "copy mode"
            }
        )
    }
}

fn check_options(o: &XdpOptions) -> Result<(), XdpError> {
    if !o.frames.is_power_of_two() || !(64..=1 << 20).contains(&o.frames) {
        return Err(XdpError::BadOption {
            name: "frames",
            value: o.frames.into(),
            allowed: "a power of two from 64 to 1048576",
        });
    }
    if o.frame_size != 2048 && o.frame_size != 4096 {
        return Err(XdpError::BadOption {
            name: "frame_size",
            value: o.frame_size.into(),
            allowed: "2048 or 4096",
        });
    }
    if !o.ring.is_power_of_two() || !(64..=16384).contains(&o.ring) || o.ring > o.frames / 4 {
        return Err(XdpError::BadOption {
            name: "ring",
            value: o.ring.into(),
            allowed: "a power of two from 64 to 16384, at most a quarter of the frames",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_out_of_range_are_refused() {
        let bad = XdpOptions {
            frames: 1000,
            ..XdpOptions::default()
        };
        assert!(matches!(
            check_options(&bad),
            Err(XdpError::BadOption { name: "frames", .. })
        ));
        let bad = XdpOptions {
            frames: 256,
            ring: 128,
            ..XdpOptions::default()
        };
        assert!(matches!(
            check_options(&bad),
            Err(XdpError::BadOption { name: "ring", .. })
        ));
        assert!(check_options(&XdpOptions::default()).is_ok());
    }
}
