//! The firewall rules that send the host's traffic to an NFQUEUE (read by
//! [`crate::nfqueue::HostQueue`]), installed and removed again.
//!
//! Two ways, behind one [`Interception`]:
//!
//! - [`nftables`]: a table of our own per queue, `inet dummynet-<q>`,
//!   written over netlink. It is what `nft list ruleset` shows on current
//!   distributions, it touches no one else's table, and it is *owned* by
//!   the daemon's netlink socket: the kernel deletes it when the daemon's
//!   process ends, however it ends, so a crashed daemon leaves nothing
//!   behind.
//! - [`iptables`]: a chain `DUMMYNET-<q>` in the filter table of the
//!   iptables programs, the fallback where nftables is missing.
//!
//! [`Firewall::Auto`] takes nftables, and iptables only when the kernel has
//! no nf_tables (or neither of the two ways nftables has to hand a packet
//! to a queue), or when the spec carries iptables match arguments other
//! than `-o IF` (which nftables writes as `oifname IF`).
//!
//! # Network namespaces
//!
//! Rules are installed in the network namespace of the calling thread
//! (the netlink socket is created there; iptables child processes start
//! in their parent thread's namespaces) and removed from that namespace
//! again even when removal is called from another thread.
//!
//! # Stale rules
//!
//! Before binding a queue, [`remove_stale`] takes out what a dead daemon
//! may have left for it: iptables chains of an earlier daemon (whose
//! `--queue-bypass` rules would otherwise queue packets to the new daemon
//! a second time), and an nftables table of that name not owned by a live
//! socket. Callers must hold the queue's [`crate::portlock`] first, so
//! that what is found is a dead daemon's and not a running one's.

pub mod iptables;
pub mod nftables;

use std::fmt;
use std::io;

pub use iptables::Backend;

/// What can go wrong with the rules.
#[derive(Debug, thiserror::Error)]
pub enum FirewallError {
    /// The interception spec asks for something impossible.
    #[error("interception spec: {0}")]
    Spec(String),
    /// No iptables program of the wanted kind was found.
    #[error("no usable iptables: {0}")]
    NoIptables(String),
    /// An iptables command could not be started.
    #[error("running `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why it could not run.
        source: io::Error,
    },
    /// An iptables command ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Iptables {
        /// The command line, quoted as a shell would need it.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr, trimmed.
        stderr: String,
    },
    /// Entering or identifying the network namespace the rules belong to failed.
    #[error("network namespace: {op}: {source}")]
    Netns {
        /// What was being done.
        op: &'static str,
        /// The error.
        source: io::Error,
    },
    /// Talking to nf_tables over netlink failed, or the kernel refused a
    /// step. `op` names the step (e.g. "adding chain inet dummynet-7 output").
    #[error("nftables: {op}: {source}{hint}", hint = nftables::errno_hint(source))]
    Nftables {
        /// What was being done.
        op: String,
        /// The socket's error or the kernel's answer.
        source: io::Error,
    },
    /// This kernel cannot do it with nftables: no nf_tables, or no way to
    /// hand a packet to a queue from a rule. [`Firewall::Auto`] falls back
    /// to iptables on this error.
    #[error("nftables cannot be used here: {0}")]
    NftablesUnsupported(String),
}

/// Which firewall writes the rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Firewall {
    /// nftables, or iptables (as [`Backend::detect`] finds it) where
    /// nftables cannot be used.
    #[default]
    Auto,
    /// nftables only: a table `dummynet-<q>` of our own.
    Nftables,
    /// These iptables programs only.
    Iptables(Backend),
}

impl fmt::Display for Firewall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Firewall::Auto => f.write_str("auto (nftables, else iptables)"),
            Firewall::Nftables => f.write_str("nftables"),
            Firewall::Iptables(b) => write!(f, "iptables, {b}"),
        }
    }
}

/// IPv4 or IPv6 (iptables or ip6tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// iptables.
    V4,
    /// ip6tables.
    V6,
}

/// Which traffic directions to intercept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Directions {
    /// Packets to this host: the INPUT hook.
    pub input: bool,
    /// Packets from this host: the OUTPUT hook.
    pub output: bool,
    /// Packets routed through this host: the FORWARD hook.
    pub forward: bool,
}

