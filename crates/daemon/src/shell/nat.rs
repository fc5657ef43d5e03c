//! `dummynet shell`'s way beyond the host: forwarding and NAT in the
//! namespace the shell was started in, so that the command behind the link
//! reaches whatever that namespace reaches (`curl https://...` from a
//! shell on a laptop, the outer shell's peer from a nested shell), as
//! mahimahi's shells do.
//!
//! ```text
//!   command 100.64.K.2 ── link ── dn-PID 100.64.K.1 ─[forward, masquerade]─ eth0 ── the world
//!           fd64:646e:…::2                fd64:646e:…::1
//! ```
//!
//! - NAT: one nftables table of our own, `inet dummynet-shell-PID`, with one
//!   rule per family: what comes from the shell's subnets and leaves by any
//!   other interface is masqueraded (NAT66 for IPv6, the way a home router
//!   does NAT44: the link's addresses are private, fd64:646e::/32 and
//!   100.64.0.0/10). Without `nft`, the same with `iptables`/`ip6tables`
//!   in a chain of our own, `DN-SHELL-PID`, jumped to from POSTROUTING.
//!   Nobody else's table, chain or rule is touched, and ours is deleted when
//!   the shell ends. A shell killed with SIGKILL cannot delete it: the next
//!   shell started in that namespace deletes the tables of shells that are
//!   no longer running.
//! - Forwarding: `net.ipv4.ip_forward`, and for IPv6 the per-interface
//!   `force_forwarding` (Linux 6.17+): `conf/all/forwarding` would make every
//!   interface ignore router advertisements (with `accept_ra` 1, the usual
//!   value), and a host that loses them loses its IPv6 default route. On an
//!   older kernel `all/forwarding` is set only if no interface would lose
//!   them that way; otherwise IPv6 reaches this host only, and the shell
//!   says so.
//! - The values found are put back when the last shell of the namespace
//!   ends: shells that run at the same time share a record of them
//!   (`/run/dummynet/forwarding/`, or the user's own directory without
//!   root: [`super::rootless::runtime_dir`], under a lock), so the first to
//!   end does not turn forwarding off under the others, and a shell that
//!   was killed is recognised as gone (its pid and start time).
//!
//! A firewall that drops forwarded traffic (a FORWARD policy of DROP, as
//! Docker sets) still drops the shell's: an accept in our own table cannot
//! overrule a drop in another one, and we do not edit other tables.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use dummynet_io::rtnl::{set_sysctl, sysctl};
use nix::fcntl::{Flock, FlockArg};

use crate::system::{find_program, search_dirs};

/// How (and whether) the shell lets its command's traffic out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Nat {
    /// `nft` if installed, else `iptables`/`ip6tables`.
    #[default]
    Auto,
    Nft,
    Iptables,
    /// No forwarding and no NAT: the command reaches this namespace's
    /// addresses (its peer) and nothing further.
    Off,
}

/// The shell's side of the link in the namespace it was started in.
pub struct Inside<'a> {
    /// Our end of the veth (`dn-PID`).
    pub far_if: &'a str,
    /// The link's IPv4 subnet and prefix length.
    pub v4: (Ipv4Addr, u8),
    /// The link's IPv6 subnet, if IPv6 is set up on it.
    pub v6: Option<(Ipv6Addr, u8)>,
}

/// Forwarding and NAT set up for one shell; undone by [`WayOut::close`],
/// or on drop (errors then go to stderr).
pub struct WayOut {
    firewall: Firewall,
    name: String,
    lease: Option<Lease>,
    /// What the shell should tell the user (IPv6 left local, and why).
    pub notes: Vec<String>,
    closed: bool,
}

