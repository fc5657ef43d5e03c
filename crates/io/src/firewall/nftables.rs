//! nftables: a table of our own per queue, written over netlink.
//!
//! Layout, for queue 7000 with both families, in and out, and a pass mark
//! (what `nft list table inet dummynet-7000` shows):
//!
//! ```text
//! table inet dummynet-7000 {
//!     comment "dummynet: NFQUEUE 7000, pid 1234"
//!     chain input {
//!         type filter hook input priority filter; policy accept;
//!         meta mark 0x0000646e accept
//!         iifname != "lo" counter queue num 7000 bypass
//!     }
//!     chain output {
//!         type filter hook output priority filter; policy accept;
//!         meta mark 0x0000646e accept
//!         oifname != "lo" counter queue num 7000 bypass
//!     }
//! }
//! ```
//!
//! The chains hook where the iptables fallback's jumps are (the filter
//! table's INPUT, OUTPUT and FORWARD, priority 0); with one family only the
//! table is `ip` or `ip6` instead of `inet`.
//!
//! # Why netlink and not the `nft` program
//!
//! - The table is created with the *owner* flag (Linux 5.12): it belongs to
//!   the netlink socket that created it, which the daemon keeps open. When
//!   the daemon's process ends, even by SIGKILL, the kernel deletes the
//!   table, so a crash never leaves packets queued to nobody; others cannot
//!   change it meanwhile, and `nft flush ruleset` leaves it alone. A table
//!   made by `nft` would belong to `nft`, gone as soon as it exits.
//! - Where the kernel lacks `nft_queue` (`CONFIG_NFT_QUEUE`, as on the
//!   machines this project is tested on), the rule hands packets to the
//!   queue with xtables' NFQUEUE target through the compatibility
//!   expression, exactly as iptables-nft does; `nft` cannot write that.
//!   `nft` (built with libxtables, as distributions ship it) still lists it
//!   as `queue num N bypass`.
//! - No crate was a fit: `rustables` has neither the queue nor the
//!   compatibility expression, `nftnl` needs the C libnftnl. The messages
//!   are few and fixed, so they are encoded here, as the NFQUEUE verdicts
//!   are in [`crate::nfqueue`].
//!
//! The socket is made in the calling thread's network namespace, and every
//! message sent on it acts there, whichever thread sends it.

use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{
    self, setsockopt, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol,
    SockType,
};
use nix::sys::time::{TimeVal, TimeValLike};

use super::{FirewallError, HookPoint, InterceptSpec};

/// The name of the table of queue `queue`.
pub fn table_name(queue: u16) -> String {
    format!("dummynet-{queue}")
}

/// How long the kernel may take to answer a batch.
const REPLY_WAIT: Duration = Duration::from_secs(5);

// From linux/netlink.h, linux/netfilter/nfnetlink.h and
// linux/netfilter/nf_tables.h (kernel ABI: these numbers never change).
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_APPEND: u16 = 0x800;
const NLA_F_NESTED: u16 = 0x8000;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_GETTABLE: u16 = 1;
const NFT_MSG_DELTABLE: u16 = 2;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_NEWRULE: u16 = 6;
const NFTA_TABLE_NAME: u16 = 1;
const NFTA_TABLE_FLAGS: u16 = 2;
const NFTA_TABLE_USERDATA: u16 = 6;
const NFTA_TABLE_OWNER: u16 = 7;
const NFT_TABLE_F_OWNER: u32 = 0x2;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_CHAIN_POLICY: u16 = 5;
const NFTA_CHAIN_TYPE: u16 = 7;
const NFTA_HOOK_HOOKNUM: u16 = 1;
const NFTA_HOOK_PRIORITY: u16 = 2;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_META_DREG: u16 = 1;
const NFTA_META_KEY: u16 = 2;
const NFT_META_MARK: u32 = 3;
const NFT_META_IIFNAME: u32 = 6;
const NFT_META_OIFNAME: u32 = 7;
const NFTA_CMP_SREG: u16 = 1;
const NFTA_CMP_OP: u16 = 2;
const NFTA_CMP_DATA: u16 = 3;
const NFT_CMP_EQ: u32 = 0;
const NFT_CMP_NEQ: u32 = 1;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_IMMEDIATE_DREG: u16 = 1;
const NFTA_IMMEDIATE_DATA: u16 = 2;
const NFTA_QUEUE_NUM: u16 = 1;
const NFTA_QUEUE_TOTAL: u16 = 2;
const NFTA_QUEUE_FLAGS: u16 = 3;
const NFT_QUEUE_FLAG_BYPASS: u16 = 0x1;
const NFTA_TARGET_NAME: u16 = 1;
const NFTA_TARGET_REV: u16 = 2;
const NFTA_TARGET_INFO: u16 = 3;
/// The verdict register, and the first 16-byte data register.
const NFT_REG_VERDICT: u32 = 0;
const NFT_REG_1: u32 = 1;
const NF_ACCEPT: u32 = 1;
/// Hook numbers (NF_INET_*).
const NF_INET_LOCAL_IN: u32 = 1;
const NF_INET_FORWARD: u32 = 2;
const NF_INET_LOCAL_OUT: u32 = 3;
/// Protocol families of nf_tables (NFPROTO_*).
const NFPROTO_UNSPEC: u8 = 0;
const NFPROTO_INET: u8 = 1;
const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;
/// Interface names compare as IFNAMSIZ bytes, zero padded.
const IFNAMSIZ: usize = 16;
/// libnftnl's user data type for a table's comment, which `nft` shows.
const NFTNL_UDATA_TABLE_COMMENT: u8 = 0;

