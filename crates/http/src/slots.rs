//! The server's connection slots, which idle and slow clients cannot
//! exhaust.
//!
//! A connection holds a slot from accept to close. It is *evictable* while
//! it has not delivered its whole request (head and body), and again while
//! a write of its answer has waited on the client for [`HttpLimits::stall`]
//! (a peer that does not read). When every slot is taken, a new connection
//! takes the place of an evictable one, which is reset: one whose peer
//! hung up, else one of the peer (an IP address) that holds the most slots,
//! its oldest; so a crowd from other addresses, however fast it comes back,
//! cannot push out a client that holds one slot while its request is on
//! its way. One peer holds at most [`HttpLimits::per_peer`] slots, and its
//! new connection takes the place of its own oldest evictable one, or is
//! refused. A connection whose request was read and whose client reads
//! (a request waiting on the data plane, an event stream) is never evicted,
//! however long it lasts. Only when every slot is such a one does a new
//! connection wait (the kernel's backlog behind it) for a slot to free.

use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

use super::HttpLimits;

/// One connection's state, shared by its task and the table.
pub(super) struct Conn {
    id: u64,
    peer: IpAddr,
    accepted: Instant,
    epoch: Instant,
    /// Set once the whole request was read.
    read: AtomicBool,
    /// Since when (ms after `epoch`, plus one) a write has waited on the
    /// client; 0 when none waits.
    stalled: AtomicU64,
    /// Tells the task to reset its connection.
    pub(super) evict: Notify,
    /// A second handle on its socket: to see whether bytes wait unread,
    /// and to make a connection cut short reset (RST, its unsent answer
    /// discarded at once) rather than close in order behind data its peer
    /// does not read.
    fd: Option<OwnedFd>,
}

impl Conn {
    /// Makes the socket's last close a reset.
    pub(super) fn reset_on_close(&self) {
        if let Some(fd) = &self.fd {
            reset_on_close(fd);
        }
    }

    /// 0 if its peer hung up, 1 if nothing waits unread (idle, or stalled
    /// partway), 3 if something does (it is sending: just connected, its
    /// task not yet at it).
    fn waiting(&self) -> u8 {
        use nix::sys::socket::{recv, MsgFlags};
        use std::os::fd::AsRawFd;
        let Some(fd) = &self.fd else { return 1 };
        let mut byte = [0u8; 1];
        match recv(
            fd.as_raw_fd(),
            &mut byte,
            MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(0) => 0,
            Ok(_) => 3,
            Err(_) => 1,
        }
    }

    pub(super) fn request_read(&self) {
        self.read.store(true, Ordering::Release);
    }

    /// How long a write has waited on the client, if one does.
    pub(super) fn stalled_for(&self, now: Instant) -> Option<Duration> {
        match self.stalled.load(Ordering::Acquire) {
            0 => None,
            since => {
                Some(now.saturating_duration_since(self.epoch + Duration::from_millis(since - 1)))
            }
        }
    }

    fn write_waits(&self, waits: bool) {
        if waits {
            let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
            // Only the first wait of a run counts.
            let _ = self
                .stalled
                .compare_exchange(0, ms + 1, Ordering::AcqRel, Ordering::Acquire);
        } else {
            self.stalled.store(0, Ordering::Release);
        }
    }

    /// Its rank for eviction, lower first: an unread request by age (the
    /// oldest first), then a stalled answer by how long it stalled; `None`
    /// if it is not evictable.
    fn eviction_rank(&self, now: Instant, stall: Duration) -> Option<(u8, Duration)> {
        if !self.read.load(Ordering::Acquire) {
            let age = now.duration_since(self.accepted);
            return Some((self.waiting(), Duration::MAX - age));
        }
        let stalled = self.stalled_for(now)?;
        (stalled >= stall).then(|| (2, Duration::MAX - stalled))
    }
}