impl WayOut {
    /// Sets up NAT and forwarding for `inside` in the calling thread's
    /// namespace (the shell's main thread: the namespace it was started
    /// in), after removing what shells that are gone left there. `None`
    /// with `Nat::Off`.
    pub fn open(nat: Nat, inside: &Inside<'_>) -> Result<Option<WayOut>, NatError> {
        let Some(firewall) = Firewall::find(nat).map_err(NatError::Firewall)? else {
            return Ok(None);
        };
        let me = std::process::id();
        let name = firewall.name(me);
        let mut notes = Vec::new();
        // Ours can only be there if a shell that had our pid was killed.
        for (stale, pid) in firewall.ours().map_err(NatError::Firewall)? {
            if pid == me || Holder::of(pid).is_none() {
                if let Err(e) = firewall.remove(&stale) {
                    notes.push(format!(
                        "removing {stale}, left by a shell that is gone: {e}"
                    ));
                }
            }
        }
        if let (Firewall::Iptables { v6: None, .. }, Some(_)) = (&firewall, inside.v6) {
            notes.push("no `ip6tables`: IPv6 from inside stops at this host".into());
        }
        let mut out = WayOut {
            firewall,
            name,
            lease: None,
            notes,
            closed: false,
        };
        out.firewall
            .install(&out.name, inside)
            .map_err(NatError::Firewall)?;
        let wanted = forwarding(inside, &mut out.notes).map_err(NatError::Forwarding)?;
        out.lease = Some(Lease::acquire(&wanted).map_err(NatError::Forwarding)?);
        Ok(Some(out))
    }

    /// Where the rules are, for messages: `nft table inet dummynet-shell-PID`.
    pub fn describe(&self) -> String {
        self.firewall.describe(&self.name)
    }

    /// Removes the rules and gives the forwarding settings back (to their
    /// old values if no other shell of this namespace still runs).
    pub fn close(mut self) -> Result<(), NatError> {
        self.undo()
    }

    fn undo(&mut self) -> Result<(), NatError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let rules = self.firewall.remove(&self.name);
        let lease = self.lease.take().map_or(Ok(()), Lease::release);
        match (rules, lease) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(e), Ok(())) => Err(NatError::Firewall(e)),
            (Ok(()), Err(e)) => Err(NatError::Forwarding(e)),
            (Err(rules), Err(forwarding)) => Err(NatError::Both { rules, forwarding }),
        }
    }
}

/// Why the way out (NAT and forwarding) could not be set up or taken down;
/// each with the words of the program or file that refused.
#[derive(Debug, thiserror::Error)]
pub enum NatError {
    /// Finding nft or iptables, or their rules.
    #[error("{0}")]
    Firewall(String),
    /// The namespace's forwarding settings, or the shells' shared record
    /// of them.
    #[error("{0}")]
    Forwarding(String),
    /// Taking down both.
    #[error("{rules}; {forwarding}")]
    Both { rules: String, forwarding: String },
}

impl Drop for WayOut {
    fn drop(&mut self) {
        if let Err(e) = self.undo() {
            say!("dummynet shell: removing forwarding and NAT: {e}");
        }
    }
}

// ---------------------------------------------------------------------------
// The firewall: nft, or iptables
// ---------------------------------------------------------------------------

enum Firewall {
    Nft(PathBuf),
    Iptables { v4: PathBuf, v6: Option<PathBuf> },
}

const NFT_PREFIX: &str = "dummynet-shell-";
/// iptables chain names are at most 28 characters: `DN-SHELL-4194304` fits.
const IPT_PREFIX: &str = "DN-SHELL-";

impl Firewall {
    fn find(nat: Nat) -> Result<Option<Firewall>, String> {
        let nft = || find_program("nft").map(Firewall::Nft);
        let ipt = || {
            find_program("iptables").map(|v4| Firewall::Iptables {
                v4,
                v6: find_program("ip6tables"),
            })
        };
        let searched = search_dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        match nat {
            Nat::Off => Ok(None),
            Nat::Nft => nft().map(Some).ok_or_else(|| {
                format!("--nat nft: no `nft` program in {searched} (it comes with nftables)")
            }),
            Nat::Iptables => ipt()
                .map(Some)
                .ok_or_else(|| format!("--nat iptables: no `iptables` program in {searched}")),
            Nat::Auto => nft().or_else(ipt).map(Some).ok_or_else(|| {
                format!(
                    "neither `nft` nor `iptables` found in {searched}: the shell needs one of \
                     them to forward and NAT its command's traffic beyond this host. Install \
                     nftables, or pass --nat off to keep the command's traffic to this host"
                )
            }),
        }
    }

