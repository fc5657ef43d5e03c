//! The library half of `dummynet shell`: the link's rules ([`link`]), the
//! path of namespaces and veths it runs on ([`path`]), the way out
//! ([`nat`]), who runs the receiving stacks ([`napi`]) and the shell
//! without root ([`rootless`]).

pub mod link;
pub mod napi;
pub mod nat;
pub mod path;
pub mod rootless;
