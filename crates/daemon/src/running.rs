//! A data plane on threads of its own ([`Launch`]): the engine made from a
//! configuration, its backends opened in the right namespace, the control
//! socket and the observer, and the front-ends attached to it; [`Running`]
//! stops it all in order and returns the data plane's report. `run`,
//! `shell`, `demo` and the embedding façade start theirs through it.

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use dummynet_dataplane::bridge::Bridge;
use dummynet_dataplane::dataplane::{DataPlane, Inbox, PlaneOptions, Report};
use dummynet_dataplane::observer::{ObserveOptions, Observer, ObserverThread, Tap};
use dummynet_dataplane::{learn_host, sharded, Backend, Carrier};
use dummynet_engine::config::Setting;
use dummynet_engine::{Command, Engine};
use dummynet_io::netns::Netns;

use crate::control::{self, ControlOptions, ControlServer};
use crate::start::StartError;

/// A front-end serving a running data plane (the HTTP API, say): it holds
/// its threads and sockets, and stops when dropped, before the data plane's
/// control socket goes.
pub trait FrontEnd: Send {}

/// A data plane running on its own thread.
pub struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Report>>,
    control: Option<ControlServer>,
    /// The way to the data plane, for an HTTP server started later.
    link: Option<control::PlaneLink>,
    /// What serves it besides the control socket ([`Running::attach`]).
    front_ends: Vec<Box<dyn FrontEnd>>,
    /// The per-packet observer, when asked for: its handle (subscribe,
    /// counters) and its thread, joined after the data plane's.
    observer: Option<Observer>,
    observer_thread: Option<ObserverThread>,
}

impl Running {
    /// Stops the data plane (it stops intercepting, releases what it holds)
    /// and returns its final report.
    pub fn stop(mut self) -> Report {
        self.finish()
    }

    fn finish(&mut self) -> Report {
        self.stop.store(true, Ordering::Relaxed);
        let report = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        self.front_ends.clear();
        self.control.take();
        // The data plane is gone, and its tap with it: the observer writes
        // what is left and closes its files.
        if let Some(t) = self.observer_thread.take() {
            t.join();
        }
        report
    }

    /// The per-packet observer ([`dummynet_dataplane::observer`]): subscribe to the
    /// daemon's packet events, read its counters. `None` unless the daemon
    /// was started with one.
    pub fn observer(&self) -> Option<&Observer> {
        self.observer.as_ref()
    }

    /// Keeps `front` serving this data plane until it stops: dropped once
    /// the data plane's thread has ended, before the control socket goes.
    pub fn attach(&mut self, front: Box<dyn FrontEnd>) {
        self.front_ends.push(front);
    }

    /// True once the data-plane thread has ended (it only ends on its own
    /// if it failed).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    pub fn socket(&self) -> Option<&std::path::Path> {
        self.control.as_ref().map(|c| c.path())
    }

    /// The way to the data plane, for requests made in this process (the
    /// library's [`crate::embed`]): what the control socket and the HTTP
    /// API use, without either.
    pub fn plane_link(&self) -> Option<&control::PlaneLink> {
        self.link.as_ref()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.finish();
        }
    }
}

/// Opens the leader's backends of a sharded data plane.
pub type OpenLeader =
    Box<dyn FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, StartError> + Send>;

/// Opens worker K's backends (K from 1) of a sharded data plane
/// (`run --workers N`), on the leader's thread, after the leader's own.
pub type OpenWorker = Arc<
    dyn Fn(&mut Engine<Carrier>, usize) -> Result<Vec<Box<dyn Backend>>, StartError> + Send + Sync,
>;

/// How a data plane starts, all but how its backends open:
/// `Launch::new(config, seed, stop)`, what differs from the defaults, then
/// [`Launch::spawn`].
pub struct Launch<'a> {
    ns: Option<&'a Netns>,
    config: Vec<(usize, Command)>,
    seed: u64,
    socket: Option<(PathBuf, ControlOptions)>,
    stop: Arc<AtomicBool>,
    options: PlaneOptions,
    observe: Option<ObserveOptions>,
    workers: Option<(usize, OpenWorker)>,
}

