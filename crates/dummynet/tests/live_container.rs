//! `dummynet run --host --netns PID` against a real container: a podman
//! container started by the test, shaped from outside it the way a chaos
//! tool shapes a pod, while `live_netns` covers the same daemon with
//! namespaces that stand in for containers.
//!
//! ```text
//!   C (podman, --network none)           S (the test's namespace)
//!   c0 192.0.2.1/24 ──────────────────── s0 192.0.2.2/24
//! ```
//!
//! The container runs a static busybox (`sleep`, and `ping` for its own
//! traffic) in an empty image the test builds. The test moves a veth end
//! into its namespace, as a CNI plugin would, and the daemon, started in
//! the test's own namespace with the container's PID, delays what leaves
//! the container by 20 ms.
//!
//! Podman runs on storage of its own under a scratch directory (removed,
//! with every container and image in it, even when an assertion fails),
//! so the test neither needs nor touches the machine's images. Without
//! root, podman, a static busybox, `nsenter` or `ping`, the test prints
//! `skipped: ...` and passes; `.ci/run` installs them all.

#[allow(dead_code)]
mod live_common;

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use live_common::*;

const TOOLS: &[&str] = &["podman", "busybox", "nsenter", "ip", "ping"];

/// The container's address, and its neighbour's.
const C_ADDR: &str = A_ADDR;
const S_ADDR: &str = B_ADDR;

/// `pipe 1 config delay 20ms` on what leaves the container.
const DELAY_20MS: &str = "pipe 1 config delay 20ms\n\
                          add 100 pipe 1 ip from any to any out\n\
                          add 65000 allow ip from any to any\n";

/// Upper bound on one podman command (building the 2 MB image, starting
/// or stopping a container).
const PODMAN_LIMIT: Duration = Duration::from_secs(60);

/// A podman of the test's own: storage and run state under `scratch`.
struct Podman {
    scratch: Scratch,
    /// `runc` when installed: crun (podman's default here) refuses
    /// machines whose cgroups are mounted in hybrid mode, as this one's
    /// are; runc runs on both.
    runtime: Option<PathBuf>,
}

impl Podman {
    fn new() -> Podman {
        let scratch = Scratch::new();
        let runtime = find_program("runc");
        Podman { scratch, runtime }
    }

    /// `podman` on this test's storage. `vfs` needs no overlay mounts to
    /// clean up; `cgroupfs` and no event log need no systemd.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("podman");
        c.arg("--root")
            .arg(self.scratch.path("root"))
            .arg("--runroot")
            .arg(self.scratch.path("run"))
            .args([
                "--storage-driver",
                "vfs",
                "--cgroup-manager",
                "cgroupfs",
                "--events-backend",
                "none",
            ]);
        if let Some(runtime) = &self.runtime {
            c.arg("--runtime").arg(runtime);
        }
        c.args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        run_bounded(
            &mut self.command(args),
            PODMAN_LIMIT,
            &format!("podman {}", args.join(" ")),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        expect_success(&self.run(args), &format!("podman {}", args.join(" ")))
    }

    /// Builds `image`: busybox alone on an empty base.
    fn build_busybox(&self, image: &str, busybox: &std::path::Path) {
        let context = self.scratch.path("context");
        std::fs::create_dir_all(&context).expect("build context");
        std::fs::copy(busybox, context.join("busybox")).expect("copy busybox");
        std::fs::write(
            context.join("Containerfile"),
            "FROM scratch\nCOPY busybox /bin/busybox\nENTRYPOINT [\"/bin/busybox\"]\n",
        )
        .expect("write the Containerfile");
        let ctx = context.to_str().expect("utf-8 path");
        self.ok(&["build", "--quiet", "--tag", image, ctx]);
    }

