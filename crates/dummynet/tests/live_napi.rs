//! `dummynet shell --napi`: by default a shell (standalone or `--join`ed)
//! turns GRO on and makes NAPI threaded on the ends it creates for the
//! endpoints (`dn0` in the command's namespace, `dn-PID` where it was
//! started), and TSO off on the emulator's ports (`app`/`peer`, or a
//! joined link's `app-K`/`peer-K`) while the ends segment (a rate here),
//! so the kernel's NAPI threads, not the emulator's, run the receiving TCP
//! stacks; with delays only (super-packets cross whole) TSO stays on. Each state is read back from
//! the kernel (ethtool ioctls, and each namespace's own sysfs); with
//! `--napi inline` the same ends are left as the kernel makes a veth.
//! Either way a 4 MiB TCP transfer crosses the link byte for byte.
//!
//! Everything runs in a namespace the test creates (`dnt-<pid>-<n>`: the
//! far ends and the receiving listener), removed by its guard even when an
//! assertion fails; every wait and the transfer are bounded. Without root
//! or bash, the test prints `skipped: ...` and passes.

#[allow(dead_code)]
mod live_common;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dummynet_io::netdev::{self, Feature};
use dummynet_io::netns::Netns;
use live_common::*;

/// Longest the transfer (and any wait for a shell's command) may take.
const LIMIT: Duration = Duration::from_secs(20);

/// Bytes sent through each link.
const PAYLOAD: usize = 4 << 20;

/// Each link's pipes in the tests: a rate, so the ends segment.
const RATE: &str = "bw 200Mbit/s delay 2ms";

/// What the kernel says about a link's ends.
#[derive(Debug, PartialEq, Eq)]
struct Ends {
    /// `dn0`, in the command's namespace: GRO, threaded NAPI.
    near: (bool, bool),
    /// `dn-PID`, in the test's namespace: GRO, threaded NAPI.
    far: (bool, bool),
    /// The emulator's two ports: TSO.
    ports_tso: (bool, bool),
}

const THREADED: Ends = Ends {
    near: (true, true),
    far: (true, true),
    ports_tso: (false, false),
};

/// A veth as the kernel makes it.
const KERNEL_DEFAULTS: Ends = Ends {
    near: (false, false),
    far: (false, false),
    ports_tso: (true, true),
};

fn gro_and_threaded(ns: &Netns, ifname: &str) -> (bool, bool) {
    ns.run(|| {
        (
            netdev::feature(ifname, Feature::Gro),
            netdev::threaded(ifname),
        )
    })
    .map(|(g, t)| (g.expect("GRO"), t.expect("threaded")))
    .unwrap_or_else(|e| panic!("entering the namespace of {ifname}: {e}"))
}

fn tso(ns: &Netns, ifname: &str) -> bool {
    ns.run(|| netdev::feature(ifname, Feature::Tso))
        .unwrap_or_else(|e| panic!("entering the namespace of {ifname}: {e}"))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The network namespace of `pid`'s data-plane thread (the emulator's).
fn emulator_ns(pid: nix::unistd::Pid) -> Netns {
    let tasks = PathBuf::from(format!("/proc/{pid}/task"));
    for task in std::fs::read_dir(&tasks)
        .expect("the shell's threads")
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        // The kernel keeps 15 bytes of "dummynet-dataplane".
        if comm.trim() == "dummynet-datapl" {
            return Netns::open(task.path().join("ns/net")).expect("its namespace");
        }
    }
    panic!("no data-plane thread in {}", tasks.display());
}

/// Deterministic bytes that no run of zeroes would fake.
fn payload() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..PAYLOAD)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Accepts one connection in `ns` on `port` and reads it to its end;
/// gives up after [`LIMIT`].
fn sink(ns: &TestNs, port: u16) -> JoinHandle<Option<Vec<u8>>> {
    let netns = Netns::open_named(&ns.name).expect("open the test namespace");
    let at = format!("0.0.0.0:{port}");
    let listener = netns
        .run(|| TcpListener::bind(&at))
        .expect("enter the test namespace")
        .unwrap_or_else(|e| panic!("listening on {at}: {e}"));
    listener.set_nonblocking(true).expect("non-blocking");
    std::thread::spawn(move || {
        let deadline = Instant::now() + LIMIT;
        while Instant::now() < deadline {
            match listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).ok()?;
                    stream.set_read_timeout(Some(LIMIT)).ok()?;
                    let mut got = Vec::new();
                    (&stream).read_to_end(&mut got).ok()?;
                    return Some(got);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        None
    })
}

