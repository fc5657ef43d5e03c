//! A shell's link, up ([`ShellLink`]): the command's namespace and the
//! emulator's, the veth between them and the world, the NAT, and the
//! emulator on its own thread ([`start`]) or another process's
//! ([`start_joined`]). `dummynet shell`, `demo` and the embedding façade
//! build theirs here.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use dummynet_dataplane::bridge::Bridge;
use dummynet_dataplane::dataplane::{PlaneOptions, Precision, Report};
use dummynet_dataplane::observer::ObserveOptions;
use dummynet_dataplane::Backend;
use dummynet_engine::Command;
use dummynet_io::netns::{Netns, NetnsError};

use super::napi::{move_receive_work, warning, Napi};
use super::nat::{Inside, Nat, NatError, WayOut};
use super::path::{
    build_path, build_path_in, follow_bursts, Gso, Path, PathError, APP_IF, PEER_IF, V4_PREFIX,
    V6_PREFIX,
};
use crate::join::{JoinError, JoinRequest, Session};
use crate::running::{Launch, Running};
use crate::start::StartError;

/// Why a shell's link could not be built, or not wholly taken down.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The namespace the link is built from could not be read.
    #[error("{0}")]
    Here(NetnsError),
    /// The command's namespace could not be made.
    #[error("creating a namespace: {0}")]
    Namespace(NetnsError),
    /// A joined link's emulator namespace could not be opened.
    #[error("the emulator's namespace {}: {source}", path.display())]
    EmulatorNamespace { path: PathBuf, source: NetnsError },
    /// The namespaces, veths, addresses and routes of the path.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The NAT and forwarding that let the command's traffic out.
    #[error("letting the command's traffic out (--nat off does without): {0}")]
    WayOut(NatError),
    /// The emulator could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The ends' segmentation could not be set as the configuration needs.
    #[error("setting the ends' segmentation: {0}")]
    Segmentation(PathError),
    /// The emulator said nothing of the ends' segmentation in time.
    #[error("the emulator did not say within 5 s whether super-packets may cross whole")]
    SegmentationUnsaid,
    /// The shared emulator of a joined link refused or went away.
    #[error(transparent)]
    Join(#[from] JoinError),
    /// A joined link's emulator had stopped before the link came down.
    #[error("the shared emulator had stopped")]
    JoinedGone,
    /// The NAT and forwarding could not be removed.
    #[error("removing {what}: {source}")]
    Undo { what: String, source: NatError },
    /// The NAT's namespace could not be entered to remove it.
    #[error("removing {what}: entering its namespace: {source}")]
    UndoNamespace { what: String, source: NetnsError },
}

/// Starts the emulator on a path whose far end is `far`, with the data
/// plane inside the path's middle namespace, and the per-packet observer
/// `observe` if given (its captures hold Ethernet frames).
#[allow(clippy::too_many_arguments)]
pub fn start_emulator(
    path: &Path,
    config: Vec<(usize, Command)>,
    seed: u64,
    socket: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    precision: Precision,
    gso: Gso,
    observe: Option<ObserveOptions>,
) -> Result<Running, ShellError> {
    let (tell, first) = match gso {
        Gso::Auto => {
            let (tell, first) = follow_bursts(path)?;
            (Some(tell), Some(first))
        }
        Gso::On | Gso::Off => (None, None),
    };
    let running = Launch::new(config, seed, stop)
        .netns(Some(&path.mid))
        .socket(socket)
        .options(PlaneOptions {
            precision,
            ..PlaneOptions::default()
        })
        .observe(observe)
        .spawn(|e| {
            let mut bridge = Bridge::open(APP_IF, PEER_IF, e)?;
            if let Some(tell) = tell {
                bridge = bridge.follow_bursts(tell);
            }
            Ok(vec![Box::new(bridge) as Box<dyn Backend>])
        })?;
    // The command starts only once its end segments as the configuration
    // needs.
    if let Some(first) = first {
        let failed = match first.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(ShellError::Segmentation(e)),
            Err(_) => Some(ShellError::SegmentationUnsaid),
        };
        if let Some(e) = failed {
            running.stop();
            return Err(e);
        }
    }
    Ok(running)
}

/// What [`start`] builds: the link's rules and how the emulator runs them.
pub struct ShellOptions {
    /// The emulator's rules (pipe 1 up, pipe 2 down: [`link_config`]).
    pub config: Vec<(usize, Command)>,
    pub seed: u64,
    pub nat: Nat,
    /// The emulator's control socket, if it should have one.
    pub socket: Option<PathBuf>,
    pub gso: Gso,
    pub precision: Precision,
    /// Who runs the ends' receiving stacks ([`super::napi`]).
    pub napi: Napi,
    /// The per-packet observer, if any (its captures hold Ethernet frames).
    pub observe: Option<ObserveOptions>,
    /// Our end of the veth in the namespace we are started in: `dn-PID`
    /// for the command line; unique per link in this process.
    pub veth: String,
    /// Whether the link carries IPv6 ([`build_path`]).
    pub ipv6: bool,
}

