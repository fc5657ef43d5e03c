//! The test network the live port tests share: three network namespaces
//! of the test's own, A — M — B, joined by veth pairs, with the ports under
//! test in M:
//!
//! ```text
//!   ns A                 ns M                 ns B
//!   va PREFIX.1/24 ───── pa        pb ───── vb PREFIX.2/24
//! ```
//!
//! Names are `dnio-TAG-<pid>-<n>-{a,m,b}`: unique to the test process and
//! the call. The guard exists before the first namespace is made, so a
//! failure halfway, or a failing assertion later, still removes them all
//! (which destroys the veths in them). Without root or `ip`, a test says
//! why and passes.

use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use dummynet_io::afpacket::{Port, PortOptions, TxFrame};
use nix::poll::{poll, PollFd, PollFlags};
use nix::sched::{setns, CloneFlags};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// `ip ARGS`: its stdout, or what it said on failure.
pub fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why these tests cannot run here, if they cannot.
pub fn unavailable() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root".into());
    }
    if ip(&["-V"]).is_err() {
        return Some("no `ip` command".into());
    }
    None
}

/// Three namespaces A, M, B and the two veth pairs (`va` — `pa`,
/// `vb` — `pb`). Drop deletes the namespaces.
pub struct Fixture {
    pub a: String,
    pub m: String,
    pub b: String,
}

impl Fixture {
    /// The namespaces named after `tag`, with `PREFIX.1/24` on `va` and
    /// `PREFIX.2/24` on `vb` (`prefix`: the first three octets).
    pub fn new(tag: &str, prefix: &str) -> Result<Fixture, String> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let name = |side: &str| format!("dnio-{tag}-{pid}-{n}-{side}");
        let fx = Fixture {
            a: name("a"),
            m: name("m"),
            b: name("b"),
        };
        for ns in [&fx.a, &fx.m, &fx.b] {
            ip(&["netns", "add", ns])?;
        }
        // Each end is created directly in its namespace: nothing appears in
        // the namespace running the test.
        ip(&[
            "link", "add", "va", "netns", &fx.a, "type", "veth", "peer", "name", "pa", "netns",
            &fx.m,
        ])?;
        ip(&[
            "link", "add", "vb", "netns", &fx.b, "type", "veth", "peer", "name", "pb", "netns",
            &fx.m,
        ])?;
        for (ns, dev, host) in [(&fx.a, "va", 1), (&fx.b, "vb", 2)] {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{prefix}.{host}/24"),
                "dev",
                dev,
            ])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        for dev in ["pa", "pb"] {
            ip(&["-n", &fx.m, "link", "set", dev, "up"])?;
        }
        Ok(fx)
    }

    /// Stops TCP in A and B from building super-packets (one segment per
    /// GSO packet).
    pub fn no_super_packets(&self) -> Result<(), String> {
        ip(&["-n", &self.a, "link", "set", "va", "gso_max_segs", "1"])?;
        ip(&["-n", &self.b, "link", "set", "vb", "gso_max_segs", "1"])?;
        Ok(())
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for ns in [&self.a, &self.m, &self.b] {
            if let Err(e) = ip(&["netns", "del", ns]) {
                eprintln!("cleanup: {e}");
            }
        }
    }
}

/// Builds [`Fixture::new`]`(tag, prefix)`, or says why not and returns
/// None (the test passes).
pub fn fixture(test: &str, tag: &str, prefix: &str) -> Option<Fixture> {
    if let Some(why) = unavailable() {
        eprintln!("{test}: skipped ({why})");
        return None;
    }
    match Fixture::new(tag, prefix) {
        Ok(fx) => Some(fx),
        Err(e) if e.contains("Operation not permitted") => {
            eprintln!("{test}: skipped (cannot create namespaces: {e})");
            None
        }
        Err(e) => panic!("{test}: fixture: {e}"),
    }
}

/// Runs `f` in a new thread that has joined network namespace `ns`.
pub fn in_netns<T, F>(ns: &str, f: F) -> JoinHandle<Result<T, String>>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, String> + Send + 'static,
{
    let path = format!("/run/netns/{ns}");
    thread::spawn(move || {
        let file = File::open(&path).map_err(|e| format!("open {path}: {e}"))?;
        setns(file.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns {path}: {e}"))?;
        f()
    })
}

/// The result of a thread of [`in_netns`]; a panic in it is an error.
pub fn join<T>(h: JoinHandle<Result<T, String>>) -> Result<T, String> {
    h.join().map_err(|_| "thread panicked".to_string())?
}

/// Sends `frames` from an AF_PACKET port on `from` (in namespace `src`)
/// and collects, for up to 2 s or until as many have come, the frames a
/// port on `to` (in `dst`) reads that `ours` picks, in arrival order.
pub fn raw_across(
    (src, from): (&str, &'static str),
    (dst, to): (&str, &'static str),
    frames: Vec<Vec<u8>>,
    ours: fn(&[u8]) -> bool,
) -> Result<Vec<Vec<u8>>, String> {
    let want = frames.len();
    let (ready_tx, ready_rx) = mpsc::channel();
    let sink = in_netns(dst, move || {
        let mut port = Port::open(to, PortOptions::default()).map_err(|e| e.to_string())?;
        let _ = ready_tx.send(());
        let start = Instant::now();
        let mut seen = Vec::new();
        let mut batch = Vec::new();
        while seen.len() < want && start.elapsed() < Duration::from_secs(2) {
            let mut fds = [PollFd::new(port.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, 20u16).map_err(|e| e.to_string())?;
            port.recv_batch(&mut batch, 64).map_err(|e| e.to_string())?;
            for f in batch.drain(..) {
                if ours(&f.data) {
                    seen.push(f.data);
                } else {
                    port.recycle(f.data);
                }
            }
        }
        Ok(seen)
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    let source = in_netns(src, move || {
        let mut port = Port::open(from, PortOptions::default()).map_err(|e| e.to_string())?;
        let tx: Vec<TxFrame<'_>> = frames
            .iter()
            .map(|f| TxFrame {
                data: f,
                vnet: None,
            })
            .collect();
        port.send_batch(&tx).map_err(|e| e.to_string())
    });
    let sent = join(source)?;
    if sent != want {
        return Err(format!("sent {sent} of {want}"));
    }
    join(sink)
}
