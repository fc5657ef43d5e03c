//! Live tests of `netns` and `rtnl`: namespaces, veth pairs between them,
//! traffic across, commands inside, cleanup and error reports.
//!
//! Every link is created inside namespaces these tests make (never in the
//! machine's own); anonymous namespaces are their own cleanup guards (the
//! kernel destroys them with the last handle, also when a test panics), and
//! named ones are removed by the `NamedNetns` guard's `Drop`. All traffic
//! stays between two test namespaces and is bounded in count and time.
//! Without root the tests print a line and pass.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use dummynet_io::netns::{Netns, NetnsError};
use dummynet_io::rtnl::{Rtnl, RtnlError};

/// Upper bound on any wait in these tests.
const DEADLINE: Duration = Duration::from_secs(5);

fn is_root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    println!("skipped: network namespace tests need root");
    false
}

/// A name unique to this process and call, short enough for an interface
/// (15 bytes at most): `prefix` (2 bytes) + 5 digits of the pid + counter.
fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{:05}{n}", std::process::id() % 100_000)
}

/// Opens an rtnetlink socket inside `ns`.
fn rtnl_in(ns: &Netns) -> Rtnl {
    ns.rtnl().unwrap()
}

/// Two namespaces joined by a veth pair `a` (10.99.N.1/30, in `left`) and
/// `b` (10.99.N.2/30, in `right`), both up.
struct Pair {
    left: Netns,
    right: Netns,
    a: String,
    b: String,
    left_ip: Ipv4Addr,
    right_ip: Ipv4Addr,
}

fn veth_pair() -> Pair {
    static SUBNET: AtomicU32 = AtomicU32::new(0);
    let n = SUBNET.fetch_add(1, Ordering::Relaxed) % 64;
    let left = Netns::new_anonymous().unwrap();
    let right = Netns::new_anonymous().unwrap();
    let a = unique("va");
    let b = unique("vb");
    let left_ip = Ipv4Addr::new(10, 99, (n * 4) as u8, 1);
    let right_ip = Ipv4Addr::new(10, 99, (n * 4) as u8, 2);

    let mut l = rtnl_in(&left);
    l.add_veth(&a, &b, Some(right.as_fd())).unwrap();
    l.add_address(&a, left_ip.into(), 30).unwrap();
    l.set_up(&a).unwrap();
    let mut r = rtnl_in(&right);
    r.add_address(&b, right_ip.into(), 30).unwrap();
    r.set_up(&b).unwrap();
    Pair {
        left,
        right,
        a,
        b,
        left_ip,
        right_ip,
    }
}