/// What [`Table::admit`] decided for a new connection.
pub(super) enum Admit {
    /// It has a slot (perhaps another's, evicted for it).
    In(Slot),
    /// Its peer holds all the slots it may, none evictable: refused.
    Refused,
    /// Every slot holds a connection that is not evictable: wait.
    Full,
}

pub(super) struct Table {
    max: usize,
    per_peer: usize,
    stall: Duration,
    epoch: Instant,
    next_id: AtomicU64,
    conns: Mutex<Vec<Arc<Conn>>>,
    /// Woken when a slot frees.
    pub(super) freed: Notify,
}

impl Table {
    pub(super) fn new(limits: &HttpLimits) -> Arc<Table> {
        Arc::new(Table {
            max: limits.max_connections.max(1),
            per_peer: limits.per_peer.max(1),
            stall: limits.stall,
            epoch: Instant::now(),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(Vec::new()),
            freed: Notify::new(),
        })
    }

    /// A slot for a connection from `peer`, evicting for it if need be.
    pub(super) fn admit(
        self: &Arc<Table>,
        peer: IpAddr,
        stream: Option<&tokio::net::TcpStream>,
    ) -> Admit {
        let now = Instant::now();
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let held = |conns: &[Arc<Conn>], p: IpAddr| conns.iter().filter(|c| c.peer == p).count();
        // A hung-up peer's first, then the most slots' holder's, then by rank.
        let victim = |conns: &[Arc<Conn>], of: Option<IpAddr>| {
            conns
                .iter()
                .enumerate()
                .filter(|(_, c)| of.is_none_or(|p| c.peer == p))
                .filter_map(|(i, c)| {
                    let rank = c.eviction_rank(now, self.stall)?;
                    let key = (rank.0 != 0, std::cmp::Reverse(held(conns, c.peer)), rank);
                    Some((key, i))
                })
                .min()
                .map(|(_, i)| i)
        };
        let mine = conns.iter().filter(|c| c.peer == peer).count();
        let evict = if mine >= self.per_peer {
            match victim(&conns, Some(peer)) {
                Some(i) => Some(i),
                None => return Admit::Refused,
            }
        } else if conns.len() >= self.max {
            match victim(&conns, None) {
                Some(i) => Some(i),
                None => return Admit::Full,
            }
        } else {
            None
        };
        if let Some(i) = evict {
            // Its slot is the newcomer's from now; its task resets it.
            conns.swap_remove(i).evict.notify_one();
        }
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            peer,
            accepted: now,
            epoch: self.epoch,
            read: AtomicBool::new(false),
            stalled: AtomicU64::new(0),
            evict: Notify::new(),
            fd: stream.and_then(|s| s.as_fd().try_clone_to_owned().ok()),
        });
        conns.push(conn.clone());
        Admit::In(Slot {
            table: self.clone(),
            conn,
        })
    }
}

/// A connection's slot, freed when it drops.
pub(super) struct Slot {
    table: Arc<Table>,
    pub(super) conn: Arc<Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut conns = self.table.conns.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = conns.iter().position(|c| c.id == self.conn.id) {
            conns.swap_remove(i);
        }
        drop(conns);
        self.table.freed.notify_one();
    }
}

/// A TCP stream that tells its [`Conn`] when a write waits on the client.
pub(super) struct Watched {
    pub(super) inner: tokio::net::TcpStream,
    pub(super) conn: Arc<Conn>,
}

