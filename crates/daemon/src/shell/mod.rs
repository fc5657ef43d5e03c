//! The library half of `dummynet shell`: the link's rules ([`link`]), the
//! path of namespaces and veths it runs on ([`path`]), the way out
//! ([`nat`]), who runs the receiving stacks ([`napi`]), the shell
//! without root ([`rootless`]), and the link up with its emulator
//! ([`live`]).

pub mod link;
pub mod live;
pub mod napi;
pub mod nat;
pub mod path;
pub mod rootless;
