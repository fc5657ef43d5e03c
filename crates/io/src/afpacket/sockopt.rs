//! Packet-socket options: the one `setsockopt(2)` call that the socket and
//! the receive ring both make.

use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;

/// `setsockopt(fd, SOL_PACKET, name, val)`: nix has no wrappers for the
/// packet socket options.
pub(super) fn set_packet_opt<T>(fd: &OwnedFd, name: libc::c_int, val: &T) -> Result<(), Errno> {
    // SAFETY: `val` is a live, initialised T and the length given is its
    // size; the kernel copies that many bytes and keeps no pointer.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            name,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    Errno::result(r).map(drop)
}