#[test]
fn veth_between_namespaces_carries_udp_and_tcp() {
    if !is_root() {
        return;
    }
    const DATAGRAMS: u32 = 20;
    const TCP_BYTES: usize = 64 * 1024;
    let pair = veth_pair();
    let udp_addr = SocketAddr::new(pair.right_ip.into(), 5301);
    let tcp_addr = SocketAddr::new(pair.right_ip.into(), 5302);

    let (ready_tx, ready_rx) = mpsc::channel();
    let receiver = pair
        .right
        .spawn_thread(
            "test-recv",
            move || -> std::io::Result<(BTreeSet<u32>, Vec<u8>)> {
                let udp = UdpSocket::bind(udp_addr)?;
                let tcp = TcpListener::bind(tcp_addr)?;
                let _ = ready_tx.send(());
                let start = Instant::now();

                let mut seen = BTreeSet::new();
                let mut buf = [0u8; 64];
                while seen.len() < DATAGRAMS as usize {
                    let left = DEADLINE.saturating_sub(start.elapsed());
                    if left.is_zero() {
                        break;
                    }
                    udp.set_read_timeout(Some(left))?;
                    match udp.recv(&mut buf) {
                        Ok(4) => {
                            seen.insert(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]));
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }

                tcp.set_nonblocking(true)?;
                let stream = loop {
                    match tcp.accept() {
                        Ok((stream, _)) => break stream,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            if start.elapsed() > DEADLINE {
                                return Err(e);
                            }
                            thread::sleep(Duration::from_millis(5));
                        }
                        Err(e) => return Err(e),
                    }
                };
                stream.set_nonblocking(false)?;
                stream.set_read_timeout(Some(DEADLINE))?;
                let mut data = Vec::new();
                stream.take(TCP_BYTES as u64 + 1).read_to_end(&mut data)?;
                Ok((seen, data))
            },
        )
        .unwrap();
    ready_rx.recv_timeout(DEADLINE).unwrap();

    let sender = pair
        .left
        .spawn_thread("test-send", move || -> std::io::Result<()> {
            let udp = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
            for i in 0..DATAGRAMS {
                udp.send_to(&i.to_be_bytes(), udp_addr)?;
            }
            let mut stream = TcpStream::connect_timeout(&tcp_addr, DEADLINE)?;
            let payload: Vec<u8> = (0..TCP_BYTES).map(|i| (i % 251) as u8).collect();
            stream.write_all(&payload)?;
            Ok(())
        })
        .unwrap();
    sender.join().unwrap().unwrap();
    let (seen, data) = receiver.join().unwrap().unwrap();

    // The first datagrams wait in the neighbour queue while ARP resolves;
    // the kernel keeps them (well under unres_qlen), so none is lost.
    assert_eq!(seen, (0..DATAGRAMS).collect::<BTreeSet<_>>());
    assert_eq!(data.len(), TCP_BYTES);
    assert!(data.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
}

#[test]
fn addresses_are_on_the_right_ends() {
    if !is_root() {
        return;
    }
    let pair = veth_pair();
    let mut l = rtnl_in(&pair.left);
    let mut r = rtnl_in(&pair.right);
    assert!(l.link_exists(&pair.a).unwrap());
    assert!(!l.link_exists(&pair.b).unwrap());
    assert!(r.link_exists(&pair.b).unwrap());
    assert!(!r.link_exists(&pair.a).unwrap());
    // The left address is local on the left only: binding to it works there
    // and fails on the right.
    let left_ip = IpAddr::V4(pair.left_ip);
    let bind_left = |ns: &Netns| ns.run(|| UdpSocket::bind((left_ip, 0)).is_ok()).unwrap();
    assert!(bind_left(&pair.left));
    assert!(!bind_left(&pair.right));
}