/// A short explanation for the errors the kernel gives most often.
pub(crate) fn errno_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM) => " (CAP_NET_ADMIN is needed in the network namespace)",
        _ => "",
    }
}

/// How the rule hands a packet to the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueExpr {
    /// nf_tables' own `queue` expression (`CONFIG_NFT_QUEUE`).
    Native,
    /// xtables' NFQUEUE target, revision 3, through the compatibility
    /// expression (`CONFIG_NFT_COMPAT`), as iptables-nft writes it.
    XtTarget,
}

// ---------------------------------------------------------------------------
// Message encoding
// ---------------------------------------------------------------------------

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// A netlink attribute tree being written into a buffer.
struct Attrs<'a> {
    buf: &'a mut Vec<u8>,
}

impl Attrs<'_> {
    fn put(&mut self, kind: u16, value: &[u8]) -> &mut Self {
        let len = 4 + value.len();
        // Attribute lengths are 16 bits; ours are a few dozen bytes.
        self.buf
            .extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    /// A NUL-terminated string, as libnftnl sends them.
    fn str(&mut self, kind: u16, s: &str) -> &mut Self {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.put(kind, &v)
    }

    /// nf_tables' integers are big-endian.
    fn be32(&mut self, kind: u16, v: u32) -> &mut Self {
        self.put(kind, &v.to_be_bytes())
    }

    fn be16(&mut self, kind: u16, v: u16) -> &mut Self {
        self.put(kind, &v.to_be_bytes())
    }

    fn nested(&mut self, kind: u16, f: impl FnOnce(&mut Attrs<'_>)) -> &mut Self {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        f(&mut Attrs { buf: self.buf });
        let len = u16::try_from(self.buf.len() - start).unwrap_or(u16::MAX);
        self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        self.buf[start + 2..start + 4].copy_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
        self
    }

    /// One expression of a rule: its name and its attributes.
    fn expr(&mut self, name: &str, data: impl FnOnce(&mut Attrs<'_>)) -> &mut Self {
        self.nested(NFTA_LIST_ELEM, |e| {
            e.str(NFTA_EXPR_NAME, name);
            e.nested(NFTA_EXPR_DATA, data);
        })
    }
}

/// What one message of a batch does, to say which step the kernel refused.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Begin,
    End,
    Table,
    Chain(HookPoint),
    Rule(HookPoint, RuleKind),
    DeleteTable,
    GetTable,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RuleKind {
    PassMark,
    Queue,
}

/// A batch of nf_tables messages, each asking for an acknowledgement.
struct Batch {
    buf: Vec<u8>,
    steps: Vec<(u32, Step)>,
    seq: u32,
}

impl Batch {
    fn new(first_seq: u32) -> Batch {
        let mut b = Batch {
            buf: Vec::new(),
            steps: Vec::new(),
            seq: first_seq,
        };
        b.msg(
            NFNL_MSG_BATCH_BEGIN,
            NLM_F_REQUEST,
            NFPROTO_UNSPEC,
            Step::Begin,
            |_| {},
        );
        b
    }

    /// Appends one message: netlink header, nfgenmsg, attributes.
    fn msg(
        &mut self,
        kind: u16,
        flags: u16,
        family: u8,
        step: Step,
        attrs: impl FnOnce(&mut Attrs<'_>),
    ) {
        let start = self.buf.len();
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        self.buf.extend_from_slice(&[0; 4]); // length, below
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
                                                         // nfgenmsg: family, version 0, resource id (the subsystem for a
                                                         // batch begin/end, else 0), big-endian.
        let res_id = if kind == NFNL_MSG_BATCH_BEGIN || kind == NFNL_MSG_BATCH_END {
            NFNL_SUBSYS_NFTABLES
        } else {
            0
        };
        self.buf.push(family);
        self.buf.push(0);
        self.buf.extend_from_slice(&res_id.to_be_bytes());
        attrs(&mut Attrs { buf: &mut self.buf });
        let len = u32::try_from(self.buf.len() - start).unwrap_or(u32::MAX);
        self.buf[start..start + 4].copy_from_slice(&len.to_ne_bytes());
        if flags & NLM_F_ACK != 0 || kind == NFNL_MSG_BATCH_BEGIN {
            self.steps.push((seq, step));
        }
    }

    fn nft(
        &mut self,
        msg: u16,
        flags: u16,
        family: u8,
        step: Step,
        attrs: impl FnOnce(&mut Attrs<'_>),
    ) {
        self.msg(
            (NFNL_SUBSYS_NFTABLES << 8) | msg,
            NLM_F_REQUEST | NLM_F_ACK | flags,
            family,
            step,
            attrs,
        );
    }

    fn finish(mut self) -> Batch {
        self.msg(
            NFNL_MSG_BATCH_END,
            NLM_F_REQUEST,
            NFPROTO_UNSPEC,
            Step::End,
            |_| {},
        );
        // The batch end asks for no answer: the begin (which the kernel
        // answers only to refuse the whole batch) and the messages with
        // NLM_F_ACK are what a reply can name.
        self
    }
}

/// What the table looks like: everything [`install_batch`] needs.
#[derive(Clone, Debug)]
struct Layout {
    family: u8,
    name: String,
    queue: u16,
    bypass: bool,
    hooks: Vec<HookPoint>,
    loopback: bool,
    pass_mark: Option<u32>,
    /// Only packets leaving by this interface (`oifname NAME`).
    oif: Option<String>,
    comment: String,
}

/// The one iptables match nftables writes too: `-o NAME` (packets leaving
/// by NAME), as `oifname NAME`. `None` for anything else.
pub(crate) fn out_interface(matches: &[String]) -> Option<&str> {
    match matches {
        [o, name] if o == "-o" && !name.is_empty() && name.len() < IFNAMSIZ => Some(name),
        _ => None,
    }
}

fn hook_number(h: HookPoint) -> u32 {
    match h {
        HookPoint::Input => NF_INET_LOCAL_IN,
        HookPoint::Output => NF_INET_LOCAL_OUT,
        HookPoint::Forward => NF_INET_FORWARD,
    }
}

fn chain_name(h: HookPoint) -> &'static str {
    match h {
        HookPoint::Input => "input",
        HookPoint::Output => "output",
        HookPoint::Forward => "forward",
    }
}

/// `meta KEY` into register 1, compared (`op`) with `value`.
fn meta_cmp(r: &mut Attrs<'_>, key: u32, op: u32, value: &[u8]) {
    r.expr("meta", |e| {
        e.be32(NFTA_META_KEY, key).be32(NFTA_META_DREG, NFT_REG_1);
    });
    r.expr("cmp", |e| {
        e.be32(NFTA_CMP_SREG, NFT_REG_1).be32(NFTA_CMP_OP, op);
        e.nested(NFTA_CMP_DATA, |d| {
            d.put(NFTA_DATA_VALUE, value);
        });
    });
}

/// The message that creates the table, then its chains and rules.
fn install_batch(l: &Layout, how: QueueExpr, first_seq: u32) -> Batch {
    let mut b = Batch::new(first_seq);
    b.nft(NFT_MSG_NEWTABLE, NLM_F_CREATE, l.family, Step::Table, |a| {
        a.str(NFTA_TABLE_NAME, &l.name)
            .be32(NFTA_TABLE_FLAGS, NFT_TABLE_F_OWNER);
        // A comment `nft list` shows: a type-length-value record.
        let text = l.comment.as_bytes();
        let len = text.len().min(200);
        let mut udata = vec![NFTNL_UDATA_TABLE_COMMENT, (len + 1) as u8];
        udata.extend_from_slice(&text[..len]);
        udata.push(0);
        a.put(NFTA_TABLE_USERDATA, &udata);
    });
    for &h in &l.hooks {
        b.nft(
            NFT_MSG_NEWCHAIN,
            NLM_F_CREATE,
            l.family,
            Step::Chain(h),
            |a| {
                a.str(NFTA_CHAIN_TABLE, &l.name)
                    .str(NFTA_CHAIN_NAME, chain_name(h))
                    .nested(NFTA_CHAIN_HOOK, |k| {
                        // Priority 0: the filter table's, as iptables uses.
                        k.be32(NFTA_HOOK_HOOKNUM, hook_number(h))
                            .be32(NFTA_HOOK_PRIORITY, 0);
                    })
                    .be32(NFTA_CHAIN_POLICY, NF_ACCEPT)
                    .str(NFTA_CHAIN_TYPE, "filter");
            },
        );
        let rule = |b: &mut Batch, kind: RuleKind, exprs: &dyn Fn(&mut Attrs<'_>)| {
            b.nft(
                NFT_MSG_NEWRULE,
                NLM_F_CREATE | NLM_F_APPEND,
                l.family,
                Step::Rule(h, kind),
                |a| {
                    a.str(NFTA_RULE_TABLE, &l.name)
                        .str(NFTA_RULE_CHAIN, chain_name(h))
                        .nested(NFTA_RULE_EXPRESSIONS, |r| exprs(r));
                },
            );
        };
        if let Some(mark) = l.pass_mark {
            // `meta mark M accept`: the daemon's own copies go on.
            rule(&mut b, RuleKind::PassMark, &|r| {
                meta_cmp(r, NFT_META_MARK, NFT_CMP_EQ, &mark.to_ne_bytes());
                r.expr("immediate", |e| {
                    e.be32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
                    e.nested(NFTA_IMMEDIATE_DATA, |d| {
                        d.nested(NFTA_DATA_VERDICT, |v| {
                            v.be32(NFTA_VERDICT_CODE, NF_ACCEPT);
                        });
                    });
                });
            });
        }
        rule(&mut b, RuleKind::Queue, &|r| {
            let not_lo = match h {
                HookPoint::Input => Some(NFT_META_IIFNAME),
                HookPoint::Output => Some(NFT_META_OIFNAME),
                HookPoint::Forward => None,
            };
            if let (Some(key), false) = (not_lo, l.loopback) {
                let mut lo = [0u8; IFNAMSIZ];
                lo[..2].copy_from_slice(b"lo");
                meta_cmp(r, key, NFT_CMP_NEQ, &lo);
            }
            if let Some(oif) = &l.oif {
                let mut name = [0u8; IFNAMSIZ];
                name[..oif.len()].copy_from_slice(oif.as_bytes());
                meta_cmp(r, NFT_META_OIFNAME, NFT_CMP_EQ, &name);
            }
            r.expr("counter", |_| {});
            match how {
                QueueExpr::Native => {
                    r.expr("queue", |e| {
                        e.be16(NFTA_QUEUE_NUM, l.queue).be16(NFTA_QUEUE_TOTAL, 1);
                        if l.bypass {
                            e.be16(NFTA_QUEUE_FLAGS, NFT_QUEUE_FLAG_BYPASS);
                        }
                    });
                }
                QueueExpr::XtTarget => {
                    r.expr("target", |e| {
                        // struct xt_NFQ_info_v3 { u16 queuenum, queues_total,
                        // flags } in host order, padded to 8 bytes
                        // (XT_ALIGN), which the kernel checks.
                        let mut info = [0u8; 8];
                        info[0..2].copy_from_slice(&l.queue.to_ne_bytes());
                        info[2..4].copy_from_slice(&1u16.to_ne_bytes());
                        let flags = if l.bypass { NFT_QUEUE_FLAG_BYPASS } else { 0 };
                        info[4..6].copy_from_slice(&flags.to_ne_bytes());
                        e.str(NFTA_TARGET_NAME, "NFQUEUE")
                            .be32(NFTA_TARGET_REV, 3)
                            .put(NFTA_TARGET_INFO, &info);
                    });
                }
            }
        });
    }
    b.finish()
}

fn delete_batch(family: u8, name: &str, first_seq: u32) -> Batch {
    let mut b = Batch::new(first_seq);
    b.nft(NFT_MSG_DELTABLE, 0, family, Step::DeleteTable, |a| {
        a.str(NFTA_TABLE_NAME, name);
    });
    b.finish()
}

// ---------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------

/// One answer of the kernel: the sequence number it answers and its errno
/// (0 for an acknowledgement).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Answer {
    seq: u32,
    errno: i32,
}

/// The `NLMSG_ERROR` messages (acknowledgements and errors) in one
/// datagram from the kernel; other messages are skipped. Malformed input
/// ends the walk.
fn parse_answers(mut data: &[u8]) -> Vec<Answer> {
    let mut out = Vec::new();
    while data.len() >= 16 {
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if len < 16 || len > data.len() {
            break;
        }
        let kind = u16::from_ne_bytes([data[4], data[5]]);
        let seq = u32::from_ne_bytes([data[8], data[9], data[10], data[11]]);
        if kind == NLMSG_ERROR && len >= 20 {
            let err = i32::from_ne_bytes([data[16], data[17], data[18], data[19]]);
            out.push(Answer {
                seq,
                errno: err.saturating_neg(),
            });
        }
        data = &data[align4(len).min(data.len())..];
    }
    out
}

/// The netlink attributes of one message's payload, as (type, value).
fn parse_attrs(mut data: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while data.len() >= 4 {
        let len = u16::from_ne_bytes([data[0], data[1]]) as usize;
        let kind = u16::from_ne_bytes([data[2], data[3]]) & !NLA_F_NESTED;
        if len < 4 || len > data.len() {
            break;
        }
        out.push((kind, &data[4..len]));
        data = &data[align4(len).min(data.len())..];
    }
    out
}

// ---------------------------------------------------------------------------
// The socket
// ---------------------------------------------------------------------------

/// A netfilter netlink socket in the calling thread's namespace.
#[derive(Debug)]
struct Socket {
    fd: OwnedFd,
    seq: u32,
}

impl Socket {
    fn open() -> Result<Socket, FirewallError> {
        let fd = socket::socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkNetFilter,
        )
        .map_err(|e| match e {
            Errno::EPROTONOSUPPORT | Errno::EAFNOSUPPORT => {
                FirewallError::NftablesUnsupported(format!("no nfnetlink in this kernel ({e})"))
            }
            e => FirewallError::Nftables {
                op: "opening a netfilter netlink socket".into(),
                source: e.into(),
            },
        })?;
        let io_err = |op: &str, e: Errno| FirewallError::Nftables {
            op: op.into(),
            source: e.into(),
        };
        socket::bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))
            .map_err(|e| io_err("binding the netlink socket", e))?;
        let wait = TimeVal::seconds(i64::try_from(REPLY_WAIT.as_secs()).unwrap_or(5));
        setsockopt(&fd, sockopt::ReceiveTimeout, &wait)
            .map_err(|e| io_err("setting the netlink receive timeout", e))?;
        // Sequence numbers only need to differ between batches of one
        // socket; starting from the time tells sockets apart in traces.
        let seq = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs() as u32);
        Ok(Socket { fd, seq })
    }

    /// Sends a batch and collects the kernel's answer to each of its
    /// steps: `Ok(())` if all succeeded, else the first refused step and
    /// its errno.
    fn transact(
        &mut self,
        make: impl FnOnce(u32) -> Batch,
    ) -> Result<Result<(), (Step, Errno)>, FirewallError> {
        let batch = make(self.seq);
        self.seq = batch.seq;
        socket::sendto(
            self.fd.as_raw_fd(),
            &batch.buf,
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        )
        .map_err(|e| FirewallError::Nftables {
            op: "sending to nf_tables".into(),
            source: e.into(),
        })?;
        let begin = batch.steps.first().map(|(s, _)| *s);
        let mut waiting: Vec<(u32, Step)> = batch
            .steps
            .iter()
            .filter(|(_, s)| *s != Step::Begin)
            .cloned()
            .collect();
        let mut refused: Vec<(u32, Step, Errno)> = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        while !waiting.is_empty() {
            let n =
                socket::recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::empty()).map_err(|e| {
                    FirewallError::Nftables {
                        op: if e == Errno::EAGAIN {
                            format!("no answer from nf_tables within {REPLY_WAIT:?}")
                        } else {
                            "reading nf_tables' answer".into()
                        },
                        source: e.into(),
                    }
                })?;
            for a in parse_answers(&buf[..n]) {
                if Some(a.seq) == begin && a.errno != 0 {
                    // The whole batch was refused (no nf_tables subsystem).
                    return Ok(Err((Step::Begin, Errno::from_raw(a.errno))));
                }
                if let Some(i) = waiting.iter().position(|(s, _)| *s == a.seq) {
                    let (seq, step) = waiting.remove(i);
                    if a.errno != 0 {
                        refused.push((seq, step, Errno::from_raw(a.errno)));
                    }
                }
            }
        }
        refused.sort_by_key(|(seq, _, _)| seq.wrapping_sub(begin.unwrap_or(0)));
        Ok(match refused.into_iter().next() {
            Some((_, step, errno)) => Err((step, errno)),
            None => Ok(()),
        })
    }

    /// Which socket (netlink port id) owns table `name` of `family`: `None`
    /// if there is no such table, `Some(None)` if it has no owner.
    fn table_owner(
        &mut self,
        family: u8,
        name: &str,
    ) -> Result<Option<Option<u32>>, FirewallError> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let mut b = Batch {
            buf: Vec::new(),
            steps: Vec::new(),
            seq,
        };
        b.msg(
            (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE,
            NLM_F_REQUEST | NLM_F_ACK,
            family,
            Step::GetTable,
            |a| {
                a.str(NFTA_TABLE_NAME, name);
            },
        );
        let op = || format!("looking up table {} {name}", family_name(family));
        socket::sendto(
            self.fd.as_raw_fd(),
            &b.buf,
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        )
        .map_err(|e| FirewallError::Nftables {
            op: op(),
            source: e.into(),
        })?;
        let mut rx = vec![0u8; 64 * 1024];
        let mut owner: Option<Option<u32>> = None;
        loop {
            let n = socket::recv(self.fd.as_raw_fd(), &mut rx, MsgFlags::empty()).map_err(|e| {
                FirewallError::Nftables {
                    op: op(),
                    source: e.into(),
                }
            })?;
            let mut data = &rx[..n];
            while data.len() >= 16 {
                let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
                if len < 16 || len > data.len() {
                    break;
                }
                let kind = u16::from_ne_bytes([data[4], data[5]]);
                let mseq = u32::from_ne_bytes([data[8], data[9], data[10], data[11]]);
                if mseq == seq {
                    if kind == NLMSG_ERROR && len >= 20 {
                        let err = i32::from_ne_bytes([data[16], data[17], data[18], data[19]])
                            .saturating_neg();
                        return match Errno::from_raw(err) {
                            _ if err == 0 => Ok(owner),
                            Errno::ENOENT => Ok(None),
                            e => Err(FirewallError::Nftables {
                                op: op(),
                                source: e.into(),
                            }),
                        };
                    }
                    if kind == (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE && len >= 20 {
                        let mut found = None;
                        for (t, v) in parse_attrs(&data[20..len]) {
                            if t == NFTA_TABLE_OWNER && v.len() == 4 {
                                found = Some(u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
                            }
                        }
                        owner = Some(found);
                    }
                }
                data = &data[align4(len).min(data.len())..];
            }
        }
    }
}

fn family_name(family: u8) -> &'static str {
    match family {
        NFPROTO_IPV4 => "ip",
        NFPROTO_IPV6 => "ip6",
        _ => "inet",
    }
}