    fn name(&self, pid: u32) -> String {
        match self {
            Firewall::Nft(_) => format!("{NFT_PREFIX}{pid}"),
            Firewall::Iptables { .. } => format!("{IPT_PREFIX}{pid}"),
        }
    }

    fn describe(&self, name: &str) -> String {
        match self {
            Firewall::Nft(_) => format!("nftables table inet {name}"),
            Firewall::Iptables { .. } => format!("iptables nat chain {name}"),
        }
    }

    /// Every shell's table or chain in this namespace, with its pid.
    fn ours(&self) -> Result<Vec<(String, u32)>, String> {
        let (text, word, prefix) = match self {
            // `table inet dummynet-shell-123`
            Firewall::Nft(nft) => (run(nft, &["list", "tables", "inet"], None)?, 2, NFT_PREFIX),
            // `-N DN-SHELL-123`
            Firewall::Iptables { v4, v6 } => {
                let mut text = run(v4, &["-w", "-t", "nat", "-S"], None)?;
                if let Some(v6) = v6 {
                    text += &run(v6, &["-w", "-t", "nat", "-S"], None).unwrap_or_default();
                }
                (text, 1, IPT_PREFIX)
            }
        };
        let mut found: Vec<(String, u32)> = text
            .lines()
            .filter_map(|l| {
                let name = l.split_whitespace().nth(word)?;
                let pid = name.strip_prefix(prefix)?.parse().ok()?;
                Some((name.to_string(), pid))
            })
            .collect();
        found.sort();
        found.dedup();
        Ok(found)
    }

