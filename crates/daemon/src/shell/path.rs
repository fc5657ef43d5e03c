//! The path a shell's command runs on: three namespaces (near, mid, far)
//! joined by veths, with addresses of a free /30 (and a /64), and the
//! segmentation its ends follow.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::mpsc::{self, Receiver, Sender};

use dummynet_io::netdev::{self, Feature, NetdevError};
use dummynet_io::netns::{Netns, NetnsError};
use dummynet_io::rtnl::{RtnlError, Via};

/// Whether GSO super-packets cross the shell whole (see [`ShellArgs::gso`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gso {
    /// While the engine says they fare as their segments would
    /// (`Engine::only_delays`), following its configuration.
    #[default]
    Auto,
    On,
    Off,
}

/// The three namespaces of a path through the emulator, joined by veths.
#[derive(Clone)]
pub struct Path {
    /// Where the emulator runs.
    pub mid: Netns,
    /// The namespaces at the ends, and the far end's interface.
    pub near: Netns,
    pub far: Netns,
    pub far_if: String,
    /// Address of the near end (the command's side) and of the far end.
    pub near_addr: Ipv4Addr,
    pub far_addr: Ipv4Addr,
    /// The link's /30.
    pub subnet: Ipv4Addr,
    /// The same for IPv6 (a /64 of fd64:646e::/32), unless IPv6 could not
    /// be set up (disabled on the host, say).
    pub v6: Option<V6Link>,
    /// With `--napi threaded`: the emulator's two ports, whose TSO follows
    /// the ends' segmentation ([`follow_segmentation`]): off while the ends
    /// segment, on while super-packets cross whole.
    pub tso_follows: Option<[String; 2]>,
}

/// The IPv6 side of a [`Path`].
#[derive(Clone, Copy, Debug)]
pub struct V6Link {
    pub subnet: Ipv6Addr,
    pub near_addr: Ipv6Addr,
    pub far_addr: Ipv6Addr,
}

/// Prefix lengths of the link's subnets.
pub const V4_PREFIX: u8 = 30;
pub const V6_PREFIX: u8 = 64;

/// Emulator-side interface towards the command.
pub const APP_IF: &str = "app";
/// Emulator-side interface towards the far end.
pub const PEER_IF: &str = "peer";
/// The command's interface.
pub const NEAR_IF: &str = "dn0";

/// Builds near ↔ mid ↔ far: `NEAR_IF` in `near`, `far_if` in `far`, both
/// with addresses of a free /30 of 100.64.0.0/10 (the shared address space,
/// unlikely to clash with a user's own networks) and of the /64 of
/// fd64:646e::/32 that spells the same /30 (100.64.1.4/30 gives
/// fd64:646e:6440:104::/64; unique local addresses), a default route per
/// family on the near side towards the far end, and the bridge ports in
/// `mid`. IPv6 is best effort: where it cannot be set up (disabled on the
/// host), the path is IPv4 only and a warning says why. Without `ipv6`,
/// the four ends have IPv6 turned off before they come up, so that no
/// router solicitation or MLD report of theirs crosses the emulator: a
/// link that carries only what its user sends (an experiment's).
///
/// With `Gso::Off`, both ends segment before sending (`gso_max_segs 1`),
/// so every frame the emulator sees is one wire packet and takes one queue
/// slot, as on a real link; otherwise TCP's super-packets of up to 64 KB
/// cross whole (billed for all their bytes), which multi-Gbit/s runs need
/// but which lets a slot-limited queue hold far more than it says, until
/// [`start_emulator`] says otherwise (`Gso::Auto`).
pub fn build_path(
    near: &Netns,
    far: &Netns,
    far_if: &str,
    gso: Gso,
    ipv6: bool,
) -> Result<Path, PathError> {
    let mid = Netns::new_anonymous().map_err(PathError::Namespace)?;
    build_path_in(mid, [APP_IF, PEER_IF], near, far, far_if, gso, ipv6)
}

