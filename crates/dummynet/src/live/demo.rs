//! `dummynet demo`: the emulator between two fresh namespaces with a preset,
//! measured by its own probes, configured vs measured side by side.
//!
//! Nothing outside the binary is used (no ping, no iperf3, no `ip`): the
//! namespaces are anonymous, so they vanish with the process whatever
//! happens, and the measurements come from [`dummynet_tools::probe`].

use std::net::{SocketAddr, SocketAddrV4};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dummynet_io::netns::Netns;

use super::args::PrecisionArg;
use super::dataplane::Report;
use super::observer::ObserveOptions;
use super::presets::{self, Preset};
use super::shell::{build_path, shell_config, start_emulator, Gso};
use dummynet_tools::probe::{self, BulkServer, EchoServer};

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// The link to emulate (`dummynet presets` lists them).
    #[arg(long, default_value = "lte")]
    pub preset: String,
    /// Seconds of bulk transfer in each direction (default: 40 round trips,
    /// 4 to 20 s, enough for TCP to settle on the preset's path).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// RTT probes to send.
    #[arg(long, default_value_t = 20)]
    pub probes: u32,
    /// How exactly departures leave: `timer` (default) or `max` (see
    /// `dummynet run --help`).
    #[arg(long, value_enum, default_value_t = PrecisionArg::Timer)]
    pub precision: PrecisionArg,
    /// Write one JSON line per packet event of the demo's traffic here
    /// (the schema of `sim --log` and `run --log`).
    #[arg(long, value_name = "FILE.jsonl")]
    pub log: Option<std::path::PathBuf>,
    /// Draw the downlink's throughput (against its capacity), per-packet
    /// delay, queue and drops over the demo here, as `dummynet plot` does
    /// (.svg, or .png with a system font); --plot-pipe 1 for the uplink.
    #[arg(long, value_name = "OUT.svg|OUT.png")]
    pub plot: Option<std::path::PathBuf>,
    /// The pipe --plot draws: 2, the downlink (default), or 1, the uplink.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=2))]
    pub plot_pipe: u32,
}

const ECHO_PORT: u16 = 7;
const BULK_PORT: u16 = 5001;

