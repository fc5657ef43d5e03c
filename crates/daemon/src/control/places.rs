//! The places of the clients a control socket serves at once, and who
//! gives up theirs to a newcomer: an idle or slow client (one still
//! sending its request, or not reading its answer) is cut off rather than
//! let lock the others out.

use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::limits::Limits;
use crate::protocol::{ErrorKind, Reply, EX_UNAVAILABLE};

/// Where a client is in its exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Its request is not all in: its place may go to a newcomer.
    Reading,
    /// Its request is being answered: it keeps its place.
    Working,
    /// Its answer is being written since then: its place may go to a
    /// newcomer once that has taken [`Limits::stall`].
    Writing(Instant),
}

/// A client in a place: the table's view of it.
struct Client {
    id: u64,
    /// A group member's uid, counted against [`Limits::per_user`].
    user: Option<u32>,
    accepted: Instant,
    stage: Stage,
    /// The same socket, to cut the client off from the accept loop.
    conn: UnixStream,
}

/// The places of clients served at once.
pub(super) struct Clients {
    max: usize,
    per_user: usize,
    stall: Duration,
    next_id: u64,
    list: Vec<Client>,
}

impl Clients {
    pub(super) fn new(limits: &Limits) -> Arc<Mutex<Clients>> {
        Arc::new(Mutex::new(Clients {
            max: limits.max_clients.max(1),
            per_user: limits.per_user.max(1),
            stall: limits.stall,
            next_id: 0,
            list: Vec::new(),
        }))
    }

    /// A place for a client, taking an idle or slow client's if need be
    /// (that client is shut down: its thread sees the end at once);
    /// `None` if every place that could be its is doing real work.
    fn admit(&mut self, user: Option<u32>, conn: &UnixStream) -> Option<u64> {
        let now = Instant::now();
        let stall = self.stall;
        let victim = |list: &[Client], of: Option<u32>| {
            list.iter()
                .enumerate()
                .filter(|(_, c)| of.is_none() || c.user == of)
                .filter_map(|(i, c)| {
                    let rank = match c.stage {
                        Stage::Reading => (
                            waiting(&c.conn),
                            Duration::MAX - now.duration_since(c.accepted),
                        ),
                        Stage::Writing(t) if now.duration_since(t) >= stall => {
                            (2, Duration::MAX - now.duration_since(t))
                        }
                        _ => return None,
                    };
                    Some((rank, i))
                })
                .min()
                .map(|(_, i)| i)
        };
        let mine = user.map_or(0, |u| {
            self.list.iter().filter(|c| c.user == Some(u)).count()
        });
        let evict = if user.is_some() && mine >= self.per_user {
            Some(victim(&self.list, user)?)
        } else if self.list.len() >= self.max {
            Some(victim(&self.list, None)?)
        } else {
            None
        };
        let clone = conn.try_clone().ok()?;
        if let Some(i) = evict {
            // One still sending is told `busy` (so a real client asks
            // again, as it would have been told at the door); one not
            // reading its answer is not (that would land inside the
            // answer). Both are cut off.
            let gone = self.list.swap_remove(i);
            if gone.stage == Stage::Reading {
                tell_busy(&gone.conn);
            }
            let _ = gone.conn.shutdown(std::net::Shutdown::Both);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.list.push(Client {
            id,
            user,
            accepted: now,
            stage: Stage::Reading,
            conn: clone,
        });
        Some(id)
    }
}

/// Tells an evicted client `busy`, if its socket takes it at once.
fn tell_busy(conn: &UnixStream) {
    let busy = Reply::err(
        ErrorKind::Busy,
        EX_UNAVAILABLE,
        "dummynet: busy: your request was too slow to arrive and a newer client \
         took its place; try again\n",
    );
    if let Ok(mut text) = serde_json::to_string(&busy) {
        text.push('\n');
        let _ = nix::sys::socket::send(
            std::os::fd::AsRawFd::as_raw_fd(conn),
            text.as_bytes(),
            nix::sys::socket::MsgFlags::MSG_DONTWAIT | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        );
    }
}

/// What a client still reading its request has sent that its thread has
/// not read yet, as a rank for eviction: 0 if it hung up, 1 if nothing (it
/// is idle, or stalled partway), 3 if something (it is sending: a client
/// that just connected and wrote its line, its thread not yet at it).
fn waiting(conn: &UnixStream) -> u8 {
    use nix::sys::socket::{recv, MsgFlags};
    use std::os::fd::AsRawFd;
    let mut byte = [0u8; 1];
    match recv(
        conn.as_raw_fd(),
        &mut byte,
        MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(0) => 0,
        Ok(_) => 3,
        Err(_) => 1,
    }
}

/// A client's place, given up when this drops.
pub(super) struct Slot {
    clients: Arc<Mutex<Clients>>,
    id: u64,
}

impl Slot {
    pub(super) fn take(
        clients: &Arc<Mutex<Clients>>,
        user: Option<u32>,
        conn: &UnixStream,
    ) -> Option<Slot> {
        let id = lock(clients).admit(user, conn)?;
        Some(Slot {
            clients: clients.clone(),
            id,
        })
    }

    pub(super) fn stage(&self, stage: Stage) {
        if let Some(c) = lock(&self.clients)
            .list
            .iter_mut()
            .find(|c| c.id == self.id)
        {
            c.stage = stage;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut clients = lock(&self.clients);
        if let Some(i) = clients.list.iter().position(|c| c.id == self.id) {
            clients.list.swap_remove(i);
        }
    }
}

fn lock(clients: &Mutex<Clients>) -> std::sync::MutexGuard<'_, Clients> {
    clients.lock().unwrap_or_else(|e| e.into_inner())
}