#[test]
fn dropping_the_last_handle_destroys_the_namespace() {
    if !is_root() {
        return;
    }
    // `home` stands for the daemon's namespace; `doomed` is the one whose
    // handle we drop. A veth end left in `home` dies with the namespace
    // holding its peer, which makes the destruction observable.
    let home = Netns::new_anonymous().unwrap();
    let doomed = Netns::new_anonymous().unwrap();
    let here = unique("dh");
    let there = unique("dt");
    let mut rtnl = rtnl_in(&home);
    rtnl.add_veth(&here, &there, Some(doomed.as_fd())).unwrap();
    assert!(rtnl.link_exists(&here).unwrap());

    // A clone is a second handle: dropping one keeps the namespace.
    let clone = doomed.clone();
    drop(doomed);
    thread::sleep(Duration::from_millis(50));
    assert!(rtnl.link_exists(&here).unwrap());

    drop(clone);
    // The kernel dismantles namespaces on a work queue: poll, bounded.
    let start = Instant::now();
    while rtnl.link_exists(&here).unwrap() {
        assert!(
            start.elapsed() < DEADLINE,
            "{here} still exists {DEADLINE:?} after its peer's namespace was dropped"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn command_sees_only_its_namespace() {
    if !is_root() {
        return;
    }
    let ns = Netns::new_anonymous().unwrap();
    let a = unique("ca");
    let b = unique("cb");
    rtnl_in(&ns).add_veth(&a, &b, None).unwrap();
    let out = ns
        .command("/bin/sh")
        .args(["-c", "cat /proc/net/dev"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    // Two header lines, then "  NAME: counters..." per interface.
    let names: BTreeSet<&str> = text
        .lines()
        .skip(2)
        .filter_map(|line| line.split(':').next())
        .map(str::trim)
        .collect();
    let want: BTreeSet<&str> = ["lo", a.as_str(), b.as_str()].into_iter().collect();
    assert_eq!(names, want, "{text}");
}

#[test]
fn command_stays_in_the_callers_other_namespaces() {
    if !is_root() {
        return;
    }
    // Only the network namespace changes: the child's mount namespace is
    // ours.
    let ns = Netns::new_anonymous().unwrap();
    let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    let out = ns
        .command("/bin/sh")
        .args([
            "-c",
            "readlink /proc/self/ns/mnt; readlink /proc/self/ns/net",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert_eq!(lines.next(), ours.to_str());
    let net = format!("net:[{}]", ns.inode().unwrap());
    assert_eq!(lines.next(), Some(net.as_str()));
}

#[test]
fn creating_a_veth_twice_names_the_pair() {
    if !is_root() {
        return;
    }
    let ns = Netns::new_anonymous().unwrap();
    let a = unique("ea");
    let b = unique("eb");
    let mut rtnl = rtnl_in(&ns);
    rtnl.add_veth(&a, &b, None).unwrap();
    let err = rtnl.add_veth(&a, &b, None).unwrap_err();
    assert!(matches!(err, RtnlError::Kernel { .. }), "{err:?}");
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("creating veth {a}/{b}: File exists")),
        "{text}"
    );
}

#[test]
fn unknown_interface_is_not_found_by_name() {
    if !is_root() {
        return;
    }
    let ns = Netns::new_anonymous().unwrap();
    let mut rtnl = rtnl_in(&ns);
    let err = rtnl.link_index("nonexistent").unwrap_err();
    assert!(
        matches!(&err, RtnlError::LinkNotFound { name, .. } if name == "nonexistent"),
        "{err:?}"
    );
    assert!(err.to_string().contains("\"nonexistent\""), "{err}");
    assert!(!rtnl.link_exists("nonexistent").unwrap());
    let err = rtnl.set_up("nonexistent").unwrap_err();
    assert!(
        err.to_string().starts_with("setting link nonexistent up"),
        "{err}"
    );
}

#[test]
fn named_namespace_goes_away_with_its_guard() {
    if !is_root() {
        return;
    }
    let name = format!("dummynet-test-{}", unique("nn"));
    let named = Netns::create_named(&name).unwrap();
    let path = named.path().to_owned();
    assert_eq!(named.name(), name);
    assert!(path.exists());

    // Reachable by name, as `ip netns exec` would, and it is the same one.
    let opened = Netns::open_named(&name).unwrap();
    assert_eq!(opened.inode().unwrap(), named.inode().unwrap());
    let err = Netns::create_named(&name).unwrap_err();
    assert!(matches!(err, NetnsError::Exists { .. }), "{err}");
    // lo is up in a named namespace too.
    let lo = named
        .run(|| UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).is_ok())
        .unwrap();
    assert!(lo);

    drop(named);
    assert!(!path.exists(), "{} survived its guard", path.display());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&*path.to_string_lossy()), "{mounts}");
    let err = Netns::open_named(&name).unwrap_err();
    assert!(matches!(err, NetnsError::Open { .. }), "{err}");
    // Our `opened` handle still holds the namespace itself.
    assert!(opened.run(|| Rtnl::open().is_ok()).unwrap());
}

#[test]
fn named_namespace_remove_reports_success() {
    if !is_root() {
        return;
    }
    let name = format!("dummynet-test-{}", unique("nr"));
    let named = Netns::create_named(&name).unwrap();
    let path = named.path().to_owned();
    named.remove().unwrap();
    assert!(!path.exists());
}
