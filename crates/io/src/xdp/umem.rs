//! The UMEM and the frames in it.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use nix::errno::Errno;

use super::{sys, XdpError};

/// The UMEM's memory, shared by the ports and by every [`XdpFrame`].
pub(super) struct Area {
    pub(super) base: NonNull<u8>,
    pub(super) len: usize,
    /// Chunks of frames dropped without being handed back
    /// ([`XdpFrame`]'s `Drop`): the ports take them back.
    pub(super) strays: Mutex<Vec<u64>>,
    pub(super) stray_count: AtomicUsize,
}

// SAFETY: the area is plain bytes. Each chunk is reached only through the
// one XdpFrame that owns it, or by the ports while it is on their free
// list; the stray list is behind a mutex.
unsafe impl Send for Area {}

// SAFETY: as above: shared references to the area give no access to its
// bytes, only XdpFrame (exclusively owning its chunk) does.
unsafe impl Sync for Area {}

impl Area {
    pub(super) fn new(len: usize) -> Result<Area, XdpError> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched. The result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("UMEM", "mmap", Errno::last()));
        }
        let base =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| sys("UMEM", "mmap", Errno::EINVAL))?;
        Ok(Area {
            base,
            len,
            strays: Mutex::new(Vec::new()),
            stray_count: AtomicUsize::new(0),
        })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no XdpFrame is
        // left (each holds the Arc this is the last of), and the kernel
        // pins the pages it registered for as long as it needs them.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// One frame in the UMEM: owns its chunk until it is sent, recycled or
/// dropped (a dropped frame's chunk goes back to the ports too).
pub struct XdpFrame {
    pub(super) area: Arc<Area>,
    /// Where the frame's first byte is, from the UMEM's start.
    pub(super) addr: u64,
    pub(super) len: u32,
}

impl std::fmt::Debug for XdpFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "XdpFrame {{ addr: {:#x}, len: {} }}",
            self.addr, self.len
        )
    }
}

impl XdpFrame {
    /// Bytes of its chunk before the frame: the kernel's headroom (256)
    /// for every frame the ports make.
    pub fn headroom(&self, frame_size: u32) -> u64 {
        self.addr % u64::from(frame_size.max(1))
    }

    /// Gives up the chunk without sending it to the stray list: the caller
    /// puts it on a ring or the free list.
    pub(super) fn into_addr(self) -> (Arc<Area>, u64) {
        let me = ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again, so the Arc is moved
        // out exactly once.
        let area = unsafe { std::ptr::read(&me.area) };
        (area, me.addr)
    }
}

impl std::ops::Deref for XdpFrame {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `addr + len` was checked to lie inside the area when the
        // frame was made, the area lives as long as `self.area`, and this
        // frame owns its chunk: nothing else writes it meanwhile (the
        // kernel only writes chunks on the fill ring).
        unsafe {
            std::slice::from_raw_parts(
                self.area.base.as_ptr().add(self.addr as usize),
                self.len as usize,
            )
        }
    }
}

impl std::ops::DerefMut for XdpFrame {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` makes this the only
        // reference to the chunk's bytes.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.area.base.as_ptr().add(self.addr as usize),
                self.len as usize,
            )
        }
    }
}

impl Drop for XdpFrame {
    fn drop(&mut self) {
        // Rare: the engine let go of a frame without handing it back (a
        // shutdown, a packet dropped where no backend sees it).
        give_back(&self.area, self.addr);
    }
}

/// Puts a frame's chunk on its UMEM's stray list, for its ports to take
/// back: for a frame dropped, or handed to ports of another UMEM.
pub(super) fn give_back(area: &Area, addr: u64) {
    if let Ok(mut strays) = area.strays.lock() {
        strays.push(addr);
        area.stray_count.fetch_add(1, Ordering::Relaxed);
    }
}