/// Says which step failed, in nft's words.
fn describe(step: &Step, family: u8, name: &str) -> String {
    let fam = family_name(family);
    match step {
        Step::Begin => "starting a batch".into(),
        Step::End => "ending a batch".into(),
        Step::Table => format!("adding table {fam} {name}"),
        Step::Chain(h) => format!("adding chain {fam} {name} {}", chain_name(*h)),
        Step::Rule(h, RuleKind::PassMark) => {
            format!(
                "adding the pass-mark rule to chain {fam} {name} {}",
                chain_name(*h)
            )
        }
        Step::Rule(h, RuleKind::Queue) => {
            format!(
                "adding the queue rule to chain {fam} {name} {}",
                chain_name(*h)
            )
        }
        Step::DeleteTable => format!("deleting table {fam} {name}"),
        Step::GetTable => format!("looking up table {fam} {name}"),
    }
}

/// Deletes table `name` of `family` unless it is owned by a live socket;
/// true if it was there.
fn delete_unowned(sock: &mut Socket, family: u8, name: &str) -> Result<bool, FirewallError> {
    match sock.table_owner(family, name)? {
        None => return Ok(false),
        Some(Some(port)) => {
            return Err(FirewallError::Nftables {
                op: format!(
                    "table {} {name} exists and is owned by another running program \
                     (netlink port {port}): is another dummynet using this queue?",
                    family_name(family)
                ),
                source: Errno::EBUSY.into(),
            })
        }
        Some(None) => {}
    }
    match sock.transact(|seq| delete_batch(family, name, seq))? {
        Ok(()) => Ok(true),
        Err((_, Errno::ENOENT)) => Ok(false),
        Err((step, errno)) => Err(FirewallError::Nftables {
            op: describe(&step, family, name),
            source: errno.into(),
        }),
    }
}