    fn install(&self, name: &str, inside: &Inside<'_>) -> Result<(), String> {
        let far = inside.far_if;
        let (v4, v4_len) = inside.v4;
        match self {
            Firewall::Nft(nft) => {
                let mut script = format!(
                    "table inet {name} {{\n\
                     \tchain postrouting {{\n\
                     \t\ttype nat hook postrouting priority srcnat; policy accept;\n\
                     \t\tip saddr {v4}/{v4_len} oifname != \"{far}\" masquerade\n"
                );
                if let Some((v6, v6_len)) = inside.v6 {
                    script +=
                        &format!("\t\tip6 saddr {v6}/{v6_len} oifname != \"{far}\" masquerade\n");
                }
                script += "\t}\n}\n";
                run(nft, &["-f", "-"], Some(&script)).map(drop)
            }
            Firewall::Iptables { v4: ipt4, v6: ipt6 } => {
                let src = format!("{v4}/{v4_len}");
                chain_install(ipt4, name, &src, far)?;
                match (ipt6, inside.v6) {
                    (Some(ipt6), Some((v6, v6_len))) => {
                        chain_install(ipt6, name, &format!("{v6}/{v6_len}"), far)
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// Deletes the table or chains `name`; one that is not there is fine.
    fn remove(&self, name: &str) -> Result<(), String> {
        match self {
            Firewall::Nft(nft) => {
                let tables = run(nft, &["list", "tables", "inet"], None)?;
                let there = tables
                    .lines()
                    .any(|l| l.split_whitespace().nth(2) == Some(name));
                if there {
                    run(nft, &["delete", "table", "inet", name], None)?;
                }
                Ok(())
            }
            Firewall::Iptables { v4, v6 } => {
                let first = chain_remove(v4, name);
                let second = v6.as_ref().map_or(Ok(()), |v6| chain_remove(v6, name));
                first.and(second)
            }
        }
    }
}

fn chain_install(ipt: &Path, chain: &str, src: &str, far: &str) -> Result<(), String> {
    run(ipt, &["-w", "-t", "nat", "-N", chain], None)?;
    run(
        ipt,
        &[
            "-w",
            "-t",
            "nat",
            "-A",
            chain,
            "-s",
            src,
            "!",
            "-o",
            far,
            "-j",
            "MASQUERADE",
        ],
        None,
    )?;
    run(
        ipt,
        &["-w", "-t", "nat", "-A", "POSTROUTING", "-j", chain],
        None,
    )
    .map(drop)
}

fn chain_remove(ipt: &Path, chain: &str) -> Result<(), String> {
    if run(ipt, &["-w", "-t", "nat", "-S", chain], None).is_err() {
        // No such chain.
        return Ok(());
    }
    // The jump may be missing if an install stopped half-way.
    let _ = run(
        ipt,
        &["-w", "-t", "nat", "-D", "POSTROUTING", "-j", chain],
        None,
    );
    run(ipt, &["-w", "-t", "nat", "-F", chain], None)?;
    run(ipt, &["-w", "-t", "nat", "-X", chain], None).map(drop)
}

/// Runs `program args` (with `input` on its stdin) and returns its stdout,
/// or an error with the command line and what it printed on stderr.
fn run(program: &Path, args: &[&str], input: Option<&str>) -> Result<String, String> {
    let line = format!("{} {}", program.display(), args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run `{line}`: {e}"))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| format!("`{line}`: writing its input: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`{line}`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{line}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

// ---------------------------------------------------------------------------
// Forwarding
// ---------------------------------------------------------------------------

/// One sysctl a shell needs at a value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Want {
    /// Relative to /proc/sys.
    path: String,
    value: String,
    /// Whether the shell cannot work without it (a per-interface one may
    /// vanish with its interface).
    required: bool,
}

impl Want {
    fn new(path: String, required: bool) -> Want {
        Want {
            path,
            value: "1".into(),
            required,
        }
    }
}

/// The sysctls that make the calling thread's namespace forward the
/// shell's traffic. Our own interface's are set here (they go with it);
/// the others are returned, to be leased.
fn forwarding(inside: &Inside<'_>, notes: &mut Vec<String>) -> Result<Vec<Want>, String> {
    let mut wanted = vec![Want::new("net/ipv4/ip_forward".into(), true)];
    if inside.v6.is_none() || !Path::new("/proc/sys/net/ipv6").exists() {
        return Ok(wanted);
    }
    let far = inside.far_if;
    let own = format!("net/ipv6/conf/{far}/force_forwarding");
    let others: Vec<String> = fs::read_dir("/proc/sys/net/ipv6/conf")
        .map_err(|e| format!("/proc/sys/net/ipv6/conf: {e}"))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !["all", "default", "lo", far].contains(&n.as_str()))
        .collect();
    if Path::new("/proc/sys").join(&own).exists() {
        // Forwarding is decided by the interface a packet comes in on: ours
        // on the way out, the others on the way back.
        set_sysctl(&own, "1").map_err(|e| e.to_string())?;
        wanted.extend(
            others
                .into_iter()
                .map(|n| Want::new(format!("net/ipv6/conf/{n}/force_forwarding"), false)),
        );
        return Ok(wanted);
    }
    let all = "net/ipv6/conf/all/forwarding";
    if sysctl(all).map_err(|e| e.to_string())? == "1" {
        return Ok(wanted);
    }
    let deaf: Vec<String> = others
        .into_iter()
        .filter(|n| sysctl(&format!("net/ipv6/conf/{n}/accept_ra")).is_ok_and(|v| v == "1"))
        .collect();
    if deaf.is_empty() {
        wanted.push(Want::new(all.into(), true));
    } else {
        notes.push(format!(
            "IPv6 reaches this host only: forwarding it would make {} ignore router \
             advertisements (accept_ra 1), and this kernel has no per-interface \
             force_forwarding (Linux 6.17+). Set their accept_ra to 2 to let shells forward IPv6",
            deaf.join(", ")
        ));
    }
    Ok(wanted)
}

/// Where shells record the forwarding settings they changed, one file per
/// network namespace (by inode), all under one lock.
fn lease_dir() -> PathBuf {
    crate::system::runtime_dir().join("forwarding")
}

/// A process, told apart from a later one with the same pid by its start
/// time (clock ticks after boot, `/proc/PID/stat` field 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Holder {
    pid: u32,
    start: u64,
}

impl Holder {
    fn of(pid: u32) -> Option<Holder> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) may hold spaces and parentheses: the
        // fields after it start after the last ')'. Field 3 is the first.
        let rest = stat.get(stat.rfind(')')? + 1..)?;
        let start = rest.split_whitespace().nth(22 - 3)?.parse().ok()?;
        Some(Holder { pid, start })
    }

    fn alive(self) -> bool {
        Holder::of(self.pid) == Some(self)
    }
}

/// A sysctl a shell changed: its value before, and the value it set.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Saved {
    path: String,
    before: String,
    set: String,
}

/// The shared record of one namespace: who runs there, what they changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct LeaseState {
    holders: Vec<Holder>,
    saved: Vec<Saved>,
}