/// A shell's link, up: the command's namespace and the emulator's (both
/// anonymous), the veth end in the namespace it was started in, the NAT
/// and forwarding there ([`WayOut`]), and the emulator with its socket
/// ([`Running`]). `dummynet shell` runs its command in [`ShellLink::app`];
/// the library's [`crate::embed::Shell`] hands it to a program.
///
/// Dropped (or [`ShellLink::stop`]ped), it comes down in the order that
/// leaves nothing behind and nothing black-holed: the emulator first, then
/// the NAT and forwarding, then the veth end; the namespaces go with their
/// last handle (and whatever still runs inside them).
pub struct ShellLink {
    emulator: Option<Running>,
    /// A joined shell's link in another process's emulator ([`crate::join`]).
    joined: Option<Session>,
    way_out: Option<WayOut>,
    veth: Option<OurVeth>,
    path: Path,
    socket: Option<PathBuf>,
}

/// Shells are built one at a time in a process: [`free_subnet`] reads the
/// routes, then [`build_path`] adds the addresses that take the subnet,
/// and two links built at once would both pick the same one.
static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Builds a shell's link in the calling thread's namespace and starts its
/// emulator: see [`ShellLink`]. On an error, whatever was set up is undone.
pub fn start(options: ShellOptions) -> Result<ShellLink, ShellError> {
    let ShellOptions {
        config,
        seed,
        nat,
        socket,
        gso,
        precision,
        napi,
        observe,
        veth,
        ipv6,
    } = options;
    let here = Netns::current().map_err(ShellError::Here)?;
    let app = Netns::new_anonymous().map_err(ShellError::Namespace)?;
    let veth = OurVeth {
        name: veth,
        ns: here.clone(),
    };
    let mut path = {
        let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
        build_path(&app, &here, &veth.name, gso, ipv6)?
    };
    if napi == Napi::Threaded {
        // With --gso auto, super-packets cross whole until the emulator's
        // first word says otherwise (and TSO follows it from then on).
        say_unset(&move_receive_work(
            &mut path,
            [APP_IF, PEER_IF],
            gso != Gso::Off,
        ));
    }
    let way_out = open_way_out(nat, &veth, &path)?;
    let emulator = start_emulator(
        &path,
        config,
        seed,
        socket.clone(),
        Arc::new(AtomicBool::new(false)),
        precision,
        gso,
        observe,
    )?;
    Ok(ShellLink {
        emulator: Some(emulator),
        joined: None,
        way_out,
        veth: Some(veth),
        path,
        socket,
    })
}

/// Builds a shell's link in the calling thread's namespace through the
/// emulator behind `socket` ([`crate::join`]): the daemon offers a link
/// number and its namespace, the path is built with its ends there, and
/// the daemon attaches them. On an error, whatever was set up is undone
/// (the daemon removes its side when the connection closes).
pub fn start_joined(
    socket: &std::path::Path,
    request: JoinRequest,
    nat: Nat,
    gso: Gso,
    napi: Napi,
    veth: String,
) -> Result<ShellLink, ShellError> {
    let mut session = Session::request(socket, request)?;
    let offer = session.offer.clone();
    let mid = Netns::open(&offer.netns).map_err(|source| ShellError::EmulatorNamespace {
        path: offer.netns.clone(),
        source,
    })?;
    let here = Netns::current().map_err(ShellError::Here)?;
    let app = Netns::new_anonymous().map_err(ShellError::Namespace)?;
    let veth = OurVeth {
        name: veth,
        ns: here.clone(),
    };
    // Segments are split unless asked otherwise: nobody follows the
    // configuration for this link's ends.
    let gso = if gso == Gso::On { Gso::On } else { Gso::Off };
    let mut path = {
        let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
        build_path_in(
            mid,
            [offer.app_if.as_str(), offer.peer_if.as_str()],
            &app,
            &here,
            &veth.name,
            gso,
            true,
        )?
    };
    if napi == Napi::Threaded {
        say_unset(&move_receive_work(
            &mut path,
            [offer.app_if.as_str(), offer.peer_if.as_str()],
            gso == Gso::On,
        ));
    }
    let way_out = open_way_out(nat, &veth, &path)?;
    let said = session.attach()?;
    say!("dummynet shell: {}", said.trim_end());
    Ok(ShellLink {
        emulator: None,
        joined: Some(session),
        way_out,
        veth: Some(veth),
        path,
        socket: Some(socket.to_path_buf()),
    })
}

