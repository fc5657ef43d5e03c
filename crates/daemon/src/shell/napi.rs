//! Where a shell link's receiving TCP stacks run (`dummynet shell --napi`).
//!
//! The emulator's data plane sends each frame into a veth with `sendmmsg`,
//! and a veth hands the frame to its peer's stack on the sender's thread:
//! the receiving endpoint's whole TCP input (and the ACKs and sends it
//! triggers) runs on the data plane's thread, which with many links makes
//! its releases late. A veth queues the frame for its peer's NAPI instead
//! when the peer has NAPI (GRO on) and the frame is not a super-packet
//! (the sender's TSO off: the kernel keeps GSO frames out of a veth's
//! NAPI); with the peer's NAPI threaded, the kernel's own threads do that
//! work and the data plane returns at once.
//!
//! So with [`Napi::Threaded`] (the default) a shell turns GRO on and makes
//! NAPI threaded on both ends it creates for the endpoints (`dn0`, and its
//! end in the namespace it was started in), and TSO off on the emulator's
//! two ports (`app`/`peer`, or a joined link's `app-K`/`peer-K`) whenever
//! the ends segment (a rate, a queue limit, an impairment: `--gso auto`
//! follows the configuration), leaving it on while super-packets cross
//! whole ([`follow_segmentation`]). What the kernel refuses is collected
//! and said once ([`warning`]); the link works either way.

use dummynet_io::netdev::{self, Feature};

use super::path::{follow_segmentation, in_ns, Path, NEAR_IF};

/// Who runs a link's receiving stacks (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Napi {
    /// The kernel's NAPI threads: GRO on and threaded NAPI on the ends,
    /// TSO off on the emulator's ports while the ends segment.
    #[default]
    Threaded,
    /// The emulator's thread, inside its sends: the ends as the kernel
    /// makes them (GRO off, TSO on, NAPI not threaded).
    Inline,
}

/// Sets up `path` as [`Napi::Threaded`] asks, with the emulator's ports
/// named `mid_ifs`, whose TSO is turned off unless super-packets cross
/// `whole`, and from then on follows the ends' segmentation
/// ([`follow_segmentation`], through [`Path::tso_follows`]). Returns what
/// could not be set (empty when all was).
pub fn move_receive_work(path: &mut Path, mid_ifs: [&str; 2], whole: bool) -> Vec<String> {
    let mut failed = Vec::new();
    for (ns, ifname) in [(&path.near, NEAR_IF), (&path.far, path.far_if.as_str())] {
        failed.extend(in_ns(ns, ifname, || {
            netdev::set_feature(ifname, Feature::Gro, true)?;
            // NAPI exists once GRO is on (the end is up already).
            netdev::set_threaded(ifname, true)
        }));
    }
    let ports = mid_ifs.map(str::to_string);
    failed.extend(follow_segmentation(path, &ports, whole));
    path.tso_follows = Some(ports);
    failed
}

/// The one line a shell says when [`move_receive_work`] could not do all
/// of it: what failed, and what that costs. `None` when nothing failed.
pub fn warning(failed: &[String]) -> Option<String> {
    if failed.is_empty() {
        return None;
    }
    Some(format!(
        "dummynet shell: warning: the link's receiving TCP stacks may run on the emulator's \
         thread ({}); that costs the emulator CPU in every send, and with many links on one \
         emulator its releases run late (--napi inline asks for none of this and says nothing)",
        failed.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_said_when_all_was_set() {
        assert_eq!(warning(&[]), None);
    }

    #[test]
    fn the_warning_names_every_failure_and_the_cost_once() {
        let failed = vec![
            "making NAPI threaded on dn0: not permitted (EPERM: Operation not permitted)"
                .to_string(),
            "turning TSO off on app: not supported by the kernel or driver (EOPNOTSUPP)"
                .to_string(),
        ];
        let said = warning(&failed).expect("a warning");
        assert_eq!(said.lines().count(), 1, "{said}");
        assert!(said.contains("threaded on dn0: not permitted"), "{said}");
        assert!(said.contains("TSO off on app"), "{said}");
        assert!(said.contains("releases run late"), "{said}");
        assert!(said.contains("--napi inline"), "{said}");
    }
}