    /// Starts `busybox sleep 120` as container `name` with no network but
    /// its own loopback; returns its main process's PID on this machine.
    /// Podman raises the container's open-file and process limits to its
    /// own defaults unless told, which needs CAP_SYS_RESOURCE (this
    /// machine's root has not got it): the limits here are lower.
    fn start_sleeper(&self, name: &str, image: &str) -> u32 {
        self.ok(&[
            "run",
            "--detach",
            "--name",
            name,
            "--network",
            "none",
            // busybox's ping sends raw ICMP (podman's default
            // capabilities leave NET_RAW out).
            "--cap-add",
            "NET_RAW",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            image,
            "sleep",
            "120",
        ]);
        let pid = self.ok(&["inspect", "--format", "{{.State.Pid}}", name]);
        pid.trim()
            .parse()
            .unwrap_or_else(|e| panic!("podman inspect: pid {pid:?}: {e}"))
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        // Every container and image here is the test's own.
        let _ = self
            .command(&["rm", "--all", "--force", "--time", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self
            .command(&["system", "reset", "--force"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Whether `path` is an ELF program without a dynamic loader: the only
/// kind that runs in an empty image (Debian's busybox-static is; its
/// `busybox` package is not).
fn is_static(path: &std::path::Path) -> bool {
    std::fs::read(path)
        .is_ok_and(|b| b.starts_with(b"\x7fELF") && !b.windows(11).any(|w| w == b"/lib64/ld-l"))
}

/// The RTTs (ms) busybox's `ping` printed: `... seq=0 ttl=64 time=20.1 ms`.
fn busybox_rtts(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| l.split("time=").nth(1)?.split_whitespace().next())
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// `ping` from inside container `name` (podman exec, so in its
/// namespaces): 5 pings, 100 ms apart.
fn ping_from_container(podman: &Podman, name: &str, to: &str) -> Vec<f64> {
    let out = podman.ok(&[
        "exec", name, "busybox", "ping", "-c", "5", "-i", "0.1", "-W", "1", to,
    ]);
    let rtts = busybox_rtts(&out);
    assert_eq!(rtts.len(), 5, "replies from inside the container:\n{out}");
    rtts
}

/// 10 pings from S to the container, 100 ms apart ([`RT_PING`]).
fn ping_container(s: &TestNs) -> Ping {
    let out = run_bounded(
        &mut rt_ping(s, &["-c", "10", "-i", "0.1", "-W", "1", C_ADDR]),
        Duration::from_secs(10),
        "ping S→C",
    );
    Ping::parse(&expect_success(&out, "ping S→C"))
}

/// `ip ARGS` inside the namespace of process `pid`.
fn ip_in(pid: u32, args: &[&str]) {
    let pid = pid.to_string();
    let mut full = vec!["--target", pid.as_str(), "--net", "ip"];
    full.extend_from_slice(args);
    run_ok("nsenter", &full);
}

/// The container's pings to S and S's pings to it both come back 20 ms
/// later while the daemon runs (what leaves the container waits in pipe
/// 1); `ps` lists the daemon with the container's PID and namespace; when
/// podman stops the container, the daemon says its process has ended and
/// exits with status 69.
#[test]
fn a_podman_containers_traffic_is_shaped_from_outside_by_its_pid() {
    let test = "a_podman_containers_traffic_is_shaped_from_outside_by_its_pid";
    if !ready(test, TOOLS) {
        return;
    }
    let Some(busybox) = find_program("busybox").filter(|b| is_static(b)) else {
        println!("skipped: {test}: busybox is not static (install busybox-static)");
        return;
    };
    let _serial = serial();
    let podman = Podman::new();
    let (image, name) = ("dnt-busybox", unique_name());
    podman.build_busybox(image, &busybox);
    let pid = podman.start_sleeper(&name, image);
    let inode = std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .expect("the container's namespace")
        .ino();
    assert_ne!(
        std::fs::metadata("/proc/self/ns/net").map(|m| m.ino()).ok(),
        Some(inode),
        "the container shares the test's namespace"
    );

    // Wire the container to S, as a CNI plugin would.
    let s = TestNs::new();
    let pid_s = pid.to_string();
    s.ip(&[
        "link", "add", "s0", "type", "veth", "peer", "name", "c0", "netns", &pid_s,
    ]);
    s.ip(&["addr", "add", &format!("{S_ADDR}/24"), "dev", "s0"]);
    s.ip(&["link", "set", "s0", "up"]);
    ip_in(pid, &["addr", "add", &format!("{C_ADDR}/24"), "dev", "c0"]);
    ip_in(pid, &["link", "set", "c0", "up"]);

    let base = ping_container(&s);
    assert_eq!(base.lost(), 0, "no path to the container before the daemon");
    let base_inside = ping_from_container(&podman, &name, S_ADDR);

    let scratch = Scratch::new();
    let socket = scratch.path("ctl.sock");
    let queue = (7000 + unique_port() % 1000).to_string();
    let mut d = host_netns_daemon(&pid_s, &queue, &scratch, DELAY_20MS);

    let e = ps_entry(d.child.id());
    println!("ps --json: {e}");
    assert_eq!(e["mode"]["kind"], "host", "{e}");
    assert_eq!(e["netns"]["pid"].as_u64(), Some(u64::from(pid)), "{e}");
    assert_eq!(e["netns"]["inode"].as_u64(), Some(inode), "{e}");

    let shaped = ping_container(&s);
    let inside = ping_from_container(&podman, &name, S_ADDR);
    println!(
        "S→C RTTs {:?} ms (before {:?}); C→S from inside {inside:?} (before {base_inside:?})",
        shaped.rtts(),
        base.rtts()
    );
    assert_eq!(shaped.lost(), 0);
    let more = median(&shaped.rtts()) - median(&base.rtts());
    assert!((19.5..=22.0).contains(&more), "S→C: {more} ms more, not 20");
    // busybox's ping is not under chrt: its fastest reply is the robust one.
    let fastest = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let more_inside = fastest(&inside) - fastest(&base_inside);
    assert!(
        (19.5..=22.0).contains(&more_inside),
        "C→S from inside: {more_inside} ms more, not 20"
    );
    // Every packet that left the container went through rule 100: the
    // replies to S's 10 pings and the container's own 5 requests.
    let show = ipfw(&socket, &["show"]);
    assert!(rule_packets(&show, 100) >= 15, "{show}");

    podman.ok(&["stop", "--time", "0", &name]);
    let code = wait_exit(&mut d, Duration::from_secs(10));
    let said = scratch.read("daemon.log");
    println!("{said}");
    assert_eq!(
        code,
        Some(69),
        "exit status when the container stopped: {said}"
    );
    assert!(
        said.contains(&format!("process {pid}")) && said.contains("has ended"),
        "{said}"
    );
    assert!(
        ps_json_entry(d.child.id()).is_none(),
        "ps lists a stopped daemon"
    );
}