/// [`build_path`] through `mid`, an existing namespace (a joined shell's:
/// the running emulator's), with its ends there named `mid_ifs` (towards
/// `near`, towards `far`).
pub fn build_path_in(
    mid: Netns,
    mid_ifs: [&str; 2],
    near: &Netns,
    far: &Netns,
    far_if: &str,
    gso: Gso,
    ipv6: bool,
) -> Result<Path, PathError> {
    let [app_if, peer_if] = mid_ifs;
    let whole = gso != Gso::Off;
    let subnet = far
        .run(free_subnet)
        .map_err(PathError::Routes)?
        .map_err(PathError::Subnet)?;
    let far_addr = Ipv4Addr::from(u32::from(subnet) + 1);
    let near_addr = Ipv4Addr::from(u32::from(subnet) + 2);
    let mut m = mid.rtnl()?;
    m.add_veth(app_if, NEAR_IF, Some(near.as_fd_borrowed()))?;
    m.add_veth(peer_if, far_if, Some(far.as_fd_borrowed()))?;
    if !ipv6 {
        without_ipv6(&mid, &[app_if, peer_if])?;
        without_ipv6(far, &[far_if])?;
        without_ipv6(near, &[NEAR_IF])?;
    }
    m.set_up(app_if)?;
    m.set_up(peer_if)?;
    let mut f = far.rtnl()?;
    f.add_address(far_if, IpAddr::V4(far_addr), V4_PREFIX)?;
    if !whole {
        f.set_gso_max_segs(far_if, 1)?;
    }
    f.set_up(far_if)?;
    let mut n = near.rtnl()?;
    n.add_address(NEAR_IF, IpAddr::V4(near_addr), V4_PREFIX)?;
    if !whole {
        n.set_gso_max_segs(NEAR_IF, 1)?;
    }
    n.set_up(NEAR_IF)?;
    n.add_route(
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        0,
        Via::Gateway(IpAddr::V4(far_addr)),
    )?;
    let v6 = v6_of(subnet);
    let v6 = match (|| -> Result<(), dummynet_io::rtnl::RtnlError> {
        if !ipv6 {
            return Ok(());
        }
        f.add_address(far_if, IpAddr::V6(v6.far_addr), V6_PREFIX)?;
        n.add_address(NEAR_IF, IpAddr::V6(v6.near_addr), V6_PREFIX)?;
        n.add_route(
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            0,
            Via::Gateway(IpAddr::V6(v6.far_addr)),
        )
    })() {
        Ok(()) if ipv6 => Some(v6),
        Ok(()) => None,
        Err(e) => {
            say!("dummynet: warning: the link is IPv4 only: {e}");
            None
        }
    };
    Ok(Path {
        mid,
        near: near.clone(),
        far: far.clone(),
        far_if: far_if.to_string(),
        near_addr,
        far_addr,
        subnet,
        v6,
        tso_follows: None,
    })
}

/// Turns IPv6 off on the interfaces `ifs` of `ns` (nothing to do where
/// the kernel has no IPv6).
fn without_ipv6(ns: &Netns, ifs: &[&str]) -> Result<(), PathError> {
    if !std::path::Path::new("/proc/sys/net/ipv6").exists() {
        return Ok(());
    }
    for name in ifs {
        let key = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
        ns.run(|| std::fs::write(&key, "1"))
            .map_err(PathError::Netlink)?
            .map_err(|source| PathError::Sysctl { key, source })?;
    }
    Ok(())
}

/// The /64 that goes with the /30 `v4`: fd64:646e, then its 32 bits.
fn v6_of(v4: Ipv4Addr) -> V6Link {
    let bits = u32::from(v4);
    let subnet = Ipv6Addr::new(0xfd64, 0x646e, (bits >> 16) as u16, bits as u16, 0, 0, 0, 0);
    let host = |n: u128| Ipv6Addr::from(u128::from(subnet) + n);
    V6Link {
        subnet,
        far_addr: host(1),
        near_addr: host(2),
    }
}

/// `gso_max_segs` that lets a sender's super-packets stay whole: the
/// kernel's default (`GSO_MAX_SEGS`).
const WHOLE_SEGS: u32 = 65_535;

impl Path {
    /// Makes both ends segment their super-packets before sending, or lets
    /// them send them whole.
    fn set_bursts(&self, whole: bool) -> Result<(), PathError> {
        let segs = if whole { WHOLE_SEGS } else { 1 };
        let near = self.near.rtnl()?;
        let far = self.far.rtnl()?;
        for (mut rtnl, name) in [(near, NEAR_IF), (far, self.far_if.as_str())] {
            rtnl.set_gso_max_segs(name, segs)?;
        }
        if let Some(ports) = &self.tso_follows {
            // Not fatal: the link works either way (see napi).
            for e in follow_segmentation(self, ports, whole) {
                say!("dummynet shell: {e}");
            }
        }
        Ok(())
    }
}

/// Sets the TSO of the emulator's `ports` as the ends' segmentation asks:
/// off while the ends segment (so a veth hands the frames to its peer's
/// NAPI), on (the kernel's default) while super-packets cross whole, since
/// without TSO the kernel would split every super-packet on the emulator's
/// thread and GRO merge it again beyond: a fast link lost more than half
/// its throughput that way (10 Gbit/s became 4.2 in one unlimited shell),
/// and a super-packet's receive work is small per byte anyway.
pub fn follow_segmentation(path: &Path, ports: &[String; 2], whole: bool) -> Vec<String> {
    ports
        .iter()
        .filter_map(|ifname| {
            in_ns(&path.mid, ifname, || {
                netdev::set_feature(ifname, Feature::Tso, whole)
            })
        })
        .collect()
}