impl<'a> Launch<'a> {
    /// `config` applied under `seed`; setting `stop` stops it. No namespace,
    /// no control socket, no observer, one thread, the default options.
    pub fn new(config: Vec<(usize, Command)>, seed: u64, stop: Arc<AtomicBool>) -> Self {
        Launch {
            ns: None,
            config,
            seed,
            socket: None,
            stop,
            options: PlaneOptions::default(),
            observe: None,
            workers: None,
        }
    }

    /// Runs inside `ns` (interfaces are looked up there).
    pub fn netns(self, ns: Option<&'a Netns>) -> Self {
        Launch { ns, ..self }
    }

    /// A control socket at `path`, if given, with the default options.
    pub fn socket(self, path: Option<PathBuf>) -> Self {
        let socket = path.map(|p| (p, ControlOptions::default()));
        Launch { socket, ..self }
    }

    /// A control socket at `path` with a say in who may use it and what a
    /// client may cost.
    pub fn control(self, path: PathBuf, control: ControlOptions) -> Self {
        Launch {
            socket: Some((path, control)),
            ..self
        }
    }

    pub fn options(self, options: PlaneOptions) -> Self {
        Launch { options, ..self }
    }

    /// The per-packet observer, if given.
    pub fn observe(self, observe: Option<ObserveOptions>) -> Self {
        Launch { observe, ..self }
    }

    /// On `workers.0` data-plane threads when given (`run --workers N`,
    /// [`sharded`]), the others' backends opened by `workers.1`.
    pub fn workers(self, workers: Option<(usize, OpenWorker)>) -> Self {
        Launch { workers, ..self }
    }

    /// Opens the backends with `open` on a new data-plane thread, applies
    /// the configuration and starts the control socket. Returns once the
    /// backends are open, or with the error that prevented it.
    pub fn spawn<F>(self, open: F) -> Result<Running, StartError>
    where
        F: FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, StartError>
            + Send
            + 'static,
    {
        start(self, open)
    }
}