/// A netfilter hook we attach to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HookPoint {
    Input,
    Output,
    Forward,
}

impl Directions {
    /// In and out, the host's own traffic.
    pub const HOST: Directions = Directions {
        input: true,
        output: true,
        forward: false,
    };

    pub(crate) fn hooks(self) -> impl Iterator<Item = HookPoint> {
        [
            (self.input, HookPoint::Input),
            (self.output, HookPoint::Output),
            (self.forward, HookPoint::Forward),
        ]
        .into_iter()
        .filter_map(|(on, hook)| on.then_some(hook))
    }
}

/// What to send to the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterceptSpec {
    /// The NFQUEUE number.
    pub queue: u16,
    /// `bypass`: while no socket is bound to the queue, packets pass
    /// instead of being dropped. On by default so that a dead daemon does
    /// not cut the host off the network (and its own SSH session). Bypass
    /// does not help while a daemon is bound but stuck.
    pub bypass: bool,
    /// Which hooks send packets to the queue.
    pub directions: Directions,
    /// Intercept IPv4.
    pub ipv4: bool,
    /// Intercept IPv6.
    pub ipv6: bool,
    /// Extra iptables match arguments for the NFQUEUE rule, e.g.
    /// `["-p", "udp", "--dport", "5201"]` or `["-o", "eth0"]`, given to both
    /// iptables and ip6tables (so address matches need a single family).
    /// iptables syntax: [`Firewall::Auto`] then uses iptables, and
    /// [`Firewall::Nftables`] refuses them.
    pub matches: Vec<String>,
    /// Also intercept traffic on the loopback interface. Off by default:
    /// local services (the DNS stub resolver, databases, the daemon's own
    /// control socket) talk over `lo` and are not what a user means by
    /// "the host's traffic"; and a loopback packet crosses both OUTPUT and
    /// INPUT, so with both directions on it would be shaped twice.
    pub loopback: bool,
    /// Which firewall writes the rules.
    pub firewall: Firewall,
    /// Packets carrying this netfilter mark are let through before the
    /// queue rule: the daemon's own copies, sent back with this mark (see
    /// [`crate::rawip`]), must not be queued a second time.
    pub pass_mark: Option<u32>,
}

impl InterceptSpec {
    /// The host's own traffic in and out, IPv4 and IPv6, loopback excluded,
    /// with bypass, by [`Firewall::Auto`].
    pub fn new(queue: u16) -> Self {
        Self {
            queue,
            bypass: true,
            directions: Directions::HOST,
            ipv4: true,
            ipv6: true,
            matches: Vec::new(),
            loopback: false,
            firewall: Firewall::Auto,
            pass_mark: None,
        }
    }

    pub(crate) fn families(&self) -> impl Iterator<Item = Family> {
        [(self.ipv4, Family::V4), (self.ipv6, Family::V6)]
            .into_iter()
            .filter_map(|(on, f)| on.then_some(f))
    }

    /// Refuses a spec that would install nothing.
    fn check(&self) -> Result<(), FirewallError> {
        if !self.ipv4 && !self.ipv6 {
            return Err(FirewallError::Spec(
                "no address family: enable IPv4, IPv6 or both".into(),
            ));
        }
        if self.directions.hooks().next().is_none() {
            return Err(FirewallError::Spec(
                "no direction: enable input, output, forward or several".into(),
            ));
        }
        Ok(())
    }
}

/// What [`remove_stale`] found and removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StaleCleanup {
    /// nftables tables deleted.
    pub tables: usize,
    /// iptables jump rules deleted from the built-in chains.
    pub jumps: usize,
    /// iptables chains flushed and deleted.
    pub chains: usize,
}

impl StaleCleanup {
    /// Nothing was found.
    pub fn is_empty(&self) -> bool {
        *self == StaleCleanup::default()
    }
}

impl std::ops::AddAssign for StaleCleanup {
    fn add_assign(&mut self, o: StaleCleanup) {
        self.tables += o.tables;
        self.jumps += o.jumps;
        self.chains += o.chains;
    }
}

impl fmt::Display for StaleCleanup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} nftables table(s), {} iptables chain(s) and {} jump(s) to them",
            self.tables, self.chains, self.jumps
        )
    }
}

