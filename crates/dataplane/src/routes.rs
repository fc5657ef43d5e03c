//! This network namespace's routes, for `verrevpath`, `versrcreach` and
//! `antispoof`: read from `/proc/thread-self/net/route` and `ipv6_route`
//! (the namespace of the calling thread), which list the kernel's routes
//! in a fixed text form, so no netlink dump is needed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use dummynet_engine::config::{AddrMatch, Route};

/// `RTF_*` flags of `<linux/route.h>`.
const RTF_UP: u32 = 0x0001;
const RTF_GATEWAY: u32 = 0x0002;
const RTF_REJECT: u32 = 0x0200;

/// The namespace's IPv4 and IPv6 routes; `None` if neither file can be
/// read (the checks then hold, as in `sim`).
pub fn host_routes() -> Option<Vec<Route>> {
    let v4 = std::fs::read_to_string("/proc/thread-self/net/route").ok();
    let v6 = std::fs::read_to_string("/proc/thread-self/net/ipv6_route").ok();
    if v4.is_none() && v6.is_none() {
        return None;
    }
    let mut routes = v4.as_deref().map(parse_v4).unwrap_or_default();
    routes.extend(v6.as_deref().map(parse_v6).unwrap_or_default());
    Some(routes)
}

/// `/proc/net/route`: a header line, then `Iface Destination Gateway
/// Flags RefCnt Use Metric Mask ...`, addresses as the hex of the
/// network-order word read natively.
fn parse_v4(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let word = |i: usize| f.get(i).and_then(|h| u32::from_str_radix(h, 16).ok());
            let (dst, flags, mask) = (word(1)?, word(3)?, word(7)?);
            let mask = u32::from_be_bytes(mask.to_ne_bytes());
            let prefix = mask.leading_ones() as u8;
            route(
                f.first()?,
                IpAddr::V4(Ipv4Addr::from(dst.to_ne_bytes())),
                prefix,
                flags,
            )
        })
        .collect()
}

/// `/proc/net/ipv6_route`: `dest plen src splen nexthop metric refcnt use
/// flags iface`, all hex.
fn parse_v6(text: &str) -> Vec<Route> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dst = u128::from_str_radix(f.first()?, 16).ok()?;
            let prefix = u8::from_str_radix(f.get(1)?, 16).ok()?;
            let flags = u32::from_str_radix(f.get(8)?, 16).ok()?;
            route(
                f.get(9)?,
                IpAddr::V6(Ipv6Addr::from(dst)),
                prefix.min(128),
                flags,
            )
        })
        .collect()
}

fn route(iface: &str, addr: IpAddr, prefix: u8, flags: u32) -> Option<Route> {
    (flags & RTF_UP != 0).then(|| Route {
        net: AddrMatch { addr, prefix },
        iface: iface.to_string(),
        gateway: flags & RTF_GATEWAY != 0,
        reject: flags & RTF_REJECT != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_files() {
        // 192.0.2.0/24 on eth0, default via 192.0.2.1, as printed on a
        // little-endian machine.
        let v4 =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                  eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                  eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        if cfg!(target_endian = "little") {
            let r = parse_v4(v4);
            assert_eq!(r.len(), 2);
            assert_eq!(r[0].net.prefix, 0);
            assert!(r[0].gateway && !r[0].reject);
            assert_eq!(r[1].net.addr, "192.0.2.0".parse::<IpAddr>().unwrap());
            assert_eq!((r[1].net.prefix, r[1].gateway), (24, false));
        }
        let v6 = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n\
                  20010db8000000000000000000000000 20 00000000000000000000000000000000 00 00000000000000000000000000000000 00000400 00000001 00000000 00200201       lo\n";
        let r = parse_v6(v6);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].net.addr, "fd00::".parse::<IpAddr>().unwrap());
        assert_eq!((r[0].net.prefix, r[0].iface.as_str()), (64, "eth0"));
        assert!(r[1].reject && r[1].net.prefix == 32);
        assert!(parse_v6("garbage\n").is_empty());
    }
}