pub fn run(args: DemoArgs) -> ExitCode {
    match run_inner(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dummynet demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn mbit(bps: f64) -> String {
    format!("{:.2} Mbit/s", bps / 1e6)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// The best TCP goodput a link of `bw` bit/s allows: the link carries IP
/// packets of 1500 bytes, of which 1448 are payload (20 IP + 20 TCP + 12
/// bytes of timestamps).
fn tcp_ceiling(bw: u64) -> f64 {
    bw as f64 * 1448.0 / 1500.0
}

fn run_inner(args: &DemoArgs) -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("the demo creates network namespaces: run it as root".into());
    }
    if args.seconds.is_some_and(|s| s == 0 || s > 60) {
        return Err("--seconds must be within 1..60".into());
    }
    let preset: &Preset = presets::lookup(&args.preset).ok_or_else(|| {
        format!(
            "unknown preset `{}`; known: {}",
            args.preset,
            presets::names().join(", ")
        )
    })?;
    let started = Instant::now();
    println!(
        "dummynet demo: {} link between two new network namespaces",
        preset.title
    );
    let near = Netns::new_anonymous().map_err(|e| format!("creating a namespace: {e}"))?;
    let far = Netns::new_anonymous().map_err(|e| format!("creating a namespace: {e}"))?;
    let (up, down) = preset.options_for_use().map_err(|e| e.to_string())?;
    let config = shell_config(&up, &down).map_err(|e| e.to_string())?;
    let plot_config = config.clone();
    let path = build_path(&near, &far, "srv0", Gso::Auto, true).map_err(|e| e.to_string())?;
    println!("  pipe 1 (up)   config {up}\n  pipe 2 (down) config {down}");
    if let Some(out) = &args.plot {
        crate::plot::check_name(out).map_err(|e| e.to_string())?;
    }
    // --plot reads the events back from --log's file, or from one of its
    // own, removed when the demo ends.
    let scratch = match (&args.log, &args.plot) {
        (None, Some(_)) => Some(ScratchLog::new()?),
        _ => None,
    };
    let log = args.log.clone().or(scratch.as_ref().map(|s| s.0.clone()));
    let observe = log.clone().map(|log| ObserveOptions {
        log: Some(log),
        ..ObserveOptions::default()
    });
    let emulator = start_emulator(
        &path,
        config,
        1,
        None,
        Arc::new(AtomicBool::new(false)),
        args.precision.into(),
        Gso::Auto,
        observe,
    )
    .map_err(|e| e.to_string())?;

    let echo_at = SocketAddr::V4(SocketAddrV4::new(path.far_addr, ECHO_PORT));
    let bulk_at = SocketAddr::V4(SocketAddrV4::new(path.far_addr, BULK_PORT));
    // Servers are started from a thread inside the far namespace; their
    // own threads inherit it.
    let (echo, bulk) = far
        .run(move || -> std::io::Result<(EchoServer, BulkServer)> {
            Ok((EchoServer::start(echo_at)?, BulkServer::start(bulk_at)?))
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("starting the probe servers: {e}"))?;

    println!(
        "  probes: UDP echo on {}, TCP bulk on {} (far end), client at {} (near end)",
        echo.local_addr(),
        bulk.local_addr(),
        path.near_addr
    );
    let rtt_expected = Duration::from_millis(preset.rtt_ms());
    let probes = args.probes.max(1);
    let rtt = near
        .run(move || {
            // The first packets of a new path wait for ARP; measure after.
            probe::wait_for_echo(echo_at, rtt_expected * 4 + Duration::from_secs(3))?;
            probe::rtt_probe(
                echo_at,
                probes,
                Duration::from_millis(50),
                rtt_expected * 2 + Duration::from_secs(1),
            )
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("RTT probe: {e}"))?;
    let secs = match args.seconds {
        Some(s) => Duration::from_secs(s),
        None => probe::bulk_duration_for(rtt_expected).min(Duration::from_secs(20)),
    };
    let needed = preset.down.bw.max(preset.up.bw) / 8 * preset.rtt_ms() / 1000;
    if let Ok(limits) = probe::TcpBufferLimits::read() {
        if limits.max_bdp() < needed {
            println!(
                "  note: this host's TCP buffers (net.ipv4.tcp_rmem/tcp_wmem) allow {} KB in flight, \
                 less than this path's {} KB: TCP will not fill the link",
                limits.max_bdp() / 1000,
                needed / 1000
            );
        }
    }
    println!(
        "  measuring: {probes} RTT probes, then {:.0} s of TCP each way...",
        secs.as_secs_f64()
    );
    let up = near
        .run(move || probe::bulk_transfer(bulk_at, probe::Direction::Upload, secs))
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("upload: {e}"))?;
    let down = near
        .run(move || probe::bulk_transfer(bulk_at, probe::Direction::Download, secs))
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("download: {e}"))?;
    echo.stop();
    bulk.stop();
    let report = emulator.stop();
    drop(path);
    let plotted = demo_plot(args, preset, log.as_deref(), &plot_config)?;
    drop(scratch);

    print_results(preset, &rtt, [&up, &down], &report, plotted, started);
    Ok(())
}

/// `--plot`: the demo's pipe drawn from its event log; the line that
/// says where it went.
fn demo_plot(
    args: &DemoArgs,
    preset: &Preset,
    log: Option<&std::path::Path>,
    config: &[(usize, dummynet_engine::Command)],
) -> Result<Option<String>, String> {
    Ok(match (&args.plot, log) {
        (Some(out), Some(log)) => {
            let options = crate::plot::PlotOptions {
                pipe: Some(args.plot_pipe),
                what: vec![
                    crate::plot::Panel::Throughput,
                    crate::plot::Panel::Delay,
                    crate::plot::Panel::Queue,
                    crate::plot::Panel::Drops,
                ],
                capacity: None,
                window: 100 * dummynet_engine::time::NS_PER_MS,
                title: Some(format!(
                    "dummynet demo: {}, {}",
                    preset.title,
                    if args.plot_pipe == 1 {
                        "uplink (pipe 1)"
                    } else {
                        "downlink (pipe 2)"
                    }
                )),
            };
            let summary = crate::plot::plot_log(
                log,
                Some((std::path::Path::new("the demo's configuration"), config)),
                &options,
                out,
            )
            .map_err(|e| e.to_string())?;
            Some(format!("plot: {} ({summary})", out.display()))
        }
        _ => None,
    })
}

/// The table of what was configured and what was measured, and the
/// emulator's report.
fn print_results(
    preset: &Preset,
    rtt: &probe::RttReport,
    [up, down]: [&probe::BulkReport; 2],
    report: &Report,
    plotted: Option<String>,
    started: Instant,
) {
    println!();
    println!("{:<10} {:>22}   {:<}", "", "configured", "measured");
    println!(
        "{:<10} {:>22}   {} (min {}, p99 {}, max {}; {} of {} lost)",
        "RTT",
        format!("{} ms", preset.rtt_ms()),
        ms(rtt.avg),
        ms(rtt.min),
        ms(rtt.p99),
        ms(rtt.max),
        rtt.lost,
        rtt.sent
    );
    for (name, d, r) in [("uplink", preset.up, up), ("downlink", preset.down, down)] {
        println!(
            "{:<10} {:>22}   {} TCP goodput ({} over the whole run; at most {} fits)",
            name,
            presets::format_bw(d.bw),
            mbit(r.steady_bps),
            mbit(r.goodput_bps),
            mbit(tcp_ceiling(d.bw))
        );
    }
    println!();
    print!("emulator: {report}");
    println!("cost: {}", report.cost());
    if let Some(line) = plotted {
        println!("{line}");
    }
    println!(
        "done in {:.1} s; the namespaces and links are gone with the demo.",
        started.elapsed().as_secs_f64()
    );
}

/// A log file of the demo's own, for --plot without --log: created only
/// by us (O_EXCL, mode 0600, in the temporary directory) and removed when
/// the demo ends.
struct ScratchLog(std::path::PathBuf);

impl ScratchLog {
    fn new() -> Result<ScratchLog, String> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = std::env::temp_dir().join(format!("dummynet-demo-{}.jsonl", std::process::id()));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("--plot: cannot create {}: {e}", path.display()))?;
        Ok(ScratchLog(path))
    }
}

impl Drop for ScratchLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
