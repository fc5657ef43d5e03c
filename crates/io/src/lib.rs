//! # dummynet-io
//!
//! The adapters between the sans-I/O engine and a live Linux system. Nothing
//! here knows about rules or pipes: these modules move frames and packets.
//!
//! - [`netns`]: network namespaces (anonymous or named) and running code or
//!   commands inside them.
//! - [`rtnl`]: rtnetlink: veth pairs, addresses, links up, moves between
//!   namespaces.
//! - [`afpacket`]: AF_PACKET ports for the bridge, batched I/O.
//! - [`nfqueue`]: NFQUEUE host interception: the queue.
//! - [`firewall`]: the rules that send traffic to the queue: an nftables
//!   table of our own, or an iptables chain where nftables is missing.
//! - [`portlock`]: one daemon per interface or queue: flock under
//!   `/run/dummynet`, released when the process ends.
//! - [`netdev`]: an interface's GRO and TSO, and threaded NAPI (so a
//!   veth's receiving stack runs in the kernel's NAPI threads).
//! - [`rawip`]: whole IP packets sent back into the host's output path.
//! - [`xdp`]: AF_XDP ports for the bridge: one UMEM, frames held in place.
//! - [`rt`]: real-time scheduling for the data-plane thread.
//! - [`hugealloc`]: the binary's allocator, huge pages for large tables.
//! - [`tcpinfo`]: a TCP socket's `TCP_INFO` and congestion control.
//! - [`userns`]: a user namespace of our own, so that an ordinary user
//!   can make network namespaces (`dummynet shell` without root).
//! - [`fsident`]: a control client's filesystem identity on one thread, to
//!   open the files its command names with its rights.

pub mod afpacket;
pub mod firewall;
pub mod fsident;
pub mod hugealloc;
pub mod netdev;
pub mod netns;
pub mod nfqueue;
pub mod portlock;
pub mod rawip;
pub mod rt;
pub mod rtnl;
pub mod tcpinfo;
pub mod userns;
pub mod xdp;