impl LeaseState {
    /// Lines `holder PID START` and `sysctl PATH BEFORE SET`; anything else
    /// (a file cut short by a crash) is skipped.
    fn parse(text: &str) -> LeaseState {
        let mut state = LeaseState::default();
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["holder", pid, start] => {
                    if let (Ok(pid), Ok(start)) = (pid.parse(), start.parse()) {
                        state.holders.push(Holder { pid, start });
                    }
                }
                ["sysctl", path, before, set] => state.saved.push(Saved {
                    path: path.to_string(),
                    before: before.to_string(),
                    set: set.to_string(),
                }),
                _ => {}
            }
        }
        state
    }

    fn render(&self) -> String {
        let mut s = String::new();
        for h in &self.holders {
            s += &format!("holder {} {}\n", h.pid, h.start);
        }
        for x in &self.saved {
            s += &format!("sysctl {} {} {}\n", x.path, x.before, x.set);
        }
        s
    }

    /// `me` joins: returns the sysctls to write. `alive` says whether a
    /// holder still runs, `read` reads a sysctl. When every holder is gone
    /// (killed before it could restore), what they saved is kept where the
    /// value is still theirs: it is the value from before any shell.
    fn join(
        &mut self,
        me: Holder,
        wanted: &[Want],
        alive: impl Fn(Holder) -> bool,
        read: impl Fn(&str) -> Result<String, String>,
    ) -> Result<Vec<(String, String)>, String> {
        self.holders.retain(|&h| h != me && alive(h));
        if self.holders.is_empty() {
            self.saved
                .retain(|x| read(&x.path).is_ok_and(|now| now == x.set));
        }
        let mut writes = Vec::new();
        for w in wanted {
            let now = match read(&w.path) {
                Ok(v) => v,
                Err(e) if w.required => return Err(e),
                Err(_) => continue,
            };
            if now == w.value {
                continue;
            }
            if !self.saved.iter().any(|x| x.path == w.path) {
                self.saved.push(Saved {
                    path: w.path.clone(),
                    before: now,
                    set: w.value.clone(),
                });
            }
            writes.push((w.path.clone(), w.value.clone()));
        }
        self.holders.push(me);
        Ok(writes)
    }

    /// `me` leaves: returns the sysctls to put back, all of them once no
    /// running holder is left.
    fn leave(&mut self, me: Holder, alive: impl Fn(Holder) -> bool) -> Vec<(String, String)> {
        self.holders.retain(|&h| h != me && alive(h));
        if !self.holders.is_empty() {
            return Vec::new();
        }
        std::mem::take(&mut self.saved)
            .into_iter()
            .map(|x| (x.path, x.before))
            .collect()
    }
}

/// This shell's share of its namespace's forwarding settings.
struct Lease {
    state: PathBuf,
    me: Holder,
}