fn start<F>(launch: Launch<'_>, open: F) -> Result<Running, StartError>
where
    F: FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, StartError> + Send + 'static,
{
    let Launch {
        ns,
        config,
        seed,
        socket,
        stop,
        options,
        observe,
        workers,
    } = launch;
    let replicas = config.clone();
    // Every live mode bounds the packet bytes its pipes hold (shell and
    // demo too); `run --memory-limit` and a config's `sysctl` come later and
    // win.
    let mut config = config;
    if let Some(limit) = default_memory_limit() {
        config.insert(0, (0, Command::Set(Setting::HeldLimit(limit))));
    }
    let mut engine: Engine<Carrier> = dummynet_dataplane::lang::configure(&config, seed)
        .map_err(|(line, error)| StartError::Configuration { line, error })?;
    let (req_tx, req_rx) = mpsc::channel();
    let (wake_rx, wake_tx) = UnixStream::pair().map_err(|e| StartError::io("socketpair", e))?;
    wake_rx
        .set_nonblocking(true)
        .map_err(|e| StartError::io("socketpair", e))?;
    let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), StartError>>(1);
    // The files are created here, so that one that cannot be is an error
    // before anything starts.
    // One tap per worker, their records merged by time off the data plane.
    let n = workers.as_ref().map_or(1, |(n, _)| *n);
    let (observer, mut taps, observer_thread) = match &observe {
        Some(o) => {
            let (obs, taps, thread) = Observer::start_workers(o, n)?;
            (
                Some(obs),
                taps.into_iter().map(Some).collect(),
                Some(thread),
            )
        }
        None => (None, (0..n).map(|_| None).collect::<Vec<_>>(), None),
    };
    // Worker 0's (the leader's); the others' go to their threads.
    let tap = if taps.is_empty() {
        None
    } else {
        taps.remove(0)
    };
    let flag = stop.clone();
    let body = move || {
        // In the namespace the data plane runs in: its addresses are `me`,
        // its routes those `verrevpath` follows.
        learn_host(&mut engine);
        let backends = match open(&mut engine) {
            Ok(b) => b,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return Report::default();
            }
        };
        let inbox = Inbox {
            requests: req_rx,
            wake: wake_rx,
        };
        let leader = match workers {
            None => None,
            Some((n, open_worker)) => {
                let config = replicas_config(&replicas);
                match start_followers(n, &config, seed, options, open_worker, taps) {
                    Ok(leader) => leader,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Report::default();
                    }
                }
            }
        };
        // Ready (and the control socket up) once every worker has joined
        // its ports' fanout groups: a flow that began earlier would be
        // read by the leader alone at first, then by the worker the full
        // group hashes it to, its first packets' states left behind on
        // the leader (a `limit` place held twice, a `keep-state` made
        // twice).
        let _ = ready_tx.send(Ok(()));
        DataPlane::new(engine, backends, Some(inbox), flag)
            .with_options(options)
            .with_tap(tap)
            .with_worker(leader)
            .run()
    };
    let thread = match ns {
        Some(ns) => ns
            .spawn_thread("dummynet-dataplane", body)
            .map_err(StartError::namespace)?,
        None => std::thread::Builder::new()
            .name("dummynet-dataplane".into())
            .spawn(body)
            .map_err(|e| StartError::io("starting the data-plane thread", e))?,
    };
    // Non-blocking, as the control server's: a full buffer means a
    // wake-up is already pending.
    let link = wake_tx
        .try_clone()
        .and_then(|wake| wake.set_nonblocking(true).map(|()| wake))
        .ok()
        .map(|wake| control::PlaneLink {
            requests: req_tx.clone(),
            wake: Arc::new(wake),
        });
    let mut running = Running {
        stop,
        thread: Some(thread),
        control: None,
        link,
        front_ends: Vec::new(),
        observer,
        observer_thread,
    };
    match ready_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            running.finish();
            return Err(e);
        }
        Err(_) => {
            running.finish();
            return Err(StartError::PlaneEnded);
        }
    }
    if let Some((path, control)) = socket {
        match ControlServer::start(&path, req_tx, wake_tx, ns, control) {
            Ok(server) => running.control = Some(server),
            Err(e) => {
                running.finish();
                return Err(e.into());
            }
        }
    }
    Ok(running)
}

/// The configuration every replica starts from: what the leader's engine
/// was made with (the memory limit first, as there).
fn replicas_config(config: &[(usize, Command)]) -> Vec<(usize, Command)> {
    let mut config = config.to_vec();
    if let Some(limit) = default_memory_limit() {
        config.insert(0, (0, Command::Set(Setting::HeldLimit(limit))));
    }
    config
}

