//! Measuring instruments for `dummynet demo`: round-trip time with a UDP
//! echo server and probe ([`rtt_probe`], [`EchoServer`]), throughput with a TCP bulk server and
//! client ([`bulk_transfer`], [`BulkServer`]).
//!
//! They stand in for `ping` and `iperf3`, so that the demo needs nothing on
//! the machine but our own binary. Everything is blocking `std::net` code on
//! plain threads.
//!
//! # Network namespaces
//!
//! On Linux a socket belongs to the network namespace of the thread that
//! creates it, for its whole life, and a new thread starts in the namespace
//! of the thread that spawns it. Nothing here changes namespace:
//! [`EchoServer::start`] and [`BulkServer::start`] create their socket on
//! the calling thread and spawn their worker thread from it, and
//! [`rtt_probe`] and [`bulk_transfer`] open their sockets on the calling
//! thread. Call each of them from a thread that is already inside the right
//! namespace (`Netns::run` or `Netns::spawn_thread` in `dummynet_io`): a
//! server started from inside namespace B serves in B until it is stopped,
//! whichever thread stops it, even after the starting thread has exited.
//!
//! # Everything ends
//!
//! Every loop is bounded in count or in time: blocking socket calls carry
//! timeouts of at most [`POLL`], and each loop checks a deadline or a stop
//! flag between calls. Servers stop within about [`POLL`] of
//! [`EchoServer::stop`] / [`BulkServer::stop`] or drop.

mod bulk;
mod rtt;

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

pub use bulk::{
    bulk_duration_for, bulk_transfer, BulkReport, BulkServer, Direction, TcpBufferLimits,
    MAX_BULK_DURATION,
};
pub use rtt::{rtt_probe, wait_for_echo, EchoServer, RttReport, PROBE_LEN};

/// The longest any blocking socket call here waits before its loop looks at
/// its stop flag or deadline again: servers stop within about this long.
pub const POLL: Duration = Duration::from_millis(50);

/// Adds what was being done to an error, keeping its kind for callers that
/// match on it.
fn context(e: io::Error, what: impl fmt::Display) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn invalid_input(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

/// Errors that only mean "nothing happened in time, try again": socket
/// timeouts (reported as either kind depending on the platform) and
/// signals.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn stopped() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "server is stopping")
}

/// Nanoseconds from `base` to `now`, saturating below `u64::MAX` (584
/// years do not fit), which the RTT probe keeps for "not sent yet".
fn nanos_between(base: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(base).as_nanos()).unwrap_or(u64::MAX - 1)
}

/// The unspecified address of the same family as `addr`, port 0: where a
/// client socket binds so the kernel picks its address and port.
fn any_addr_like(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    }
}

/// Sleeps until `deadline` in slices of at most [`POLL`]; false if `abort`
/// was raised first.
fn sleep_until(deadline: Instant, abort: &AtomicBool) -> bool {
    loop {
        if abort.load(Ordering::Acquire) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        thread::sleep((deadline - now).min(POLL));
    }
}

