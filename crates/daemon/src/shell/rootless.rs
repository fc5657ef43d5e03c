//! `dummynet shell` without root: a user namespace of its own, and a
//! userspace network stack the distribution packages for the way out.
//!
//! An ordinary user cannot make namespaces or veths in the host's network
//! namespace; but a process may create a user namespace of its own (where
//! the kernel allows it), and there it holds every capability over the
//! network namespaces it creates ([`dummynet_io::userns`]). So the shell
//! first enters one, then builds its usual link in a network namespace of
//! its own, "here", that stands in for the host:
//!
//! ```text
//!  the user's namespaces         ║  the shell's user namespace (uid 0 inside = the user outside)
//!                                ║
//!  pasta ── host sockets ◄─ tap ═╬═ here: tap (the host's address and routes, copied)
//!  (or slirp4netns)              ║        dn-PID 100.64.K.1 ─[forward, masquerade]─► tap
//!                                ║  emulator: peer [bridge] app
//!                                ║  command:  dn0 100.64.K.2
//! ```
//!
//! The path of a packet from the command to the world: `dn0`, the veth to
//! `app`, the emulator (pipe 1), `peer`, the veth to `dn-PID` in "here";
//! routed there to the default route, the tap of pasta (or slirp4netns),
//! masqueraded to the tap's address on the way ([`super::nat`],
//! with `nft` or `iptables` run inside "here", which is ours to change);
//! pasta reads the frame from the tap and carries its payload on with a
//! socket of its own in the user's network namespace (a TCP connection, a
//! UDP socket, an ICMP echo socket), as any program of the user would.
//! Replies come back the same way. Both tools are found on `PATH` at run
//! time (pasta first: `passt` package); with neither, the command reaches
//! its peer (`$DUMMYNET_PEER`, "here") only, and the shell says how to get
//! one. As with pasta's defaults, TCP to the gateway address reaches the
//! host's loopback (slirp4netns: to 10.0.2.2).
//!
//! What root gives and this does not: real-time priority and memory
//! locking (the kernel checks them against the host's user namespace), so
//! the data plane falls back to normal scheduling, and `stats` says which
//! it got. Control sockets and the shells' shared records go in
//! `$XDG_RUNTIME_DIR/dummynet/` (else `/tmp/dummynet-UID/`, mode 0700)
//! rather than `/run/dummynet/`.

use std::io::{BufRead, BufReader};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use dummynet_io::netns::Netns;
use dummynet_io::userns::Outside;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Which userspace network stack connects a rootless shell to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UserNet {
    /// pasta if installed, else slirp4netns, else none (and say so).
    #[default]
    Auto,
    Pasta,
    Slirp4netns,
    /// The command reaches its peer only.
    None,
}

use crate::start::StartError;
pub use crate::system::runtime_dir;
use crate::system::USER_DIR;
static OUTSIDE_UID: OnceLock<u32> = OnceLock::new();

/// The user this process runs as outside its user namespace, once
/// [`enter`] has moved it into one.
pub fn outside_uid() -> Option<u32> {
    OUTSIDE_UID.get().copied()
}

/// Whether this process runs in a user namespace other than the machine's
/// (its uid 0 then is not the machine's root): any map but the initial
/// namespace's identity over every id.
pub fn in_user_namespace() -> bool {
    std::fs::read_to_string("/proc/self/uid_map").is_ok_and(|map| {
        let fields: Vec<&str> = map.split_whitespace().collect();
        fields != ["0", "0", "4294967295"]
    })
}

/// Whether this process runs without root, in a user namespace of its own
/// ([`enter`] has succeeded).
pub fn is_rootless() -> bool {
    USER_DIR.get().is_some()
}

/// Makes the user's run-time directory, then moves this process into a
/// user namespace of its own. Must run before any thread is started (the
/// kernel's rule for entering a user namespace).
pub fn enter() -> Result<Outside, StartError> {
    let uid = nix::unistd::geteuid();
    let dir = user_runtime_dir(uid.as_raw()).map_err(StartError::RuntimeDir)?;
    let outside = dummynet_io::userns::enter_own().map_err(StartError::NotRoot)?;
    let _ = USER_DIR.set(dir);
    let _ = OUTSIDE_UID.set(outside.uid.as_raw());
    Ok(outside)
}