/// Starts workers 1..n of a sharded data plane, each with an engine made
/// from `config` and backends `open_worker` opens here (on the leader's
/// thread, in its namespace, which the workers' threads inherit); returns
/// the leader's part, which keeps them.
fn start_followers(
    n: usize,
    config: &[(usize, Command)],
    seed: u64,
    options: PlaneOptions,
    open_worker: OpenWorker,
    taps: Vec<Option<Tap>>,
) -> Result<Option<sharded::Worker>, StartError> {
    let mut parts = sharded::workers(n)?.into_iter();
    let mut taps = taps.into_iter();
    let Some(mut leader) = parts.next() else {
        return Ok(None);
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for part in parts {
        let k = part.index();
        // The engine is made on its worker's thread, in that thread's heap:
        // replicas made side by side shared cache lines of their per-packet
        // counters, and two workers spent more time passing those lines to
        // each other than classifying (`dummynet bench --workers`: 3 to 4
        // times the CPU a packet). One at a time, so that the ports join
        // their fanout groups in worker order.
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), StartError>>(1);
        let (config, open_worker, worker_stop) =
            (config.to_vec(), open_worker.clone(), stop.clone());
        let tap = taps.next().flatten();
        let body = move || {
            let made = dummynet_dataplane::lang::configure(&config, seed)
                .map_err(|(line, error)| StartError::Configuration { line, error })
                .and_then(|mut engine: Engine<Carrier>| {
                    learn_host(&mut engine);
                    let backends = open_worker(&mut engine, k)?;
                    Ok((engine, backends))
                });
            match made {
                Ok((engine, backends)) => {
                    let _ = ready_tx.send(Ok(()));
                    DataPlane::new(engine, backends, None, worker_stop)
                        .with_options(options)
                        .with_tap(tap)
                        .with_worker(Some(part))
                        .run()
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    Report::default()
                }
            }
        };
        let thread = std::thread::Builder::new()
            .name(format!("dummynet-worker-{k}"))
            .spawn(body)
            .map_err(|e| StartError::io(format!("starting data-plane worker {k}"), e))?;
        let ready = ready_rx.recv().unwrap_or(Err(StartError::WorkerEnded(k)));
        threads.push(thread);
        if let Err(e) = ready {
            // The workers started so far stop (none has a job to wait for).
            stop.store(true, Ordering::Relaxed);
            for t in threads {
                let _ = t.join();
            }
            return Err(StartError::Worker {
                index: k,
                source: Box::new(e),
            });
        }
    }
    leader.adopt(threads, stop);
    Ok(Some(leader))
}

/// `--bridge A B` on a sharded data plane: each worker's own bridge on
/// the two interfaces, their ports joined in one `PACKET_FANOUT` group per
/// interface (the leader's made it; `groups` passes its ids on).
pub fn open_sharded_bridge(
    a: String,
    b: String,
    exit_on_link_loss: bool,
) -> (OpenLeader, OpenWorker) {
    let groups: Arc<std::sync::Mutex<Option<[u16; 2]>>> = Arc::default();
    let open = move |e: &mut Engine<Carrier>,
                     groups: &std::sync::Mutex<Option<[u16; 2]>>|
          -> Result<Vec<Box<dyn Backend>>, StartError> {
        let bridge = Bridge::open(&a, &b, e)?.exit_on_link_loss(exit_on_link_loss);
        let mut g = groups.lock().unwrap_or_else(|e| e.into_inner());
        let ids = bridge.join_fanout(*g)?;
        *g = Some(ids);
        Ok(vec![Box::new(bridge) as Box<dyn Backend>])
    };
    let open = Arc::new(open);
    let (first, rest) = (open.clone(), open);
    let g1 = groups.clone();
    (
        Box::new(move |e: &mut Engine<Carrier>| first(e, &g1)),
        Arc::new(move |e: &mut Engine<Carrier>, _k: usize| rest(e, &groups)),
    )
}

/// `--bridge A B`'s backend, opened on the data-plane thread by [`Launch::spawn`]
/// (where the interfaces are looked up: in its namespace).
pub fn open_bridge(
    a: String,
    b: String,
    exit_on_link_loss: bool,
) -> impl FnOnce(&mut Engine<Carrier>) -> Result<Vec<Box<dyn Backend>>, StartError> + Send + 'static
{
    move |e| {
        let bridge = Bridge::open(&a, &b, e)?.exit_on_link_loss(exit_on_link_loss);
        Ok(vec![Box::new(bridge) as Box<dyn Backend>])
    }
}

/// A quarter of `MemTotal` in /proc/meminfo, if it can be read: the
/// default `held_limit` of every live mode.
pub fn default_memory_limit() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024) / 4)
}
