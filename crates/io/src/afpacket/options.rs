//! How a port is opened, and the checks made before any system call.

use super::PortError;

/// Most frames one system call moves, and the largest [`PortOptions::batch`].
/// The message headers for one call live on the stack (about 24 KiB at 256).
pub const MAX_BATCH: usize = 256;

/// Default slot size: a 64 KiB super-packet plus its Ethernet and VLAN
/// headers. veth and most NICs cap GSO packets at 64 KiB (`gso_max_size`).
pub const DEFAULT_FRAME_CAPACITY: usize = 64 * 1024 + 64;

/// Smallest and largest [`PortOptions::frame_capacity`] accepted.
const FRAME_CAPACITY_RANGE: (usize, usize) = (64, 1 << 20);

/// Default [`PortOptions::rx_ring_frames`]: 4096 slots of 2 KiB, 8 MiB per
/// port, about 10 ms of 64-byte frames at 400 kpps before the kernel drops.
pub const DEFAULT_RX_RING_FRAMES: usize = 4096;

/// Default [`PortOptions::rx_ring_frame_size`]: a 1500-byte-MTU frame with a
/// VLAN tag and the 76 bytes of slot header before it fits; larger frames
/// take the `TP_STATUS_COPY` path.
pub const DEFAULT_RX_RING_FRAME_SIZE: usize = 2048;

/// Smallest and largest [`PortOptions::rx_ring_frame_size`] accepted.
const RING_FRAME_SIZE_RANGE: (usize, usize) = (256, 256 * 1024);

/// Most slots and most bytes a ring may have.
const RING_MAX_FRAMES: usize = 1 << 20;

const RING_MAX_BYTES: usize = 1 << 30;

/// How a [`Port`](super::Port) is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortOptions {
    /// Deliver each frame with its [`VnetHdr`](super::VnetHdr), so GSO/GRO super-packets and
    /// unfinished checksums cross the bridge intact and are finished by the
    /// kernel on the way out. When false, received frames are plain: the port
    /// finishes their checksums itself. Sending takes a header either way.
    pub vnet_hdr: bool,
    /// Most frames one [`Port::recv_batch`](super::Port::recv_batch) returns and one `sendmmsg` (or
    /// `recvmmsg`) moves, 1 to [`MAX_BATCH`].
    pub batch: usize,
    /// The longest frame delivered whole; longer ones are dropped and counted
    /// ([`PortStats::rx_truncated`](super::PortStats::rx_truncated)). It is the size of each `recvmmsg` slot
    /// and, with a ring, of the one slot that takes `TP_STATUS_COPY` frames.
    pub frame_capacity: usize,
    /// Bytes asked for `SO_RCVBUF` and `SO_SNDBUF` (the `FORCE` variants when
    /// allowed, which ignore `net.core.rmem_max`/`wmem_max`). 0 keeps the
    /// kernel defaults.
    pub socket_buffer: usize,
    /// Put the interface in promiscuous mode while the port is open. A bridge
    /// needs it: frames addressed to hosts on the other side must be seen.
    pub promiscuous: bool,
    /// Slots in the memory-mapped `TPACKET_V2` receive ring (see the module
    /// documentation), rounded up to fill whole pages. 0: no ring, frames are
    /// read with `recvmmsg`. Default [`DEFAULT_RX_RING_FRAMES`].
    pub rx_ring_frames: usize,
    /// Bytes of one ring slot, its 76 bytes of header included: frames longer
    /// than `rx_ring_frame_size - 76` come whole through `recvmsg` instead
    /// (`TP_STATUS_COPY`). A multiple of 16, 256 to 256 KiB. Default
    /// [`DEFAULT_RX_RING_FRAME_SIZE`].
    pub rx_ring_frame_size: usize,
}

impl Default for PortOptions {
    fn default() -> Self {
        PortOptions {
            vnet_hdr: false,
            batch: 64,
            frame_capacity: DEFAULT_FRAME_CAPACITY,
            socket_buffer: 4 << 20,
            promiscuous: true,
            rx_ring_frames: DEFAULT_RX_RING_FRAMES,
            rx_ring_frame_size: DEFAULT_RX_RING_FRAME_SIZE,
        }
    }
}

