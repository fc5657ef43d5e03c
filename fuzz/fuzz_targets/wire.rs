//! The frame parser, on every link type: never a panic, and what it
//! accepts points inside the frame.
#![no_main]

use dummynet_engine::wire::{parse, LinkType};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, frame)) = data.split_first() else {
        return;
    };
    let link = match which % 6 {
        0 => LinkType::Ethernet,
        1 => LinkType::RawIp,
        2 => LinkType::Ipv4,
        3 => LinkType::Ipv6,
        4 => LinkType::LinuxSll,
        _ => LinkType::LinuxSll2,
    };
    if let Ok(p) = parse(link, frame) {
        assert!(p.ip_offset < frame.len(), "{link:?}: {p:?}");
        assert!(
            p.len as usize <= frame.len() - p.ip_offset,
            "{link:?}: bills {} bytes of a {}-byte frame from {}",
            p.len,
            frame.len(),
            p.ip_offset
        );
    }
});
