//! Real-time scheduling for the data-plane thread.
//!
//! A delay emulator must release a packet within microseconds of its time;
//! under load, the normal scheduler may leave a runnable thread waiting for
//! milliseconds. `SCHED_FIFO` puts the data plane ahead of ordinary tasks.
//! The kernel's RT throttling (`kernel.sched_rt_runtime_us`, 95% by default)
//! still leaves the rest of the machine some CPU should the thread spin.

#![allow(unsafe_code)]

use std::io;

/// Gives the calling thread `SCHED_FIFO` at `priority` (1..=99).
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid, initialised sched_param that outlives the
    // call; pid 0 means the calling thread; the call only reads `param`.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's scheduling policy is `SCHED_FIFO`.
pub fn is_fifo() -> bool {
    // SAFETY: sched_getscheduler takes a pid (0 = calling thread) and reads
    // no memory of ours.
    unsafe { libc::sched_getscheduler(0) == libc::SCHED_FIFO }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_on_a_thread_of_its_own() {
        // Run on a scratch thread so the test harness's threads stay normal.
        let r = std::thread::spawn(|| match set_fifo(1) {
            Ok(()) => Some(is_fifo()),
            // Not root, or a container without CAP_SYS_NICE.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => None,
            Err(e) => panic!("sched_setscheduler: {e}"),
        })
        .join()
        .unwrap();
        if let Some(fifo) = r {
            assert!(fifo);
        }
        assert!(set_fifo(1000).is_err(), "priority out of range is refused");
    }
}