pub(super) fn check_name(ifname: &str) -> Result<(), PortError> {
    let why = if ifname.is_empty() {
        Some("empty")
    } else if ifname.len() >= libc::IFNAMSIZ {
        Some("longer than 15 bytes (IFNAMSIZ)")
    } else if ifname
        .bytes()
        .any(|b| b == 0 || b == b'/' || b.is_ascii_whitespace())
    {
        Some("contains NUL, '/' or white space")
    } else if ifname == "." || ifname == ".." {
        Some("'.' and '..' are not interface names")
    } else {
        None
    };
    match why {
        Some(why) => Err(PortError::BadName {
            ifname: ifname.to_owned(),
            why,
        }),
        None => Ok(()),
    }
}

pub(super) fn check_options(opts: &PortOptions) -> Result<(), PortError> {
    if !(1..=MAX_BATCH).contains(&opts.batch) {
        return Err(PortError::BadOption {
            name: "batch",
            value: opts.batch,
            allowed: "1 to 256 frames",
        });
    }
    let (lo, hi) = FRAME_CAPACITY_RANGE;
    if !(lo..=hi).contains(&opts.frame_capacity) {
        return Err(PortError::BadOption {
            name: "frame_capacity",
            value: opts.frame_capacity,
            allowed: "64 bytes to 1 MiB",
        });
    }
    if opts.rx_ring_frames > 0 {
        let (lo, hi) = RING_FRAME_SIZE_RANGE;
        let size = opts.rx_ring_frame_size;
        if !(lo..=hi).contains(&size) || !size.is_multiple_of(16) {
            return Err(PortError::BadOption {
                name: "rx_ring_frame_size",
                value: size,
                allowed: "a multiple of 16 from 256 bytes to 256 KiB",
            });
        }
        if opts.rx_ring_frames > RING_MAX_FRAMES
            || opts.rx_ring_frames.saturating_mul(size) > RING_MAX_BYTES
        {
            return Err(PortError::BadOption {
                name: "rx_ring_frames",
                value: opts.rx_ring_frames,
                allowed: "0 (no ring) to 1048576 slots, and at most 1 GiB of ring",
            });
        }
    }
    if opts.socket_buffer > i32::MAX as usize / 2 {
        return Err(PortError::BadOption {
            name: "socket_buffer",
            value: opts.socket_buffer,
            allowed: "0 (kernel default) to 1 GiB",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afpacket::ring::RingGeometry;
    use crate::afpacket::Port;

    #[test]
    fn options_and_names_are_checked_before_any_syscall() {
        let bad_batch = PortOptions {
            batch: 0,
            ..PortOptions::default()
        };
        assert!(matches!(
            Port::open("lo", bad_batch),
            Err(PortError::BadOption { name: "batch", .. })
        ));
        let too_many = PortOptions {
            batch: MAX_BATCH + 1,
            ..PortOptions::default()
        };
        assert!(matches!(
            Port::open("lo", too_many),
            Err(PortError::BadOption { name: "batch", .. })
        ));
        let tiny = PortOptions {
            frame_capacity: 10,
            ..PortOptions::default()
        };
        assert!(matches!(
            Port::open("lo", tiny),
            Err(PortError::BadOption {
                name: "frame_capacity",
                ..
            })
        ));
        for name in ["", "a-name-that-is-too-long", "a/b", "a b", "x\0y", ".."] {
            let r = Port::open(name, PortOptions::default());
            assert!(
                matches!(r, Err(PortError::BadName { .. })),
                "{name:?}: {r:?}"
            );
        }
    }

    #[test]
    fn ring_options_are_checked_before_any_syscall() {
        for (frames, size) in [(16, 100), (16, 2050), (16, 512 * 1024), (1 << 21, 2048)] {
            let opts = PortOptions {
                rx_ring_frames: frames,
                rx_ring_frame_size: size,
                ..PortOptions::default()
            };
            assert!(
                matches!(Port::open("lo", opts), Err(PortError::BadOption { .. })),
                "{frames} × {size}"
            );
        }
        // No ring: the slot size is not looked at.
        let off = PortOptions {
            rx_ring_frames: 0,
            rx_ring_frame_size: 1,
            ..PortOptions::default()
        };
        assert_eq!(RingGeometry::new(&off, 4096), None);
        assert!(check_options(&off).is_ok());
    }
}