/// Removes what a dead daemon may have left for `queue` in the calling
/// thread's namespace: nftables tables `dummynet-<queue>` that no live
/// socket owns, and iptables chains `DUMMYNET-<queue>` with the rules
/// jumping to them, in every iptables whose tables exist.
///
/// Hold the queue's [`crate::portlock`] first: a running daemon's iptables
/// chain looks just like a dead one's.
pub fn remove_stale(queue: u16) -> Result<StaleCleanup, FirewallError> {
    let mut done = match nftables::remove_stale(queue) {
        Ok(n) => StaleCleanup {
            tables: n,
            ..StaleCleanup::default()
        },
        // No nf_tables: nothing of ours can be there.
        Err(FirewallError::NftablesUnsupported(_)) => StaleCleanup::default(),
        Err(e) => return Err(e),
    };
    done += iptables::remove_stale_everywhere(queue)?;
    Ok(done)
}

/// The rules sending traffic to one NFQUEUE, removed when dropped.
#[derive(Debug)]
pub struct Interception {
    rules: Rules,
    fallback: Option<String>,
}

#[derive(Debug)]
enum Rules {
    Nftables(nftables::Table),
    Iptables(iptables::Chains),
}

impl Interception {
    /// Installs the rules of `spec` with the firewall it names, replacing
    /// leftovers of the same name. On a failure half-way, what was already
    /// added is removed again.
    pub fn install(spec: &InterceptSpec) -> Result<Interception, FirewallError> {
        spec.check()?;
        match spec.firewall {
            Firewall::Nftables => Ok(Interception {
                rules: Rules::Nftables(nftables::Table::install(spec)?),
                fallback: None,
            }),
            Firewall::Iptables(backend) => Ok(Interception {
                rules: Rules::Iptables(iptables::Chains::install(spec, backend)?),
                fallback: None,
            }),
            Firewall::Auto
                if !spec.matches.is_empty() && nftables::out_interface(&spec.matches).is_none() =>
            {
                Ok(Interception {
                    rules: Rules::Iptables(iptables::Chains::install(spec, Backend::detect()?)?),
                    fallback: Some("the interception has iptables match arguments".into()),
                })
            }
            Firewall::Auto => match nftables::Table::install(spec) {
                Ok(t) => Ok(Interception {
                    rules: Rules::Nftables(t),
                    fallback: None,
                }),
                Err(FirewallError::NftablesUnsupported(why)) => {
                    let backend = Backend::detect().map_err(|e| {
                        FirewallError::NoIptables(format!(
                            "{e}; and nftables cannot be used: {why}"
                        ))
                    })?;
                    Ok(Interception {
                        rules: Rules::Iptables(iptables::Chains::install(spec, backend)?),
                        fallback: Some(why),
                    })
                }
                Err(e) => Err(e),
            },
        }
    }

    /// The firewall that holds the rules: [`Firewall::Nftables`] or
    /// [`Firewall::Iptables`] with its backend.
    pub fn firewall(&self) -> Firewall {
        match &self.rules {
            Rules::Nftables(_) => Firewall::Nftables,
            Rules::Iptables(c) => Firewall::Iptables(c.backend()),
        }
    }

    /// Under [`Firewall::Auto`], why iptables was used instead of nftables.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Where the rules are, in words: `nftables table inet dummynet-7000`.
    pub fn describe(&self) -> String {
        match &self.rules {
            Rules::Nftables(t) => format!("nftables table {} {}", t.family_name(), t.name()),
            Rules::Iptables(c) => format!(
                "iptables chain {} ({})",
                c.chain(),
                c.backend().programs().0
            ),
        }
    }

    /// A command that lists the rules.
    pub fn list_command(&self) -> String {
        match &self.rules {
            Rules::Nftables(t) => format!("nft list table {} {}", t.family_name(), t.name()),
            Rules::Iptables(c) => format!("{} -S {}", c.backend().programs().0, c.chain()),
        }
    }

    /// Removes the rules now, reporting the first failure (all steps are
    /// still tried). Dropping does the same and prints failures to stderr.
    pub fn remove(self) -> Result<(), FirewallError> {
        match self.rules {
            Rules::Nftables(t) => t.remove(),
            Rules::Iptables(c) => c.remove(),
        }
    }
}
