//! A TCP socket's own view of its connection: `getsockopt(TCP_INFO)` and
//! `setsockopt(TCP_CONGESTION)`, for the experiments' senders.
//!
//! The kernel's `struct tcp_info` (linux/tcp.h) grew over the years; libc's
//! glibc copy stops before `tcpi_delivered_ce` (4.18), so the layout is
//! written out here, up to that field. The kernel copies at most the length
//! it is given and says how much it wrote: an older kernel leaves the tail
//! zero.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The kernel's `struct tcp_info` up to `tcpi_delivered_ce`, field for
/// field (the two bitfield bytes as plain bytes).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    app_limited: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
}

/// What an experiment samples of a sender's `TCP_INFO`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Smoothed RTT and its mean deviation, µs.
    pub srtt_us: u32,
    pub rttvar_us: u32,
    /// Congestion window and slow-start threshold, in segments (the
    /// threshold is "infinite", 0x7fffffff, until the first loss).
    pub cwnd: u32,
    pub ssthresh: u32,
    /// Segment size the sender uses, bytes.
    pub snd_mss: u32,
    /// The kernel's delivery-rate estimate, bytes/s.
    pub delivery_rate: u64,
    /// Segments retransmitted since the connection began.
    pub total_retrans: u32,
    /// Bytes the peer acknowledged.
    pub bytes_acked: u64,
    /// Segments delivered, and those of them that reached the peer with
    /// ECN CE (as its ECE echoes told).
    pub delivered: u32,
    pub delivered_ce: u32,
}

/// `getsockopt(fd, IPPROTO_TCP, TCP_INFO)`.
pub fn tcp_info(fd: BorrowedFd<'_>) -> io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is a plain-old-data struct of `len` bytes that lives
    // for the call; the kernel writes at most `len` bytes into it and
    // stores the length it wrote in `len`. `fd` is a valid borrowed fd.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpInfo {
        srtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        cwnd: raw.snd_cwnd,
        ssthresh: raw.snd_ssthresh,
        snd_mss: raw.snd_mss,
        delivery_rate: raw.delivery_rate,
        total_retrans: raw.total_retrans,
        bytes_acked: raw.bytes_acked,
        delivered: raw.delivered,
        delivered_ce: raw.delivered_ce,
    })
}

/// `setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name)`: the congestion
/// control this socket uses (`cubic`, `reno`, `bbr`: any the kernel
/// offers, `net.ipv4.tcp_available_congestion_control`).
pub fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    // SAFETY: the pointer and length describe `name`'s bytes, alive for
    // the call; the kernel copies at most that many (no NUL needed).
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The congestion control a socket uses now.
pub fn congestion(fd: BorrowedFd<'_>) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` has `len` writable bytes for the call; the kernel
    // writes at most that many and stores how many in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let used = &buf[..(len as usize).min(buf.len())];
    let end = used.iter().position(|b| *b == 0).unwrap_or(used.len());
    Ok(String::from_utf8_lossy(&used[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    /// The layout matches the kernel's offsets (linux/tcp.h): rtt at 68,
    /// snd_cwnd at 80, delivery_rate at 160, delivered_ce at 196.
    #[test]
    fn layout_is_the_kernels() {
        assert_eq!(std::mem::offset_of!(RawTcpInfo, rtt), 68);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, snd_cwnd), 80);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, total_retrans), 100);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, delivery_rate), 160);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, delivered_ce), 196);
        assert_eq!(std::mem::size_of::<RawTcpInfo>(), 200);
    }

    /// Over a loopback connection: after 1 MB acknowledged, the sender's
    /// info says so, with an RTT and a window, and the congestion control
    /// set is the one read back.
    #[test]
    fn samples_a_loopback_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let receiver = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = vec![0u8; 65536];
            let mut total = 0usize;
            while total < 1_000_000 {
                match s.read(&mut buf).unwrap() {
                    0 => break,
                    n => total += n,
                }
            }
            s.write_all(b"k").unwrap();
            total
        });
        let mut tx = TcpStream::connect(addr).unwrap();
        set_congestion(tx.as_fd(), "reno").unwrap();
        assert_eq!(congestion(tx.as_fd()).unwrap(), "reno");
        let err = set_congestion(tx.as_fd(), "no-such-cc").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        tx.write_all(&vec![7u8; 1_000_000]).unwrap();
        let mut k = [0u8; 1];
        tx.read_exact(&mut k).unwrap();
        assert_eq!(receiver.join().unwrap(), 1_000_000);
        let info = tcp_info(tx.as_fd()).unwrap();
        assert_eq!(info.bytes_acked, 1_000_001, "the data and the SYN");
        assert!(info.srtt_us > 0, "{info:?}");
        assert!(info.cwnd >= 10, "{info:?}");
        assert!(info.snd_mss > 0, "{info:?}");
        assert!(info.delivered > 0, "{info:?}");
        assert_eq!(info.delivered_ce, 0);
        // A socket that is not TCP is refused.
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(tcp_info(udp.as_fd()).is_err());
    }
}