/// The NAT and forwarding (`nat`) for the path's subnets through our veth end.
fn open_way_out(nat: Nat, veth: &OurVeth, path: &Path) -> Result<Option<WayOut>, ShellError> {
    WayOut::open(
        nat,
        &Inside {
            far_if: &veth.name,
            v4: (path.subnet, V4_PREFIX),
            v6: path.v6.map(|v6| (v6.subnet, V6_PREFIX)),
        },
    )
    .map_err(ShellError::WayOut)
}

impl ShellLink {
    /// True once a joined link's emulator has stopped (the link went with
    /// it); false for a link with its own emulator.
    pub fn emulator_gone(&self) -> bool {
        self.joined.as_ref().is_some_and(|s| s.daemon_gone())
    }

    /// The command's namespace.
    pub fn app(&self) -> &Netns {
        &self.path.near
    }

    /// The link's namespaces and addresses.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Our end of the veth, in the namespace the link was started in.
    pub fn veth(&self) -> &str {
        self.veth.as_ref().map_or("", |v| v.name.as_str())
    }

    /// The emulator's control socket, if it has one.
    pub fn socket(&self) -> Option<&std::path::Path> {
        self.socket.as_deref()
    }

    /// The emulator (`None` only while it is being stopped).
    pub fn emulator(&self) -> Option<&Running> {
        self.emulator.as_ref()
    }

    /// What the NAT's setup has to say (IPv6 left local, and why).
    pub fn notes(&self) -> &[String] {
        self.way_out.as_ref().map_or(&[], |w| w.notes.as_slice())
    }

    /// The emulator, to attach a front-end to (`None` for a joined link,
    /// or once stopped).
    pub fn emulator_mut(&mut self) -> Option<&mut Running> {
        self.emulator.as_mut()
    }

    /// The variables a command inside gets: `DUMMYNET_PEER` (the far
    /// end's address), `DUMMYNET_ADDR` (its own), the IPv6 ones if the
    /// link has IPv6, and `DUMMYNET_SOCKET` if there is a socket.
    pub fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let mut env = vec![
            ("DUMMYNET_PEER", self.path.far_addr.to_string().into()),
            ("DUMMYNET_ADDR", self.path.near_addr.to_string().into()),
        ];
        if let Some(socket) = &self.socket {
            env.push(("DUMMYNET_SOCKET", socket.clone().into_os_string()));
        }
        if let Some(v6) = &self.path.v6 {
            env.push(("DUMMYNET_PEER6", v6.far_addr.to_string().into()));
            env.push(("DUMMYNET_ADDR6", v6.near_addr.to_string().into()));
        }
        env
    }

    /// Takes the link down (see [`ShellLink`]) and returns the emulator's
    /// final report, and what could not be undone, if anything.
    pub fn stop(mut self) -> (Report, Result<(), ShellError>) {
        self.finish()
    }

    fn finish(&mut self) -> (Report, Result<(), ShellError>) {
        // First: nothing goes through the link once it stops intercepting.
        let report = self.emulator.take().map(Running::stop).unwrap_or_default();
        // A joined link: the daemon takes its ports, pipes and rules out,
        // and deletes its ends, ours with them.
        let left = match self.joined.take() {
            Some(s) if s.daemon_gone() => Err(ShellError::JoinedGone),
            Some(s) => s.detach().map(drop).map_err(ShellError::from),
            None => Ok(()),
        };
        // The NAT's programs run in the namespace it was set up in, from
        // whichever thread stops the link.
        let undone = match self.way_out.take() {
            Some(w) => {
                let what = w.describe();
                match self.path.far.run(move || w.close()) {
                    Ok(closed) => closed.map_err(|source| ShellError::Undo { what, source }),
                    Err(source) => Err(ShellError::UndoNamespace { what, source }),
                }
            }
            None => Ok(()),
        };
        drop(self.veth.take());
        (report, left.and(undone))
    }
}

impl Drop for ShellLink {
    fn drop(&mut self) {
        if self.emulator.is_some()
            || self.joined.is_some()
            || self.way_out.is_some()
            || self.veth.is_some()
        {
            if let (_, Err(e)) = self.finish() {
                say!("dummynet shell: {e}");
            }
        }
    }
}

/// Says once what [`move_receive_work`] could not set, if anything.
fn say_unset(failed: &[String]) {
    if let Some(line) = warning(failed) {
        say!("{line}");
    }
}

/// Our end of the veth in the namespace we were started in. The kernel
/// removes it with the shell's namespaces, a moment after they go; this
/// removes it at once, so that the caller sees a clean state when we
/// return, on success or on error. Removed in that namespace, whichever
/// thread drops it.
struct OurVeth {
    name: String,
    ns: Netns,
}

impl Drop for OurVeth {
    fn drop(&mut self) {
        if let Ok(mut rtnl) = self.ns.rtnl() {
            let _ = rtnl.delete_link(&self.name);
        }
    }
}