/// A rate for people: `9.87 Mbit/s`, in the unit that keeps 1 to 3 digits
/// before the decimal point.
pub fn format_bps(bps: f64) -> String {
    let (value, unit) = if bps >= 1e9 {
        (bps / 1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kbit/s")
    } else {
        (bps, "bit/s")
    };
    format!("{value:.2} {unit}")
}

/// A duration in milliseconds for people: `65.23 ms`, or three decimals
/// below a millisecond (`0.042 ms`) where loopback RTTs live.
pub fn format_ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1.0 {
        format!("{ms:.3} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

/// What the tests of both instruments share.
#[cfg(test)]
mod testkit {
    use std::net::{Ipv4Addr, SocketAddr};

    pub fn loopback() -> SocketAddr {
        (Ipv4Addr::LOCALHOST, 0).into()
    }

    /// Taken by the tests that saturate CPUs (bulk transfers) and by those
    /// that assert on timing, so that on a small machine one does not make
    /// another miss its bounds. Together they take about 3 s.
    pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
        static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
        // A failed test poisons the lock; the others may still run.
        HEAVY.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};

    use super::testkit::*;
    use super::*;

    #[test]
    fn helpers_format_for_people() {
        assert_eq!(format_bps(9_870_000.0), "9.87 Mbit/s");
        assert_eq!(format_bps(25e9), "25.00 Gbit/s");
        assert_eq!(format_bps(999.0), "999.00 bit/s");
        assert_eq!(format_ms(Duration::from_micros(65_230)), "65.23 ms");
        assert_eq!(format_ms(Duration::from_micros(42)), "0.042 ms");
    }

    /// Two fresh namespaces joined by a veth pair, servers in one, probes
    /// from the other. Needs root (CAP_SYS_ADMIN); skipped otherwise.
    #[test]
    fn probes_across_a_veth_between_namespaces() {
        use dummynet_io::netns::{Netns, NetnsError};
        use std::os::fd::AsFd;

        let (client_ns, server_ns) = match (Netns::new_anonymous(), Netns::new_anonymous()) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(NetnsError::Unshare(e)), _) | (_, Err(NetnsError::Unshare(e)))
                if e.kind() == io::ErrorKind::PermissionDenied =>
            {
                println!("skipped: creating network namespaces needs root ({e})");
                return;
            }
            (Err(e), _) | (_, Err(e)) => panic!("creating namespaces: {e}"),
        };
        let _heavy = exclusive();
        // The veth is created inside client_ns and its peer inside
        // server_ns: the names cannot clash with anything on the host.
        let client_ip = Ipv4Addr::new(10, 231, 0, 1);
        let server_ip = Ipv4Addr::new(10, 231, 0, 2);
        let mut rtnl = client_ns.rtnl().unwrap();
        rtnl.add_veth("dnp0", "dnp1", Some(server_ns.as_fd()))
            .unwrap();
        rtnl.add_address("dnp0", client_ip.into(), 24).unwrap();
        rtnl.set_up("dnp0").unwrap();
        let mut rtnl = server_ns.rtnl().unwrap();
        rtnl.add_address("dnp1", server_ip.into(), 24).unwrap();
        rtnl.set_up("dnp1").unwrap();

        // Started from a thread inside server_ns: the servers' threads and
        // sockets stay there after that helper thread has exited.
        let bind: SocketAddr = (server_ip, 0).into();
        let (echo, bulk) = server_ns
            .run(|| (EchoServer::start(bind), BulkServer::start(bind)))
            .unwrap();
        let (echo, bulk) = (echo.unwrap(), bulk.unwrap());

        let (echo_addr, bulk_addr) = (echo.local_addr(), bulk.local_addr());
        let (ready, rtt, up, down, limits) = client_ns
            .run(move || {
                let ready = wait_for_echo(echo_addr, Duration::from_secs(3));
                let rtt = rtt_probe(
                    echo_addr,
                    20,
                    Duration::from_millis(10),
                    Duration::from_secs(1),
                );
                let half = Duration::from_millis(500);
                let up = bulk_transfer(bulk_addr, Direction::Upload, half);
                let down = bulk_transfer(bulk_addr, Direction::Download, half);
                (ready, rtt, up, down, TcpBufferLimits::read())
            })
            .unwrap();
        println!("veth path ready after {:?}", ready.unwrap());
        let (rtt, up, down) = (rtt.unwrap(), up.unwrap(), down.unwrap());
        println!("veth rtt: {rtt}");
        println!("veth upload: {up}");
        println!("veth download: {down}");
        println!("tcp buffer ceilings in the namespace: {limits:?}");
        assert_eq!((rtt.received, rtt.lost), (20, 0), "{rtt}");
        // A veth's RTT is tens of µs: the median of 20 under 10 ms says the
        // probe timed the path, not its own timeout or interval, however
        // busy the machine. Not the largest, which once missed 10 ms on
        // the loaded 2-vCPU machine: the echo server's thread waited for
        // a CPU.
        assert!(rtt.p50 < Duration::from_millis(10), "{rtt}");
        assert!(up.bytes > 5_000_000, "{up}");
        assert!(down.bytes > 5_000_000, "{down}");
        assert!(limits.unwrap().max_bdp() > 0);
        echo.stop();
        bulk.stop();
    }
}