/// Waits (bounded) for `path`, and reads it.
fn wait_file(path: &Path) -> String {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {} after {LIMIT:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One link's run: a shell (`shell_args` before `--`) whose command says
/// its pid, sends the payload to the far end's `port` with bash's
/// /dev/tcp, then idles. Returns the shell, the command's namespace, and
/// the receiving thread.
struct Run {
    shell: Proc,
    app: Netns,
    received: JoinHandle<Option<Vec<u8>>>,
}

fn start(ns: &TestNs, scratch: &Scratch, tag: &str, link: &str, shell_args: &[&str]) -> Run {
    let port = unique_port();
    let received = sink(ns, port);
    let data = scratch.path("payload");
    let pid = scratch.path(&format!("{}.pid", tag.replace(' ', "-")));
    let script = format!(
        "echo $$ > {pid}.tmp && mv {pid}.tmp {pid}; \
         cat {data} > /dev/tcp/$DUMMYNET_PEER/{port}; sleep 60",
        pid = pid.display(),
        data = data.display(),
    );
    let mut args = vec!["shell", "--nat", "off", "--up", link, "--down", link];
    args.extend_from_slice(shell_args);
    args.extend_from_slice(&["--", "bash", "-c", &script]);
    let shell = Proc::spawn(ns.command(DUMMYNET, &args), tag);
    let command_pid = wait_file(&pid);
    let app = Netns::open(format!("/proc/{}/ns/net", command_pid.trim()))
        .expect("the command's namespace");
    Run {
        shell,
        app,
        received,
    }
}

impl Run {
    /// The ends' states, with the emulator's ports `ports` in `emulator`,
    /// and this shell's end `dn-PID` in `ns`.
    fn ends(&self, ns: &TestNs, emulator: &Netns, ports: [&str; 2]) -> Ends {
        let here = Netns::open_named(&ns.name).expect("the test namespace");
        let far = format!("dn-{}", self.shell.pid());
        Ends {
            near: gro_and_threaded(&self.app, "dn0"),
            far: gro_and_threaded(&here, &far),
            ports_tso: (tso(emulator, ports[0]), tso(emulator, ports[1])),
        }
    }

    /// The payload arrived whole; then the shell is stopped.
    fn crossed(mut self, sent: &[u8], tag: &str) {
        let got = self
            .received
            .join()
            .expect("the receiving thread")
            .unwrap_or_else(|| panic!("{tag}: nothing arrived within {LIMIT:?}"));
        assert_eq!(got.len(), sent.len(), "{tag}: bytes received");
        assert!(got == sent, "{tag}: the bytes differ");
        self.shell.terminate(Duration::from_secs(10));
    }
}

#[test]
fn a_shell_moves_receive_work_to_napi_threads_unless_told_inline() {
    if !ready("shell --napi", &["ip", "bash"]) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let sent = payload();
    std::fs::write(scratch.path("payload"), &sent).expect("the payload file");
    // A rate: the ends segment, and TSO is off on the emulator's ports.
    // Delays only: super-packets cross whole, and TSO stays on (splitting
    // them on the emulator's thread would cost more than it saves).
    let whole = Ends {
        ports_tso: (true, true),
        ..THREADED
    };
    for (tag, link, args, expected) in [
        ("rate", RATE, &[][..], THREADED),
        ("delays only", "delay 2ms", &[][..], whole),
        ("inline", RATE, &["--napi", "inline"][..], KERNEL_DEFAULTS),
    ] {
        let run = start(&ns, &scratch, tag, link, args);
        let emulator = emulator_ns(run.shell.pid());
        assert_eq!(run.ends(&ns, &emulator, ["app", "peer"]), expected, "{tag}");
        run.crossed(&sent, tag);
    }
}

/// With `--gso auto`, TSO on the emulator's ports follows the
/// configuration: on while the pipes only delay, off once a rate makes the
/// ends segment, on again when it goes.
#[test]
fn the_emulators_tso_follows_the_configuration() {
    if !ready("shell --napi, TSO following ipfw", &["ip", "bash"]) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    std::fs::write(scratch.path("payload"), payload()).expect("the payload file");
    let socket = scratch.path("follow.sock");
    let sock = socket.to_string_lossy().into_owned();
    let run = start(&ns, &scratch, "follow", "delay 2ms", &["--socket", &sock]);
    let emulator = emulator_ns(run.shell.pid());
    let ports_tso = || (tso(&emulator, "app"), tso(&emulator, "peer"));
    let wait_for = |want: (bool, bool), what: &str| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while ports_tso() != want {
            assert!(Instant::now() < deadline, "{what}: TSO {:?}", ports_tso());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    assert_eq!(ports_tso(), (true, true), "delays only");
    ipfw(
        &socket,
        &["pipe", "1", "config", "bw", "100Mbit/s", "delay", "2ms"],
    );
    wait_for((false, false), "after a rate");
    ipfw(&socket, &["pipe", "1", "config", "delay", "2ms"]);
    wait_for((true, true), "after the rate went");
    drop(run);
}

#[test]
fn a_joined_shell_sets_up_its_own_ends_and_the_shared_emulators_ports() {
    if !ready("shell --join --napi", &["ip", "bash"]) {
        return;
    }
    let _serial = serial();
    let ns = TestNs::new();
    let scratch = Scratch::new();
    let sent = payload();
    std::fs::write(scratch.path("payload"), &sent).expect("the payload file");
    let socket = scratch.path("shared.sock");
    let sock = socket.to_string_lossy().into_owned();
    let mut first = Proc::spawn(
        ns.command(
            DUMMYNET,
            &[
                "shell", "--nat", "off", "--socket", &sock, "--", "sleep", "60",
            ],
        ),
        "the first dummynet shell",
    );
    wait_for_socket(&socket, &mut first);
    let emulator = emulator_ns(first.pid());
    assert_eq!(
        (tso(&emulator, "app"), tso(&emulator, "peer")),
        (true, true),
        "the first shell's own ports: unlimited, super-packets cross whole"
    );
    // One after the other, both kept until the end: links 1 and 2.
    let mut runs = Vec::new();
    for (tag, args, ports, expected) in [
        ("joined", &[][..], ["app-1", "peer-1"], THREADED),
        (
            "joined inline",
            &["--napi", "inline"][..],
            ["app-2", "peer-2"],
            KERNEL_DEFAULTS,
        ),
    ] {
        let mut args = args.to_vec();
        args.extend_from_slice(&["--join", &sock]);
        let run = start(&ns, &scratch, tag, RATE, &args);
        assert_eq!(run.ends(&ns, &emulator, ports), expected, "{tag}");
        runs.push((tag, run));
    }
    for (tag, run) in runs {
        run.crossed(&sent, tag);
    }
    first.assert_running();
}
