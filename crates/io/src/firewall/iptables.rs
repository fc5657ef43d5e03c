//! iptables: a chain `DUMMYNET-<q>` in the filter table of each family,
//! jumped to from the built-in chains, written by running the iptables
//! programs. The fallback where nftables is missing (see [`super`]).

use std::fmt;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;

use super::{Family, FirewallError, HookPoint, InterceptSpec, StaleCleanup};
use crate::nfqueue::ThreadNetns;

/// Which iptables programs write the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `iptables-legacy` / `ip6tables-legacy`: the x_tables kernel tables,
    /// which `iptables -S` does not show on a distribution whose
    /// `iptables` is iptables-nft.
    Legacy,
    /// `iptables-nft` / `ip6tables-nft`: nf_tables rules in the `ip filter`
    /// and `ip6 filter` tables. The NFQUEUE target goes through the
    /// xtables compatibility expression (`CONFIG_NFT_COMPAT`), so it works
    /// without `CONFIG_NFT_QUEUE`.
    Nft,
    /// `iptables` / `ip6tables`: whichever backend the distribution's
    /// alternatives point at, the one its users list with `iptables -S`.
    System,
}

impl Backend {
    /// The programs for IPv4 and IPv6.
    pub fn programs(self) -> (&'static str, &'static str) {
        match self {
            Backend::Legacy => ("iptables-legacy", "ip6tables-legacy"),
            Backend::Nft => ("iptables-nft", "ip6tables-nft"),
            Backend::System => ("iptables", "ip6tables"),
        }
    }

    fn program(self, family: Family) -> &'static str {
        let (v4, v6) = self.programs();
        match family {
            Family::V4 => v4,
            Family::V6 => v6,
        }
    }

    /// The first backend whose IPv4 program is installed, in the order
    /// System, Nft, Legacy: the rules go where the distribution's own
    /// `iptables` looks.
    pub fn detect() -> Result<Backend, FirewallError> {
        [Backend::System, Backend::Nft, Backend::Legacy]
            .into_iter()
            .find(|b| find_program(b.programs().0).is_some())
            .ok_or_else(|| {
                FirewallError::NoIptables(format!(
                    "none of iptables, iptables-nft, iptables-legacy found in {}",
                    search_path_text()
                ))
            })
    }

    /// The programs exist for the families asked.
    pub fn is_available(self, v4: bool, v6: bool) -> bool {
        let (p4, p6) = self.programs();
        (!v4 || find_program(p4).is_some()) && (!v6 || find_program(p6).is_some())
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Legacy => f.write_str("legacy (iptables-legacy, x_tables)"),
            Backend::Nft => f.write_str("nft (iptables-nft, nf_tables with xtables compat)"),
            Backend::System => f.write_str("system (iptables, as the alternatives select)"),
        }
    }
}

/// Root's usual sbin directories are searched even if PATH lacks them (a
/// daemon started by a service manager or a test harness may have a
/// minimal PATH).
const EXTRA_PATH: [&str; 4] = ["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin"];

fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(EXTRA_PATH.iter().map(PathBuf::from));
    dirs
}