/// `$XDG_RUNTIME_DIR/dummynet` when that is a directory of ours (as
/// systemd-logind makes it), else `/tmp/dummynet-UID`; created with mode
/// 0700, and refused if it exists but is someone else's or open to others
/// (in /tmp, anyone could have made it first).
fn user_runtime_dir(uid: u32) -> Result<PathBuf, String> {
    let xdg = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .filter(|d| std::fs::metadata(d).is_ok_and(|m| m.is_dir() && m.uid() == uid));
    let dir = match xdg {
        Some(base) => base.join("dummynet"),
        None => PathBuf::from(format!("/tmp/dummynet-{uid}")),
    };
    private_dir(&dir, uid)?;
    Ok(dir)
}

/// Creates `dir` with mode 0700, or checks that the one there is a
/// directory (not a link) of `uid`'s that nobody else may enter.
fn private_dir(dir: &Path, uid: u32) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating {}: {e}", dir.display())),
    }
    let meta =
        std::fs::symlink_metadata(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} is not a private directory of ours (owner {}, mode {:o}; wanted owner {uid}, \
             mode 700): remove it, or set XDG_RUNTIME_DIR to a directory of your own",
            dir.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// The userspace network stack connecting "here" to the user's network
/// namespace, a child process stopped when this is dropped.
pub struct Gateway {
    child: Child,
    tool: &'static str,
}

/// How long the tool gets to set "here" up.
const CONNECT_WAIT: Duration = Duration::from_secs(5);

/// How long slirp4netns's IPv6 route may lag its IPv4 one.
const V6_WAIT: Duration = Duration::from_secs(2);

/// How long it gets to exit after SIGTERM.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// What a user without pasta or slirp4netns is told to install.
const HOW: &str = "the command reaches only $DUMMYNET_PEER; for the rest, install \
                   pasta (`apt-get install passt`, `dnf install passt`) or slirp4netns";

/// Why a shell without root has no way out to the user's network.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("--user-net none: the command reaches only $DUMMYNET_PEER")]
    NotWanted,
    /// The tool asked for (or either, for `auto`) is not installed.
    #[error("{}: {HOW}", missing(*.0))]
    NotInstalled(UserNet),
    #[error("handing the namespace to {tool}: {source}")]
    Hand {
        tool: &'static str,
        source: std::io::Error,
    },
    #[error("starting {}: {source}", program.display())]
    Start {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{tool} exited ({status}) before connecting the shell (its message is above): \
         the command reaches only $DUMMYNET_PEER"
    )]
    Exited {
        tool: &'static str,
        status: std::process::ExitStatus,
    },
    #[error(
        "{tool} did not set up a route within {CONNECT_WAIT:?}: the command reaches \
         only $DUMMYNET_PEER"
    )]
    NoRoute { tool: &'static str },
}

/// What is missing for `--user-net want`.
fn missing(want: UserNet) -> &'static str {
    match want {
        UserNet::Pasta => "--user-net pasta: no `pasta` program on PATH",
        UserNet::Slirp4netns => "--user-net slirp4netns: no `slirp4netns` program on PATH",
        UserNet::Auto | UserNet::None => "neither pasta nor slirp4netns is installed",
    }
}