impl Watched {
    fn noted<T>(&self, poll: Poll<T>) -> Poll<T> {
        self.conn.write_waits(poll.is_pending());
        poll
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.noted(poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.noted(poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Makes `fd`'s socket reset when it is last closed (SO_LINGER of 0, which
/// does not block the close).
pub(super) fn reset_on_close(fd: &impl AsFd) {
    let linger = nix::libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let _ = nix::sys::socket::setsockopt(fd, nix::sys::socket::sockopt::Linger, &linger);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, per_peer: usize) -> HttpLimits {
        HttpLimits {
            max_connections: max,
            per_peer,
            stall: Duration::from_millis(0),
            ..HttpLimits::default()
        }
    }

    impl Table {
        fn admit_ip(self: &Arc<Table>, peer: IpAddr) -> Admit {
            self.admit(peer, None)
        }
    }

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    fn admitted(a: Admit) -> Slot {
        match a {
            Admit::In(s) => s,
            Admit::Refused => panic!("refused"),
            Admit::Full => panic!("full"),
        }
    }

    #[test]
    fn when_full_the_oldest_unread_connection_gives_way_and_a_read_one_never() {
        let table = Table::new(&limits(3, 3));
        let a = admitted(table.admit_ip(ip(1)));
        let b = admitted(table.admit_ip(ip(2)));
        let c = admitted(table.admit_ip(ip(3)));
        a.conn.request_read();
        // B is the oldest whose request is unread: it is evicted.
        let d = admitted(table.admit_ip(ip(4)));
        assert!(b.conn.evict.notified().now_or_never_is_ready(), "B evicted");
        c.conn.request_read();
        d.conn.request_read();
        // Every slot's request was read and no write waits: wait.
        assert!(matches!(table.admit_ip(ip(5)), Admit::Full));
        // A write that waits on its client makes it evictable.
        c.conn.write_waits(true);
        let _e = admitted(table.admit_ip(ip(5)));
        assert!(c.conn.evict.notified().now_or_never_is_ready());
        assert!(!a.conn.evict.notified().now_or_never_is_ready());
        // A slot freed is free again.
        drop(a);
        drop(b);
        drop(c);
        let _f = admitted(table.admit_ip(ip(6)));
        drop(d);
    }

    #[test]
    fn a_peer_holds_at_most_its_share_and_evicts_its_own() {
        let table = Table::new(&limits(8, 2));
        let a = admitted(table.admit_ip(ip(1)));
        let b = admitted(table.admit_ip(ip(1)));
        let other = admitted(table.admit_ip(ip(2)));
        // Its third connection takes its own oldest unread one's place.
        let _c = admitted(table.admit_ip(ip(1)));
        assert!(a.conn.evict.notified().now_or_never_is_ready());
        assert!(!other.conn.evict.notified().now_or_never_is_ready());
        // With both of its slots busy for real, it is refused.
        b.conn.request_read();
        _c.conn.request_read();
        assert!(matches!(table.admit_ip(ip(1)), Admit::Refused));
        assert!(matches!(table.admit_ip(ip(3)), Admit::In(_)));
    }

    #[test]
    fn a_full_table_takes_from_the_peer_that_holds_the_most() {
        let table = Table::new(&limits(4, 8));
        // A lone client's request, unread, older than the crowd's.
        let lone = admitted(table.admit_ip(ip(1)));
        let crowd: Vec<Slot> = (0..3).map(|_| admitted(table.admit_ip(ip(2)))).collect();
        // A newcomer from a third peer: the crowd's oldest gives way.
        let _new = admitted(table.admit_ip(ip(3)));
        assert!(
            !lone.conn.evict.notified().now_or_never_is_ready(),
            "the lone client stays"
        );
        assert!(crowd[0].conn.evict.notified().now_or_never_is_ready());
        assert!(!crowd[1].conn.evict.notified().now_or_never_is_ready());
    }

    /// Whether a `notified()` future is ready at once (a permit was stored).
    trait NowOrNever {
        fn now_or_never_is_ready(self) -> bool;
    }

    impl<F: std::future::Future> NowOrNever for F {
        fn now_or_never_is_ready(self) -> bool {
            let waker = std::task::Waker::noop();
            let mut cx = Context::from_waker(waker);
            let mut fut = std::pin::pin!(self);
            fut.as_mut().poll(&mut cx).is_ready()
        }
    }
}