fn search_path_text() -> String {
    search_dirs()
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

fn find_program(name: &str) -> Option<PathBuf> {
    search_dirs().into_iter().map(|d| d.join(name)).find(|p| {
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}

/// The name of the chain holding the NFQUEUE rule of queue `queue`.
pub fn chain_name(queue: u16) -> String {
    format!("DUMMYNET-{queue}")
}

/// One rule we added to a built-in chain, to delete it by its exact spec.
#[derive(Clone, Debug)]
struct Jump {
    family: Family,
    chain: &'static str,
    args: Vec<String>,
}

/// The iptables rules sending traffic to one NFQUEUE, removed when dropped.
///
/// Layout, in the filter table of each family:
///
/// ```text
/// -N DUMMYNET-<q>
/// [-A DUMMYNET-<q> -m mark --mark <pass_mark> -j RETURN]
/// -A DUMMYNET-<q> <matches> -j NFQUEUE --queue-num <q> [--queue-bypass]
/// -I INPUT 1 [! -i lo] -j DUMMYNET-<q>
/// -I OUTPUT 1 [! -o lo] -j DUMMYNET-<q>
/// -I FORWARD 1 -j DUMMYNET-<q>
/// ```
///
/// A chain of our own makes the rules easy to find and remove, even after
/// a crash, without touching anyone else's. The jumps go first so that
/// earlier rules (e.g. accepting established connections) do not bypass the
/// shaper.
///
/// iptables runs in the network namespace of the thread calling
/// [`install`](Self::install) (a child process starts in its parent
/// thread's namespaces); removal goes back to that namespace even when
/// called from another thread. iptables is run with `-w` so that it waits
/// for the xtables lock instead of failing when another program holds it.
#[derive(Debug)]
pub struct Chains {
    backend: Backend,
    chain: String,
    families: Vec<Family>,
    jumps: Vec<Jump>,
    netns: ThreadNetns,
    removed: bool,
}

/// How long iptables may wait for the xtables lock (`-w`), in seconds.
const LOCK_WAIT_SECS: &str = "10";

fn quote_arg(a: &str) -> String {
    if !a.is_empty()
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,+@%!".contains(&b))
    {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// Runs one iptables command on the filter table and returns its stdout.
fn iptables(backend: Backend, family: Family, args: &[&str]) -> Result<String, FirewallError> {
    let name = backend.program(family);
    let mut full: Vec<&str> = vec!["-w", LOCK_WAIT_SECS, "-t", "filter"];
    full.extend_from_slice(args);
    let command = std::iter::once(name)
        .chain(full.iter().copied())
        .map(quote_arg)
        .collect::<Vec<_>>()
        .join(" ");
    let path = find_program(name).ok_or_else(|| {
        FirewallError::NoIptables(format!("{name} not found in {}", search_path_text()))
    })?;
    let out = Command::new(&path)
        .args(&full)
        .output()
        .map_err(|source| FirewallError::Spawn {
            command: command.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(FirewallError::Iptables {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Splits one line of `iptables -S` into arguments. iptables quotes an
/// argument with double quotes when it holds spaces (comments), escaping
/// `"` and `\` inside with a backslash.
fn split_rule(line: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut in_arg = false;
    let mut quoted = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                in_arg = true;
            }
            '\\' if quoted => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            c if c.is_whitespace() && !quoted => {
                if in_arg {
                    args.push(std::mem::take(&mut cur));
                    in_arg = false;
                }
            }
            c => {
                cur.push(c);
                in_arg = true;
            }
        }
    }
    if in_arg {
        args.push(cur);
    }
    args
}

/// In the output of `iptables -S`, the rules of other chains that jump to
/// `target`, each as the arguments that follow `-A` (chain first), ready
/// for `-D`.
fn jumps_to(listing: &str, target: &str) -> Vec<Vec<String>> {
    listing
        .lines()
        .map(split_rule)
        .filter(|args| {
            args.first().map(String::as_str) == Some("-A")
                && args.get(1).map(String::as_str) != Some(target)
                && args
                    .windows(2)
                    .any(|w| (w[0] == "-j" || w[0] == "-g") && w[1] == target)
        })
        .map(|mut args| args.split_off(1))
        .collect()
}

/// The listing declares chain `chain`.
fn has_chain(listing: &str, chain: &str) -> bool {
    listing
        .lines()
        .map(split_rule)
        .any(|args| args.len() == 2 && args[0] == "-N" && args[1] == chain)
}

impl Chains {
    /// Removes any leftovers for `spec.queue` in this backend (see
    /// [`remove_stale`]) and installs the rules. On a failure half-way,
    /// what was already added is removed again.
    pub fn install(spec: &InterceptSpec, backend: Backend) -> Result<Chains, FirewallError> {
        spec.check()?;
        let families: Vec<Family> = spec.families().collect();
        for &f in &families {
            if find_program(backend.program(f)).is_none() {
                return Err(FirewallError::NoIptables(format!(
                    "{} (backend {backend}) not found in {}",
                    backend.program(f),
                    search_path_text()
                )));
            }
        }
        let netns = ThreadNetns::current().map_err(|source| FirewallError::Netns {
            op: "opening /proc/thread-self/ns/net",
            source,
        })?;
        for &f in &families {
            remove_stale_family(backend, f, spec.queue)?;
        }

        let chain = chain_name(spec.queue);
        let mut this = Chains {
            backend,
            chain: chain.clone(),
            families: Vec::new(),
            jumps: Vec::new(),
            netns,
            removed: false,
        };
        let queue_num = spec.queue.to_string();
        for &f in &families {
            iptables(backend, f, &["-N", &chain])?;
            this.families.push(f);
            if let Some(mark) = spec.pass_mark {
                let mark = format!("{mark:#x}");
                iptables(
                    backend,
                    f,
                    &["-A", &chain, "-m", "mark", "--mark", &mark, "-j", "RETURN"],
                )?;
            }
            let mut rule: Vec<&str> = vec!["-A", &chain];
            rule.extend(spec.matches.iter().map(String::as_str));
            rule.extend(["-j", "NFQUEUE", "--queue-num", &queue_num]);
            if spec.bypass {
                rule.push("--queue-bypass");
            }
            iptables(backend, f, &rule)?;
            for builtin in spec.directions.hooks().map(builtin_chain) {
                let mut args: Vec<String> = Vec::new();
                if !spec.loopback {
                    match builtin {
                        "INPUT" => args.extend(["!", "-i", "lo"].map(String::from)),
                        "OUTPUT" => args.extend(["!", "-o", "lo"].map(String::from)),
                        _ => {}
                    }
                }
                args.extend(["-j".to_string(), chain.clone()]);
                let mut cmd: Vec<&str> = vec!["-I", builtin, "1"];
                cmd.extend(args.iter().map(String::as_str));
                iptables(backend, f, &cmd)?;
                this.jumps.push(Jump {
                    family: f,
                    chain: builtin,
                    args,
                });
            }
        }
        Ok(this)
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Our chain's name.
    pub fn chain(&self) -> &str {
        &self.chain
    }

    /// Removes the rules now, reporting the first failure (all steps are
    /// still tried). Dropping does the same and prints failures to stderr.
    pub fn remove(mut self) -> Result<(), FirewallError> {
        self.remove_inner()
    }

    fn remove_inner(&mut self) -> Result<(), FirewallError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let backend = self.backend;
        let chain = self.chain.clone();
        let jumps = std::mem::take(&mut self.jumps);
        let families = std::mem::take(&mut self.families);
        let run = move || {
            let mut first: Option<FirewallError> = None;
            let mut note = |r: Result<String, FirewallError>| {
                if let Err(e) = r {
                    first.get_or_insert(e);
                }
            };
            for j in jumps.iter().rev() {
                let mut cmd: Vec<&str> = vec!["-D", j.chain];
                cmd.extend(j.args.iter().map(String::as_str));
                note(iptables(backend, j.family, &cmd));
            }
            for &f in &families {
                note(iptables(backend, f, &["-F", &chain]));
                note(iptables(backend, f, &["-X", &chain]));
            }
            first.map_or(Ok(()), Err)
        };
        self.netns.run(run).map_err(|source| FirewallError::Netns {
            op: "entering the namespace the rules were installed in",
            source,
        })?
    }
}

impl Drop for Chains {
    fn drop(&mut self) {
        if let Err(e) = self.remove_inner() {
            // Not eprintln!, which panics when stderr is on a full disk.
            let _ = writeln!(
                std::io::stderr(),
                "dummynet: removing the NFQUEUE interception: {e}"
            );
        }
    }
}

/// The built-in chain of the filter table at `hook`.
fn builtin_chain(hook: HookPoint) -> &'static str {
    match hook {
        HookPoint::Input => "INPUT",
        HookPoint::Output => "OUTPUT",
        HookPoint::Forward => "FORWARD",
    }
}

/// Removes what a previous daemon for `queue` may have left behind in the
/// calling thread's namespace with `backend`: every rule of the filter
/// table jumping to `DUMMYNET-<queue>`, then that chain. Both families (an
/// absent ip6tables program is skipped).
pub fn remove_stale(backend: Backend, queue: u16) -> Result<StaleCleanup, FirewallError> {
    let mut total = StaleCleanup::default();
    for f in [Family::V4, Family::V6] {
        if find_program(backend.program(f)).is_none() {
            continue;
        }
        total += remove_stale_family(backend, f, queue)?;
    }
    Ok(total)
}

/// [`remove_stale`] in every iptables that may hold rules here: the
/// iptables-nft programs (listing creates nothing), the iptables-legacy
/// programs for the families whose x_tables filter table exists (listing
/// would create it, and iptables-nft would then warn about it on every
/// call), and the plain `iptables` programs where neither of those is
/// installed. A backend whose listing fails (its kernel part is missing)
/// holds nothing.
pub fn remove_stale_everywhere(queue: u16) -> Result<StaleCleanup, FirewallError> {
    let mut total = StaleCleanup::default();
    let nft = find_program(Backend::Nft.program(Family::V4)).is_some();
    let legacy = find_program(Backend::Legacy.program(Family::V4)).is_some();
    let mut places: Vec<(Backend, Family)> = Vec::new();
    for f in [Family::V4, Family::V6] {
        if nft {
            places.push((Backend::Nft, f));
        }
        if legacy && legacy_filter_exists(f) {
            places.push((Backend::Legacy, f));
        }
        if !nft && !legacy {
            places.push((Backend::System, f));
        }
    }
    for (backend, f) in places {
        if find_program(backend.program(f)).is_none() {
            continue;
        }
        match remove_stale_family(backend, f, queue) {
            Ok(done) => total += done,
            Err(FirewallError::Iptables { ref command, .. }) if command.ends_with(" -S") => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

/// The x_tables filter table of `family` exists in the calling thread's
/// namespace.
fn legacy_filter_exists(family: Family) -> bool {
    let names = match family {
        Family::V4 => "/proc/thread-self/net/ip_tables_names",
        Family::V6 => "/proc/thread-self/net/ip6_tables_names",
    };
    std::fs::read_to_string(names).is_ok_and(|t| t.lines().any(|l| l.trim() == "filter"))
}

fn remove_stale_family(
    backend: Backend,
    family: Family,
    queue: u16,
) -> Result<StaleCleanup, FirewallError> {
    let chain = chain_name(queue);
    let listing = iptables(backend, family, &["-S"])?;
    let mut done = StaleCleanup::default();
    for rule in jumps_to(&listing, &chain) {
        let mut cmd: Vec<&str> = vec!["-D"];
        cmd.extend(rule.iter().map(String::as_str));
        iptables(backend, family, &cmd)?;
        done.jumps += 1;
    }
    if has_chain(&listing, &chain) {
        iptables(backend, family, &["-F", &chain])?;
        iptables(backend, family, &["-X", &chain])?;
        done.chains += 1;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_iptables_listing_lines() {
        assert_eq!(
            split_rule("-A INPUT ! -i lo -j DUMMYNET-7"),
            ["-A", "INPUT", "!", "-i", "lo", "-j", "DUMMYNET-7"]
        );
        assert_eq!(
            split_rule(r#"-A OUTPUT -m comment --comment "a \"b\" c" -j X"#),
            [
                "-A",
                "OUTPUT",
                "-m",
                "comment",
                "--comment",
                r#"a "b" c"#,
                "-j",
                "X"
            ]
        );
        assert_eq!(
            split_rule(r#"-A X --comment """#),
            ["-A", "X", "--comment", ""]
        );
    }

    #[test]
    fn finds_jumps_to_our_chain_only() {
        let listing = "-P INPUT ACCEPT\n-N DUMMYNET-7\n-N DUMMYNET-70\n\
-A INPUT ! -i lo -j DUMMYNET-7\n-A INPUT -j DUMMYNET-70\n-A OUTPUT -p udp -j DUMMYNET-7\n\
-A DUMMYNET-7 -j NFQUEUE --queue-num 7\n-A FORWARD -j ACCEPT\n";
        assert_eq!(
            jumps_to(listing, "DUMMYNET-7"),
            vec![
                vec!["INPUT", "!", "-i", "lo", "-j", "DUMMYNET-7"],
                vec!["OUTPUT", "-p", "udp", "-j", "DUMMYNET-7"],
            ]
        );
        assert!(has_chain(listing, "DUMMYNET-7"));
        assert!(!has_chain(listing, "DUMMYNET-8"));
    }

    #[test]
    fn command_lines_are_quoted_for_a_shell() {
        assert_eq!(quote_arg("-j"), "-j");
        assert_eq!(quote_arg("!"), "!");
        assert_eq!(quote_arg("a b"), "'a b'");
        assert_eq!(quote_arg("it's"), r"'it'\''s'");
        assert_eq!(quote_arg(""), "''");
    }
}
