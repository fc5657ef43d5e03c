//! Rings: the four a socket maps from the kernel.

use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use nix::errno::Errno;

use super::{sys, XdpError};

/// One of a socket's four rings, mapped from the kernel: a power-of-two
/// array of `T` with a producer and a consumer index.
pub(super) struct Ring<T> {
    map: NonNull<libc::c_void>,
    map_len: usize,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    desc: NonNull<T>,
    mask: u32,
    /// Our copy of the index we move (producer or consumer).
    local: u32,
}

// SAFETY: the mapping belongs to this ring alone and is touched by one
// thread at a time (the owner's); the shared indices are atomics.
unsafe impl<T> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    pub(super) fn map(
        fd: &OwnedFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
        what: &str,
    ) -> Result<Ring<T>, XdpError> {
        let map_len = off.desc as usize + size as usize * size_of::<T>();
        // SAFETY: maps the ring the kernel made for this socket at `pgoff`;
        // the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys(what, "mmap ring", Errno::last()));
        }
        let map = NonNull::new(p).ok_or_else(|| sys(what, "mmap ring", Errno::EINVAL))?;
        let at = |o: u64| -> NonNull<u8> {
            // SAFETY: the kernel's offsets lie within the mapping it made.
            unsafe { NonNull::new_unchecked(p.cast::<u8>().add(o as usize)) }
        };
        let producer: NonNull<AtomicU32> = at(off.producer).cast();
        let consumer = at(off.consumer).cast();
        // Both indices start at zero on a new socket.
        let local = 0;
        Ok(Ring {
            map,
            map_len,
            producer,
            consumer,
            flags: at(off.flags).cast(),
            desc: at(off.desc).cast(),
            mask: size - 1,
            local,
        })
    }

    pub(super) fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping, aligned by the kernel.
        unsafe { self.producer.as_ref() }
    }

    pub(super) fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    pub(super) fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    pub(super) fn slot(&self, i: u32) -> *mut T {
        // SAFETY: `i & mask` is below the ring's size, inside the mapping.
        unsafe { self.desc.as_ptr().add((i & self.mask) as usize) }
    }

    /// Producer side (fill, tx): free slots.
    pub(super) fn room(&self) -> u32 {
        let size = self.mask + 1;
        size - self
            .local
            .wrapping_sub(self.consumer().load(Ordering::Acquire))
    }

    /// Producer side: writes `v` in the next slot (the caller checked
    /// [`Ring::room`]); [`Ring::publish`] shows it to the kernel.
    pub(super) fn put(&mut self, v: T) {
        // SAFETY: the slot is free (room was checked): the kernel does not
        // read it until the producer index passes it.
        unsafe { self.slot(self.local).write(v) };
        self.local = self.local.wrapping_add(1);
    }

    pub(super) fn publish(&self) {
        self.producer().store(self.local, Ordering::Release);
    }

    /// Consumer side (rx, completion): entries waiting.
    pub(super) fn ready(&self) -> u32 {
        self.producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.local)
    }

    /// Consumer side: the next entry (the caller checked [`Ring::ready`]).
    pub(super) fn take(&mut self) -> T {
        // SAFETY: the kernel published this slot (ready > 0) and does not
        // write it again until the consumer index passes it.
        let v = unsafe { self.slot(self.local).read() };
        self.local = self.local.wrapping_add(1);
        v
    }

    pub(super) fn release(&self) {
        self.consumer().store(self.local, Ordering::Release);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe {
            libc::munmap(self.map.as_ptr(), self.map_len);
        }
    }
}
