//! What goes wrong on a port, and the `errno` each error comes from.

use std::io;
use std::sync::Arc;

use nix::errno::Errno;

use super::{Port, VnetHdr};

/// What went wrong on a port, and where.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The interface name cannot name a Linux interface.
    #[error("interface name {ifname:?} is not valid: {why}")]
    BadName { ifname: String, why: &'static str },
    /// No interface by that name in the caller's network namespace.
    #[error("no interface named {ifname:?} in this thread's network namespace ({errno})")]
    NoSuchInterface { ifname: String, errno: Errno },
    /// A [`PortOptions`](super::PortOptions) field is out of range.
    #[error("port option {name} = {value} is out of range: allowed {allowed}")]
    BadOption {
        name: &'static str,
        value: usize,
        allowed: &'static str,
    },
    /// A system call failed while opening or using the port.
    #[error("{ifname}: {op} failed: {errno}")]
    Sys {
        ifname: Arc<str>,
        op: &'static str,
        errno: Errno,
    },
    /// The socket's send buffer is full (`EAGAIN`): wait for `POLLOUT`, or drop.
    #[error("{ifname}: send buffer full (EAGAIN); wait for POLLOUT or count a drop")]
    WouldBlock { ifname: Arc<str> },
    /// The interface's queue or the kernel had no room (`ENOBUFS`).
    #[error("{ifname}: no buffer space in the kernel or the device queue (ENOBUFS)")]
    NoBuffers { ifname: Arc<str> },
    /// The frame is longer than the interface takes (`EMSGSIZE`): MTU plus
    /// link header, unless it is a GSO frame sent with a [`VnetHdr`].
    #[error("{ifname}: frame of {len} bytes is larger than the interface accepts (EMSGSIZE): longer than its MTU plus the link header, or a super-packet sent without its VnetHdr")]
    TooLarge { ifname: Arc<str>, len: usize },
    /// The kernel refused the frame or its [`VnetHdr`] (`EINVAL`).
    #[error("{ifname}: kernel refused a frame of {len} bytes with {vnet:?} (EINVAL): bad GSO type, gso_size or checksum offsets")]
    Refused {
        ifname: Arc<str>,
        len: usize,
        vnet: Option<VnetHdr>,
    },
    /// The interface went down or away (`ENETDOWN`, `ENXIO`, `ENODEV`).
    #[error("{ifname}: interface is down or gone ({errno})")]
    InterfaceDown { ifname: Arc<str>, errno: Errno },
}

/// A [`Port::send_batch`] that stopped early: `frames[..sent]` were accepted
/// by the kernel, `frames[sent]` was refused for `error`, and the frames after
/// it were not tried. The caller decides: retry later, or count drops.
#[derive(Debug, thiserror::Error)]
#[error("sent {sent} frame(s), then: {error}")]
pub struct SendError {
    /// Frames accepted before the refusal.
    pub sent: usize,
    /// Why `frames[sent]` was refused.
    #[source]
    pub error: PortError,
}

impl Port {
    pub(super) fn error(&self, op: &'static str, errno: Errno) -> PortError {
        match errno {
            Errno::ENETDOWN | Errno::ENXIO | Errno::ENODEV => PortError::InterfaceDown {
                ifname: self.ifname.clone(),
                errno,
            },
            _ => PortError::Sys {
                ifname: self.ifname.clone(),
                op,
                errno,
            },
        }
    }
}

impl From<PortError> for io::Error {
    fn from(e: PortError) -> io::Error {
        let kind = match &e {
            PortError::WouldBlock { .. } => io::ErrorKind::WouldBlock,
            PortError::NoSuchInterface { .. } => io::ErrorKind::NotFound,
            PortError::BadName { .. } | PortError::BadOption { .. } => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}