/// The record's lock and file, read.
struct Locked {
    _lock: Flock<File>,
    file: File,
    state: LeaseState,
}

impl Lease {
    fn acquire(wanted: &[Want]) -> Result<Lease, String> {
        let me = Holder::of(std::process::id())
            .ok_or("cannot read our own start time in /proc/self/stat")?;
        let ns = dummynet_io::netns::Netns::current()
            .and_then(|n| n.inode())
            .map_err(|e| e.to_string())?;
        let lease = Lease {
            state: lease_dir().join(format!("net-{ns}")),
            me,
        };
        let mut locked = lease.lock()?;
        let writes = locked.state.join(me, wanted, Holder::alive, |p| {
            sysctl(p).map_err(|e| e.to_string())
        })?;
        // Recorded before any change, so that a crash half-way still
        // leaves the values to restore.
        locked.save(&lease.state)?;
        for (path, value) in writes {
            set_sysctl(&path, &value).map_err(|e| e.to_string())?;
        }
        Ok(lease)
    }

    fn release(self) -> Result<(), String> {
        let mut locked = self.lock()?;
        let restores = locked.state.leave(self.me, Holder::alive);
        let mut failed = Vec::new();
        for (path, value) in restores {
            match set_sysctl(&path, &value) {
                Ok(()) => {}
                // An interface that went away took its setting along.
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => {}
                Err(e) => failed.push(e.to_string()),
            }
        }
        locked.save(&self.state)?;
        if failed.is_empty() {
            Ok(())
        } else {
            Err(format!("restoring forwarding: {}", failed.join("; ")))
        }
    }

    fn lock(&self) -> Result<Locked, String> {
        let dir = &lease_dir();
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let lock_path = dir.join("lock");
        let open = |p: &Path| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(p)
                .map_err(|e| format!("{}: {e}", p.display()))
        };
        let lock = Flock::lock(open(&lock_path)?, FlockArg::LockExclusive)
            .map_err(|(_, e)| format!("locking {}: {e}", lock_path.display()))?;
        let mut file = open(&self.state)?;
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| format!("{}: {e}", self.state.display()))?;
        Ok(Locked {
            _lock: lock,
            file,
            state: LeaseState::parse(&text),
        })
    }
}

impl Locked {
    /// Writes the record back, or removes it once it is empty.
    fn save(&mut self, path: &Path) -> Result<(), String> {
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        if self.state == LeaseState::default() {
            return match fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(err(e)),
                _ => Ok(()),
            };
        }
        self.file.set_len(0).map_err(err)?;
        self.file.seek(SeekFrom::Start(0)).map_err(err)?;
        self.file
            .write_all(self.state.render().as_bytes())
            .map_err(err)?;
        self.file.sync_data().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    const A: Holder = Holder { pid: 10, start: 1 };
    const B: Holder = Holder { pid: 11, start: 2 };

    fn want(path: &str, required: bool) -> Want {
        Want::new(path.into(), required)
    }

    /// A fake /proc/sys.
    struct Sysctls(RefCell<HashMap<String, String>>);

    impl Sysctls {
        fn new(values: &[(&str, &str)]) -> Sysctls {
            Sysctls(RefCell::new(
                values
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ))
        }
        fn read(&self, p: &str) -> Result<String, String> {
            self.0.borrow().get(p).cloned().ok_or(format!("{p}: gone"))
        }
        fn apply(&self, writes: Vec<(String, String)>) {
            for (k, v) in writes {
                self.0.borrow_mut().insert(k, v);
            }
        }
        fn get(&self, p: &str) -> String {
            self.read(p).unwrap()
        }
    }