/// Deletes the tables of queue `queue` in the calling thread's namespace
/// (all three families) that no live socket owns; how many there were.
/// Hold the queue's lock first (see [`super::remove_stale`]).
pub fn remove_stale(queue: u16) -> Result<usize, FirewallError> {
    let mut sock = Socket::open()?;
    let name = table_name(queue);
    let mut n = 0;
    for family in [NFPROTO_INET, NFPROTO_IPV4, NFPROTO_IPV6] {
        match delete_unowned(&mut sock, family, &name) {
            Ok(true) => n += 1,
            Ok(false) => {}
            // A family this kernel does not have holds nothing.
            Err(FirewallError::Nftables { ref source, .. })
                if matches!(
                    source.raw_os_error(),
                    Some(libc::EAFNOSUPPORT) | Some(libc::EOPNOTSUPP)
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Our table, owned by our socket: the kernel deletes it when the socket
/// closes. [`remove`](Self::remove) or dropping deletes it at once.
#[derive(Debug)]
pub struct Table {
    sock: Socket,
    family: u8,
    name: String,
    queue_expr: QueueExpr,
    removed: bool,
}

impl Table {
    /// Creates the table of `spec` in the calling thread's namespace,
    /// replacing an unowned table of the same name (see [`remove_stale`]).
    /// [`FirewallError::NftablesUnsupported`] if this kernel cannot.
    pub fn install(spec: &InterceptSpec) -> Result<Table, FirewallError> {
        spec.check()?;
        let oif = out_interface(&spec.matches);
        if oif.is_some() && spec.directions.input {
            return Err(FirewallError::Spec(
                "`-o IF` (leaving by IF) matches no packet coming in: intercept out or forward"
                    .into(),
            ));
        }
        if !spec.matches.is_empty() && oif.is_none() {
            return Err(FirewallError::Spec(format!(
                "extra match arguments ({}) are iptables syntax: use the iptables firewall",
                spec.matches.join(" ")
            )));
        }
        let family = match (spec.ipv4, spec.ipv6) {
            (true, true) => NFPROTO_INET,
            (true, false) => NFPROTO_IPV4,
            _ => NFPROTO_IPV6,
        };
        let layout = Layout {
            family,
            name: table_name(spec.queue),
            queue: spec.queue,
            bypass: spec.bypass,
            hooks: spec.directions.hooks().collect(),
            loopback: spec.loopback,
            pass_mark: spec.pass_mark,
            oif: oif.map(str::to_string),
            comment: format!(
                "dummynet: NFQUEUE {}, pid {}",
                spec.queue,
                std::process::id()
            ),
        };
        let mut sock = Socket::open()?;
        match delete_unowned(&mut sock, family, &layout.name) {
            Err(FirewallError::Nftables { ref source, .. })
                if matches!(
                    source.raw_os_error(),
                    Some(libc::EAFNOSUPPORT) | Some(libc::EOPNOTSUPP)
                ) =>
            {
                return Err(FirewallError::NftablesUnsupported(format!(
                    "the kernel has no nf_tables {} family ({source})",
                    family_name(family)
                )));
            }
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        let mut refused = Vec::new();
        for how in [QueueExpr::Native, QueueExpr::XtTarget] {
            match sock.transact(|seq| install_batch(&layout, how, seq))? {
                Ok(()) => {
                    return Ok(Table {
                        sock,
                        family,
                        name: layout.name,
                        queue_expr: how,
                        removed: false,
                    })
                }
                // The expression's module is missing: try the other way.
                Err((Step::Rule(_, RuleKind::Queue), Errno::ENOENT)) => refused.push(how),
                Err((step, errno)) => {
                    let op = describe(&step, family, &layout.name);
                    return Err(match errno {
                        Errno::EOPNOTSUPP | Errno::EAFNOSUPPORT | Errno::ENOENT => {
                            FirewallError::NftablesUnsupported(format!("{op}: {errno}"))
                        }
                        e => FirewallError::Nftables {
                            op,
                            source: e.into(),
                        },
                    });
                }
            }
        }
        Err(FirewallError::NftablesUnsupported(format!(
            "the kernel has neither nft_queue (CONFIG_NFT_QUEUE) nor the xtables NFQUEUE \
             target through nft_compat ({refused:?} refused)"
        )))
    }

    /// `inet`, `ip` or `ip6`.
    pub fn family_name(&self) -> &'static str {
        family_name(self.family)
    }

    /// The table's name, `dummynet-<queue>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the rules hand packets to the queue.
    pub fn queue_expr(&self) -> QueueExpr {
        self.queue_expr
    }

    /// Deletes the table now.
    pub fn remove(mut self) -> Result<(), FirewallError> {
        self.remove_inner()
    }

    fn remove_inner(&mut self) -> Result<(), FirewallError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let (family, name) = (self.family, self.name.clone());
        match self.sock.transact(|seq| delete_batch(family, &name, seq))? {
            // Gone already: someone deleted it, which only root can do.
            Ok(()) | Err((_, Errno::ENOENT)) => Ok(()),
            Err((step, errno)) => Err(FirewallError::Nftables {
                op: describe(&step, family, &name),
                source: errno.into(),
            }),
        }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // Closing the socket would delete the table too; deleting it here
        // first says so if something is wrong.
        if let Err(e) = self.remove_inner() {
            // Not eprintln!, which panics when stderr is on a full disk.
            let _ = writeln!(
                std::io::stderr(),
                "dummynet: removing the NFQUEUE interception: {e}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            family: NFPROTO_INET,
            name: "dummynet-7".into(),
            queue: 7,
            bypass: true,
            hooks: vec![HookPoint::Input, HookPoint::Output],
            loopback: false,
            pass_mark: Some(0x646e),
            oif: None,
            comment: "c".into(),
        }
    }

    /// (type, flags, seq, family) of each message in a batch.
    fn headers(buf: &[u8]) -> Vec<(u16, u16, u32, u8)> {
        let mut out = Vec::new();
        let mut d = buf;
        while d.len() >= 20 {
            let len = u32::from_ne_bytes(d[0..4].try_into().unwrap()) as usize;
            assert!(
                len >= 20 && len <= d.len() && len.is_multiple_of(4),
                "length {len}"
            );
            out.push((
                u16::from_ne_bytes(d[4..6].try_into().unwrap()),
                u16::from_ne_bytes(d[6..8].try_into().unwrap()),
                u32::from_ne_bytes(d[8..12].try_into().unwrap()),
                d[16],
            ));
            d = &d[len..];
        }
        assert!(d.is_empty(), "trailing bytes");
        out
    }

    #[test]
    fn install_batch_is_begin_table_chains_rules_end() {
        let b = install_batch(&layout(), QueueExpr::Native, 100);
        let h = headers(&b.buf);
        let kinds: Vec<u16> = h.iter().map(|m| m.0).collect();
        let t = |m: u16| (NFNL_SUBSYS_NFTABLES << 8) | m;
        assert_eq!(
            kinds,
            [
                NFNL_MSG_BATCH_BEGIN,
                t(NFT_MSG_NEWTABLE),
                t(NFT_MSG_NEWCHAIN),
                t(NFT_MSG_NEWRULE),
                t(NFT_MSG_NEWRULE),
                t(NFT_MSG_NEWCHAIN),
                t(NFT_MSG_NEWRULE),
                t(NFT_MSG_NEWRULE),
                NFNL_MSG_BATCH_END,
            ]
        );
        let seqs: Vec<u32> = h.iter().map(|m| m.2).collect();
        assert_eq!(seqs, (100..109).collect::<Vec<_>>());
        // Every nf_tables message asks for an answer and names the family.
        for m in &h[1..8] {
            assert_eq!(m.1 & (NLM_F_REQUEST | NLM_F_ACK), NLM_F_REQUEST | NLM_F_ACK);
            assert_eq!(m.3, NFPROTO_INET);
        }
        assert_eq!(b.seq, 109);
        assert_eq!(
            b.steps.iter().map(|s| s.0).collect::<Vec<_>>(),
            (100..108).collect::<Vec<_>>()
        );
        assert_eq!(b.steps[2].1, Step::Chain(HookPoint::Input));
        assert_eq!(b.steps[7].1, Step::Rule(HookPoint::Output, RuleKind::Queue));
    }

    #[test]
    fn queue_rules_carry_the_number_and_bypass() {
        let native = install_batch(&layout(), QueueExpr::Native, 1).buf;
        // NFTA_QUEUE_NUM 7 and NFTA_QUEUE_FLAGS bypass, big-endian.
        let num = [6, 0, 1, 0, 0, 7, 0, 0];
        let flags = [6, 0, 3, 0, 0, 1, 0, 0];
        assert!(native.windows(8).any(|w| w == num));
        assert!(native.windows(8).any(|w| w == flags));
        assert!(native.windows(6).any(|w| w == b"queue\0"));

        let mut l = layout();
        l.bypass = false;
        let xt = install_batch(&l, QueueExpr::XtTarget, 1).buf;
        assert!(xt.windows(8).any(|w| w == b"NFQUEUE\0"));
        assert!(!xt.windows(6).any(|w| w == b"queue\0"));
        // NFTA_TARGET_INFO: 12 bytes, queue 7, one queue, no flags.
        let mut info = vec![12, 0, 3, 0];
        info.extend_from_slice(&7u16.to_ne_bytes());
        info.extend_from_slice(&1u16.to_ne_bytes());
        info.extend_from_slice(&[0, 0, 0, 0]);
        assert!(xt.windows(12).any(|w| w == info));
    }

    #[test]
    fn an_out_interface_is_matched_by_name_in_the_queue_rules_only() {
        let mut lo = vec![20, 0, NFTA_DATA_VALUE as u8, 0, b'l', b'o'];
        lo.extend_from_slice(&[0; 14]);
        let mut eth = vec![20, 0, NFTA_DATA_VALUE as u8, 0];
        eth.extend_from_slice(b"veth-x1");
        eth.extend_from_slice(&[0; 9]);
        let mut l = layout();
        assert!(!install_batch(&l, QueueExpr::Native, 1)
            .buf
            .windows(20)
            .any(|w| w == eth));
        l.hooks = vec![HookPoint::Output];
        l.oif = Some("veth-x1".into());
        let b = install_batch(&l, QueueExpr::Native, 1).buf;
        // `oifname != "lo"` stays, and `oifname "veth-x1"` joins it.
        assert_eq!(b.windows(20).filter(|w| *w == eth).count(), 1);
        assert_eq!(b.windows(20).filter(|w| *w == lo).count(), 1);
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(out_interface(&words(&["-o", "eth0"])), Some("eth0"));
        assert_eq!(out_interface(&words(&["-i", "eth0"])), None);
        assert_eq!(out_interface(&words(&["-o", "a-name-too-long-1"])), None);
        assert_eq!(out_interface(&words(&["-o", "eth0", "-p", "udp"])), None);
    }

    #[test]
    fn loopback_and_mark_rules_follow_the_layout() {
        let with = install_batch(&layout(), QueueExpr::Native, 1).buf;
        let mut lo = vec![20, 0, NFTA_DATA_VALUE as u8, 0, b'l', b'o'];
        lo.extend_from_slice(&[0; 14]);
        assert_eq!(with.windows(20).filter(|w| *w == lo).count(), 2);
        let mark = {
            let mut v = vec![8, 0, NFTA_DATA_VALUE as u8, 0];
            v.extend_from_slice(&0x646eu32.to_ne_bytes());
            v
        };
        assert_eq!(with.windows(8).filter(|w| *w == mark).count(), 2);

        let mut l = layout();
        l.loopback = true;
        l.pass_mark = None;
        let b = install_batch(&l, QueueExpr::Native, 1);
        assert!(!b.buf.windows(20).any(|w| w == lo));
        assert_eq!(
            b.steps.len(),
            1 + 1 + 2 * 2,
            "begin, table, 2 × (chain, rule)"
        );
    }

    #[test]
    fn answers_are_read_from_error_messages() {
        let mut d = Vec::new();
        for (seq, err) in [(5u32, 0i32), (6, -2)] {
            d.extend_from_slice(&36u32.to_ne_bytes());
            d.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
            d.extend_from_slice(&0u16.to_ne_bytes());
            d.extend_from_slice(&seq.to_ne_bytes());
            d.extend_from_slice(&0u32.to_ne_bytes());
            d.extend_from_slice(&err.to_ne_bytes());
            d.extend_from_slice(&[0; 16]);
        }
        assert_eq!(
            parse_answers(&d),
            [Answer { seq: 5, errno: 0 }, Answer { seq: 6, errno: 2 }]
        );
        // Truncated or nonsense input stops the walk without panicking.
        assert_eq!(parse_answers(&d[..40]), [Answer { seq: 5, errno: 0 }]);
        assert!(parse_answers(&[0xff; 15]).is_empty());
        let mut bad = d.clone();
        bad[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(parse_answers(&bad).is_empty());
    }

    #[test]
    fn attributes_parse_back() {
        let mut buf = Vec::new();
        let mut a = Attrs { buf: &mut buf };
        a.str(1, "ab").be32(7, 9).nested(4, |n| {
            n.be16(1, 3);
        });
        let attrs = parse_attrs(&buf);
        assert_eq!(attrs.len(), 3);
        assert_eq!(attrs[0], (1, &b"ab\0"[..]));
        assert_eq!(attrs[1], (7, &[0, 0, 0, 9][..]));
        assert_eq!(attrs[2].0, 4);
        assert_eq!(parse_attrs(attrs[2].1), [(1, &[0, 3][..])]);
        assert!(parse_attrs(&[9, 0, 1]).is_empty());
    }
}