impl Gateway {
    /// Connects the namespace `here` (of our user namespace) to the
    /// user's, with the tool `want` names; returns once `here` has a
    /// default route through it. `Err` says why there is no way out, and
    /// how to get one.
    pub fn connect(here: &Netns, want: UserNet) -> Result<Gateway, GatewayError> {
        let found = |tool: &'static str| crate::system::find_program(tool).map(|p| (tool, p));
        let missing = || GatewayError::NotInstalled(want);
        let (tool, program) = match want {
            UserNet::None => return Err(GatewayError::NotWanted),
            UserNet::Auto => found("pasta")
                .or_else(|| found("slirp4netns"))
                .ok_or_else(missing)?,
            UserNet::Pasta => found("pasta").ok_or_else(missing)?,
            UserNet::Slirp4netns => found("slirp4netns").ok_or_else(missing)?,
        };
        if tool == "slirp4netns" {
            // slirp4netns gives IPv6 by router advertisement (fd00::/64,
            // through fe80::2). "Here" forwards the shell's traffic, and a
            // forwarding interface ignores advertisements unless its
            // accept_ra is 2; and the address it makes from one is unusable
            // for a second or two of duplicate detection, pointless on a tap
            // with one other end. Both set for the tap it is about to make
            // (here is ours alone). Without IPv6 in the kernel there are no
            // such files and nothing to do.
            let _ = here.run(|| {
                for (key, value) in [("accept_ra", "2"), ("accept_dad", "0")] {
                    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/default/{key}"), value);
                }
            });
        }
        // The tool is handed "here" as its standard input and opens it as
        // /proc/self/fd/0: it has no name in the file system, and pasta,
        // which drops capabilities first, may not open our /proc/PID files.
        let ns = here
            .as_fd()
            .try_clone_to_owned()
            .map_err(|source| GatewayError::Hand { tool, source })?;
        let mut cmd = Command::new(&program);
        match tool {
            // No port forwarding either way (-t, -u, -T, -U): the command's
            // listening ports stay its own, as with root.
            "pasta" => cmd.args([
                "--config-net",
                "--foreground",
                "--quiet",
                "-t",
                "none",
                "-u",
                "none",
                "-T",
                "none",
                "-U",
                "none",
                "--netns",
                "/proc/self/fd/0",
                "--netns-only",
            ]),
            // IPv6 too (fd00::100/64, routed through fd00::2), NATed
            // by slirp4netns as IPv4 is.
            _ => cmd.args([
                "--configure",
                "--enable-ipv6",
                "--mtu=65520",
                "--netns-type=path",
                "/proc/self/fd/0",
                "tap0",
            ]),
        };
        cmd.stdin(Stdio::from(ns))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // Should we be killed. The kernel clears it if the tool changes its
        // credentials (pasta drops capabilities), so [`Gateway`]'s drop
        // stops the tool too.
        dummynet_io::netns::die_with_parent(&mut cmd);
        let mut child = cmd.spawn().map_err(|source| GatewayError::Start {
            program: program.clone(),
            source,
        })?;
        if let Some(err) = child.stderr.take() {
            relay(tool, err);
        }
        let gateway = Gateway { child, tool };
        gateway.wait_connected(here)
    }

