//! Scheduling for the data-plane thread.
//!
//! A delay emulator must release a packet within microseconds of its time;
//! under load, the normal scheduler may leave a runnable thread waiting for
//! milliseconds. Two remedies, with different costs:
//! - [`set_fifo`]: `SCHED_FIFO`, ahead of every ordinary task; the data
//!   plane's default. But the kernel's RT throttling
//!   (`kernel.sched_rt_runtime_us`, 950 ms per second by default) stops a
//!   thread that keeps the CPU busy for the rest of the second, a 50 ms
//!   stall; the data plane keeps enough idle time to stay under the budget
//!   (`dummynet::live::clock::Rest`).
//! - [`set_nice`] `-20`: first in line among ordinary tasks (of its cgroup),
//!   never stopped for using the CPU, but milliseconds late on a busy VM.

#![allow(unsafe_code)]

use std::io;

/// Gives the calling thread `SCHED_FIFO` at `priority` (1..=99).
pub fn set_fifo(priority: i32) -> io::Result<()> {
    // musl's sched_param has more fields than glibc's (for SCHED_SPORADIC,
    // which Linux lacks): all zero but the priority, as glibc's has only it.
    // SAFETY: sched_param is plain integers (and timespecs of integers),
    // for which all-zero bytes are a valid value.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = priority;
    // SAFETY: `param` is a valid, initialised sched_param that outlives the
    // call; pid 0 means the calling thread; the call only reads `param`.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the calling thread's nice value (-20 = highest priority). On Linux
/// nice is per thread when given the thread's id.
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no preconditions and touches no memory of ours.
    let tid = unsafe { libc::gettid() };
    let who = libc::id_t::try_from(tid).map_err(|_| io::Error::other("negative thread id"))?;
    // SAFETY: setpriority takes plain integers and reads no memory of ours.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, who, nice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Locks every page of the process in memory, now and as it grows, so that
/// the data plane never waits for a page to be read back in. Machines that
/// reclaim memory proactively (DAMON, cgroup limits) otherwise evict the
/// pages of code that ran a moment ago: on the VMs this was measured on,
/// the data plane then stalled for milliseconds on major faults.
///
/// Pages mapped later are locked when first touched (`MCL_ONFAULT`), not
/// all at once when mapped: otherwise each thread's whole stack is resident
/// (2 MiB for every control client, and glibc keeps the stacks of finished
/// threads for reuse), and 30 clients at once took an idle daemon from 29
/// to 53 MB for good. Kernels before 4.4 refuse the flag; they get the
/// plain lock.
pub fn lock_memory() -> io::Result<()> {
    use nix::sys::mman::{mlockall, MlockAllFlags};
    let plain = MlockAllFlags::MCL_CURRENT | MlockAllFlags::MCL_FUTURE;
    match mlockall(plain | MlockAllFlags::from_bits_retain(libc::MCL_ONFAULT)) {
        Err(nix::errno::Errno::EINVAL) => mlockall(plain).map_err(io::Error::from),
        r => r.map_err(io::Error::from),
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

    #[test]
    fn locked_memory_shows_in_the_process_status() {
        let locked_kb = || -> u64 {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with("VmLck:")).unwrap();
            line.split_whitespace().nth(1).unwrap().parse().unwrap()
        };
        match lock_memory() {
            Ok(()) => {
                assert!(locked_kb() > 0, "mlockall succeeded but nothing is locked");
                nix::sys::mman::munlockall().unwrap();
            }
            // Not root and a small RLIMIT_MEMLOCK.
            Err(e) => assert!(
                matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOMEM)),
                "{e}"
            ),
        }
    }

    #[test]
    fn nice_on_a_thread_of_its_own() {
        let r = std::thread::spawn(|| {
            let before = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            let ok = set_nice(5).is_ok();
            let after = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            // Field 19 of stat (after the parenthesised name) is nice.
            let nice = |s: &str| -> i32 {
                let rest = &s[s.rfind(')').unwrap() + 2..];
                rest.split(' ').nth(16).unwrap().parse().unwrap()
            };
            (ok, nice(&before), nice(&after))
        })
        .join()
        .unwrap();
        assert!(r.0, "raising one's own nice value is always allowed");
        assert_eq!(r.2, 5, "was {}", r.1);
    }
}