    #[test]
    fn the_last_shell_out_restores_what_the_first_found() {
        let sys = Sysctls::new(&[("ip_forward", "0"), ("eth0/ff", "0"), ("eth1/ff", "1")]);
        let wanted = [
            want("ip_forward", true),
            want("eth0/ff", false),
            want("eth1/ff", false),
            want("gone/ff", false),
        ];
        let mut state = LeaseState::default();
        let writes = state.join(A, &wanted, |_| true, |p| sys.read(p)).unwrap();
        sys.apply(writes);
        assert_eq!(sys.get("ip_forward"), "1");
        assert_eq!(sys.get("eth0/ff"), "1");
        // A second shell finds forwarding on: it changes nothing, and the
        // record keeps the values from before the first.
        let mut state = LeaseState::parse(&state.render());
        assert!(state
            .join(B, &wanted, |_| true, |p| sys.read(p))
            .unwrap()
            .is_empty());
        // The first to leave restores nothing while the other runs.
        assert!(state.leave(A, |_| true).is_empty());
        assert_eq!(sys.get("ip_forward"), "1");
        // The last one restores what was there before either.
        let restores = state.leave(B, |_| true);
        sys.apply(restores);
        assert_eq!(sys.get("ip_forward"), "0");
        assert_eq!(sys.get("eth0/ff"), "0");
        assert_eq!(sys.get("eth1/ff"), "1");
        assert_eq!(state, LeaseState::default());
    }

    #[test]
    fn a_killed_shells_changes_are_undone_by_the_next() {
        let sys = Sysctls::new(&[("ip_forward", "0")]);
        let wanted = [want("ip_forward", true)];
        let mut state = LeaseState::default();
        sys.apply(state.join(A, &wanted, |_| true, |p| sys.read(p)).unwrap());
        // A is killed; B comes and goes: the value from before A is back.
        let mut state = LeaseState::parse(&state.render());
        let dead = |h: Holder| h != A;
        assert!(state
            .join(B, &wanted, dead, |p| sys.read(p))
            .unwrap()
            .is_empty());
        assert_eq!(state.holders, vec![B]);
        sys.apply(state.leave(B, dead));
        assert_eq!(sys.get("ip_forward"), "0");
    }

    #[test]
    fn a_value_changed_since_by_someone_else_is_not_restored() {
        let sys = Sysctls::new(&[("ip_forward", "0"), ("eth0/ff", "0")]);
        let wanted = [want("ip_forward", true), want("eth0/ff", false)];
        let mut state = LeaseState::default();
        sys.apply(state.join(A, &wanted, |_| true, |p| sys.read(p)).unwrap());
        // A was killed, then someone set eth0/ff to a value of their own:
        // that one, not A's "before", is what B puts back.
        sys.apply(vec![("eth0/ff".into(), "2".into())]);
        let dead = |h: Holder| h != A;
        let mut b = LeaseState::parse(&state.render());
        let writes = b.join(B, &wanted, dead, |p| sys.read(p)).unwrap();
        assert_eq!(writes, vec![("eth0/ff".to_string(), "1".to_string())]);
        sys.apply(writes);
        sys.apply(b.leave(B, |_| true));
        assert_eq!(sys.get("eth0/ff"), "2");
        assert_eq!(sys.get("ip_forward"), "0");
    }

    #[test]
    fn a_required_sysctl_that_cannot_be_read_is_an_error() {
        let sys = Sysctls::new(&[]);
        let mut state = LeaseState::default();
        let e = state
            .join(A, &[want("ip_forward", true)], |_| true, |p| sys.read(p))
            .unwrap_err();
        assert!(e.contains("ip_forward"), "{e}");
    }

    #[test]
    fn a_torn_record_is_read_as_far_as_it_goes() {
        let s = LeaseState::parse("holder 5 7\nsysctl net/ipv4/ip_forward 0 1\nholder 9\nsysc");
        assert_eq!(s.holders, vec![Holder { pid: 5, start: 7 }]);
        assert_eq!(s.saved.len(), 1);
        assert_eq!(LeaseState::parse(&s.render()), s);
    }

    #[test]
    fn we_are_alive_and_a_made_up_start_time_is_not() {
        let me = Holder::of(std::process::id()).unwrap();
        assert!(me.alive());
        let other = Holder {
            start: me.start + 1,
            ..me
        };
        assert!(!other.alive());
    }
}