    /// Waits until `here` has a default route (the tool has configured its
    /// tap), or the tool has exited, or [`CONNECT_WAIT`] has passed.
    fn wait_connected(mut self, here: &Netns) -> Result<Gateway, GatewayError> {
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(GatewayError::Exited {
                    tool: self.tool,
                    status,
                });
            }
            if here.run(has_default_route).unwrap_or(false) {
                self.wait_v6(here, start);
                return Ok(self);
            }
            if start.elapsed() > CONNECT_WAIT {
                return Err(GatewayError::NoRoute { tool: self.tool });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// slirp4netns's IPv6 route comes by router advertisement, a moment
    /// after its IPv4 one: waited for (within [`CONNECT_WAIT`] of `start`,
    /// and at most [`V6_WAIT`]), since the shell's NAT looks for the
    /// default routes once, when it starts. Without one, IPv6 stays local
    /// and the NAT says so. pasta copies the host's routes at once.
    fn wait_v6(&self, here: &Netns, start: Instant) {
        if self.tool != "slirp4netns" || !Path::new("/proc/sys/net/ipv6").exists() {
            return;
        }
        let until = (start + CONNECT_WAIT).min(Instant::now() + V6_WAIT);
        while Instant::now() < until {
            if here.run(has_v6_way_out).unwrap_or(true) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `pasta` or `slirp4netns`.
    pub fn tool(&self) -> &'static str {
        self.tool
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let start = Instant::now();
        while start.elapsed() < STOP_WAIT {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Passes the tool's messages on to our stderr, named, leaving out
/// slirp4netns's report of its tap descriptor and pasta's complaints that
/// there is no syslog to copy them to.
fn relay(tool: &'static str, from: std::process::ChildStderr) {
    let spawned = std::thread::Builder::new()
        .name("dummynet-usernet".into())
        .spawn(move || {
            for line in BufReader::new(from).lines() {
                let Ok(line) = line else { break };
                let chatter = line.starts_with("sent tapfd=")
                    || line.starts_with("received tapfd=")
                    || (line.starts_with("Failed to send") && line.ends_with("to syslog"));
                if chatter {
                    continue;
                }
                say!("dummynet shell: {tool}: {line}");
            }
        });
    if let Err(e) = spawned {
        say!("dummynet shell: {tool}'s messages are lost: cannot start a thread: {e}");
    }
}

/// The calling thread's namespace has an IPv4 default route.
fn has_default_route() -> bool {
    std::fs::read_to_string("/proc/thread-self/net/route").is_ok_and(|t| default_route_in(&t))
}

/// The calling thread's namespace has an IPv6 default route and a
/// global address ready to use (not tentative): what NAT66 needs.
fn has_v6_way_out() -> bool {
    let ready = std::fs::read_to_string("/proc/thread-self/net/if_inet6").is_ok_and(|t| {
        // ADDRESS IFINDEX PREFIXLEN SCOPE FLAGS NAME; scope 00 is global,
        // flag 0x40 tentative.
        t.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(3) == Some(&"00")
                && f.get(4)
                    .and_then(|x| u32::from_str_radix(x, 16).ok())
                    .is_some_and(|flags| flags & 0x40 == 0)
                && f.get(5).is_some_and(|dev| *dev != "lo")
        })
    });
    ready && has_default_route6()
}

/// The calling thread's namespace has an IPv6 default route.
fn has_default_route6() -> bool {
    std::fs::read_to_string("/proc/thread-self/net/ipv6_route").is_ok_and(|t| {
        t.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Destination ::/0 through a gateway (not the unreachable
            // default of an empty table, whose device is `lo`).
            f.first() == Some(&"00000000000000000000000000000000")
                && f.get(1) == Some(&"00")
                && f.get(9).is_some_and(|dev| *dev != "lo")
        })
    })
}

/// `/proc/net/route` text holds a route with destination and mask 0.
fn default_route_in(routes: &str) -> bool {
    routes.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&"00000000") && f.get(7) == Some(&"00000000")
    })
}

#[cfg(test)]
mod tests {

    /// Why there is no way out is a kind, with the words users read.
    #[test]
    fn no_way_out_is_a_kind_with_its_words() {
        let e = GatewayError::NotWanted;
        assert_eq!(
            e.to_string(),
            "--user-net none: the command reaches only $DUMMYNET_PEER"
        );
        let e = GatewayError::NotInstalled(UserNet::Pasta);
        assert!(
            e.to_string().starts_with(
                "--user-net pasta: no `pasta` program on PATH: the command reaches only"
            ),
            "{e}"
        );
        let e = GatewayError::NotInstalled(UserNet::Auto).to_string();
        assert!(
            e.starts_with("neither pasta nor slirp4netns is installed: "),
            "{e}"
        );
        assert!(e.ends_with("or slirp4netns"), "{e}");
    }
    use super::*;

    #[test]
    fn a_default_route_is_found_and_others_are_not_one() {
        let header =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";
        let subnet = "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let default = "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
        assert!(!default_route_in(header));
        assert!(!default_route_in(&format!("{header}{subnet}")));
        assert!(default_route_in(&format!("{header}{subnet}{default}")));
    }

    #[test]
    fn the_runtime_dir_is_made_private_and_refused_when_open_to_others() {
        let base = std::env::temp_dir().join(format!("dn-rootless-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let uid = nix::unistd::geteuid().as_raw();
        let fresh = base.join("fresh");
        private_dir(&fresh, uid).unwrap();
        let m = std::fs::symlink_metadata(&fresh).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (uid, 0o700));
        // Again: the one there is taken as is.
        private_dir(&fresh, uid).unwrap();
        let open = base.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let e = private_dir(&open, uid).unwrap_err();
        assert!(e.contains("mode 755"), "{e}");
        let e = private_dir(&fresh, uid + 1).unwrap_err();
        assert!(e.contains("not a private directory of ours"), "{e}");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