/// Runs `f` in `ns`; its error, or the namespace's, as text.
pub(super) fn in_ns(
    ns: &Netns,
    ifname: &str,
    f: impl FnOnce() -> Result<(), NetdevError> + Send,
) -> Option<String> {
    match ns.run(f) {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(e) => Some(format!("{ifname}: entering its namespace: {e}")),
    }
}

/// Where the outcome of applying the first word arrives.
pub type FirstApplied = Receiver<Result<(), PathError>>;

/// A thread that sets the path's segmentation as the emulator's bridge
/// tells it (`Bridge::follow_bursts`), until the bridge is gone: netlink
/// is no work for the data plane. Returns the bridge's end of the channel.
pub fn follow_bursts(path: &Path) -> Result<(Sender<bool>, FirstApplied), PathError> {
    let (tell, words) = mpsc::channel::<bool>();
    let (done, first) = mpsc::channel();
    let path = path.clone();
    std::thread::Builder::new()
        .name("dummynet-bursts".into())
        .spawn(move || {
            let mut done = Some(done);
            for whole in words {
                let applied = path.set_bursts(whole);
                match (done.take(), applied) {
                    (Some(done), applied) => {
                        let _ = done.send(applied);
                    }
                    (None, Err(e)) => say!("dummynet shell: segmentation: {e}"),
                    (None, Ok(())) => {}
                }
            }
        })
        .map_err(PathError::Thread)?;
    Ok((tell, first))
}

/// Why a shell's path of namespaces and veths could not be built or set.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("creating a namespace: {0}")]
    Namespace(NetnsError),
    /// The far namespace's routes could not be read there.
    #[error("reading routes: {0}")]
    Routes(NetnsError),
    /// No free subnet, or the routes could not be read: what and where.
    #[error("{0}")]
    Subnet(String),
    /// A namespace's rtnetlink socket could not be opened.
    #[error("{0}")]
    Netlink(#[from] NetnsError),
    /// A link, address or route the kernel refused.
    #[error("{0}")]
    Rtnl(#[from] RtnlError),
    #[error("cannot start a thread: {0}")]
    Thread(std::io::Error),
    /// A per-interface setting the kernel refused.
    #[error("{key}: {source}")]
    Sysctl { key: String, source: std::io::Error },
}

trait BorrowFd {
    fn as_fd_borrowed(&self) -> std::os::fd::BorrowedFd<'_>;
}

impl BorrowFd for Netns {
    fn as_fd_borrowed(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self)
    }
}

/// A /30 of 100.64.0.0/10 that no route of the calling thread's namespace
/// overlaps, and whose /64 ([`v6_of`]) no IPv6 route overlaps either (run
/// inside the namespace that gets the far address).
fn free_subnet() -> Result<Ipv4Addr, String> {
    let routes = std::fs::read_to_string("/proc/thread-self/net/route")
        .map_err(|e| format!("/proc/thread-self/net/route: {e}"))?;
    let taken: Vec<(u32, u32)> = routes
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // /proc prints each network-order address as a native integer:
            // its native bytes are the address bytes.
            let addr = |hex: &str| {
                u32::from_str_radix(hex, 16)
                    .ok()
                    .map(|v| u32::from_be_bytes(v.to_ne_bytes()))
            };
            let (dst, mask) = (addr(f.get(1)?)?, addr(f.get(7)?)?);
            (mask != 0).then_some((dst, mask))
        })
        .collect();
    // Without IPv6 in the kernel there is no such file, and no clash.
    let taken6 =
        routes6(&std::fs::read_to_string("/proc/thread-self/net/ipv6_route").unwrap_or_default());
    let base = u32::from(Ipv4Addr::new(100, 64, 0, 0));
    // Start at a spot that depends on the pid so that parallel shells
    // rarely try the same one first.
    let start = std::process::id() % 1024;
    for i in 0..(1u32 << 20) {
        let net = base + (((start + i) % (1 << 20)) << 2);
        let clash = taken
            .iter()
            .any(|&(dst, mask)| (net & mask) == (dst & mask) || (dst & 0xffff_fffc) == net);
        let net6 = u128::from(v6_of(Ipv4Addr::from(net)).subnet);
        let clash6 = taken6.iter().any(|&(dst, len)| {
            // Equal on the shorter of the two prefixes.
            let common = u32::from(len.min(V6_PREFIX));
            (net6 ^ dst).checked_shr(128 - common).unwrap_or(0) == 0
        });
        if !clash && !clash6 {
            return Ok(Ipv4Addr::from(net));
        }
    }
    Err("no free /30 in 100.64.0.0/10 (with a free /64 in fd64:646e::/32)".into())
}

/// The IPv6 routes of `/proc/net/ipv6_route` (destination, prefix length),
/// default routes left out.
fn routes6(text: &str) -> Vec<(u128, u8)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let dst = u128::from_str_radix(f.next()?, 16).ok()?;
            let len = u8::from_str_radix(f.next()?, 16).ok()?;
            (len != 0).then_some((dst, len))
        })
        .collect()
}
