//! A shell's link as rules: pipe 1 up, pipe 2 down, from `--up`/`--down`
//! or a preset merged with them.

use std::fmt::Write as _;

use dummynet_engine::config::{Fields, PipeConfig};
use dummynet_engine::{modify, Command};

use super::path::{APP_IF, PEER_IF};
use crate::presets;

/// The emulator's rules for a shell: pipe 1 up, pipe 2 down, everything
/// else (the `out` pass, ARP is not IP) allowed. A direction given a
/// scheduler type (`bw 10Mbit/s type fq_codel`) is shaped so that the type
/// applies ([`feed_typed_schedulers`]).
pub fn shell_config(up: &str, down: &str) -> Result<Vec<(usize, Command)>, LinkError> {
    let mut config = pipes_and_rules(up, down)?;
    feed_typed_schedulers(&mut config);
    Ok(config)
}

/// A pipe's `type T` sets its scheduler N, which packets sent to `pipe N`
/// never meet: they take the pipe's own FIFO queue, as in FreeBSD. For a
/// pipe given a type, this adds queue N of scheduler N (with the pipe's
/// queue options: size, loss, AQM...) and sends the rules' packets there
/// (`queue N` for `pipe N`), which is what `--up "... type fq_codel"` asks.
pub fn feed_typed_schedulers(config: &mut Vec<(usize, Command)>) {
    let typed: Vec<(usize, u32, dummynet_engine::config::FlowsetConfig)> = config
        .iter()
        .enumerate()
        .filter_map(|(i, (_, c))| match c {
            Command::ConfigPipe(n, cfg) if cfg.sched.is_some() => {
                Some((i, *n, cfg.flowset.clone()))
            }
            _ => None,
        })
        .collect();
    for (i, n, flowset) in typed.into_iter().rev() {
        let line = config[i].0;
        let queue = dummynet_engine::config::QueueConfig {
            sched: Some(n),
            flowset,
        };
        config.insert(i + 1, (line, Command::ConfigQueue(n, queue)));
        for (_, c) in config.iter_mut() {
            if let Command::AddRule(spec) = c {
                if spec.action == dummynet_engine::config::Action::Pipe(n) {
                    spec.action = dummynet_engine::config::Action::Queue(n);
                }
            }
        }
    }
}

fn pipes_and_rules(up: &str, down: &str) -> Result<Vec<(usize, Command)>, LinkError> {
    let text = format!(
        "pipe 1 config {up}\n\
         pipe 2 config {down}\n\
         add 100 pipe 1 ip from any to any in recv {APP_IF}\n\
         add 200 pipe 2 ip from any to any in recv {PEER_IF}\n\
         add 65000 allow ip from any to any\n"
    );
    dummynet_dataplane::lang::commands(&text, None).map_err(|(line, e)| {
        let what = match line {
            1 => "--up",
            2 => "--down",
            _ => "the generated rules",
        };
        LinkError::Options { what, error: e }
    })
}

/// The emulator's rules for `--preset`, `--up` and `--down`: the preset's
/// pipe options (or `bw 0`, no limit, without one) with each of `--up` and
/// `--down` merged onto them option by option, as `pipe N modify` would:
/// `--preset lte --up "delay 50ms"` keeps lte's uplink bandwidth and queue
/// and replaces only its delay. Without a preset, `--up` and `--down` are
/// the whole configuration of their pipe.
pub fn link_config(
    preset: Option<&str>,
    up: Option<&str>,
    down: Option<&str>,
) -> Result<Vec<(usize, Command)>, LinkError> {
    let Some(name) = preset else {
        return shell_config(up.unwrap_or("bw 0"), down.unwrap_or("bw 0"));
    };
    let p = presets::lookup(name).ok_or_else(|| LinkError::UnknownPreset(name.to_string()))?;
    let (base_up, base_down) = p.options_for_use()?;
    let mut config = pipes_and_rules(&base_up, &base_down).map_err(|e| LinkError::InPreset {
        name: name.to_string(),
        error: Box::new(e),
    })?;
    for (number, flag, given) in [(1, "--up", up), (2, "--down", down)] {
        let Some(given) = given else { continue };
        let (change, fields) = parse_modify(number, given)
            .map_err(|error| LinkError::Options { what: flag, error })?;
        let pipe = config
            .iter_mut()
            .find_map(|(_, c)| match c {
                Command::ConfigPipe(n, cfg) if *n == number => Some(cfg),
                _ => None,
            })
            .ok_or_else(|| LinkError::NoPipe {
                preset: name.to_string(),
                number,
                flag,
            })?;
        *pipe = PipeConfig {
            link: modify::link(&pipe.link, &change.link, fields),
            flowset: modify::flowset(&pipe.flowset, &change.flowset, fields),
            sched: change.sched.or_else(|| pipe.sched.take()),
        };
    }
    feed_typed_schedulers(&mut config);
    Ok(config)
}

/// `OPTIONS` read as `pipe N modify OPTIONS`: the options given and the
/// groups they name.
fn parse_modify(number: u32, options: &str) -> Result<(PipeConfig, Fields), String> {
    let parsed =
        dummynet_dataplane::lang::commands(&format!("pipe {number} modify {options}\n"), None)
            .map_err(|(_, e)| e)?;
    match parsed.into_iter().next() {
        Some((_, Command::ModifyPipe(_, cfg, fields))) => Ok((cfg, fields)),
        _ => Err(format!("`{options}` is not a list of pipe options")),
    }
}

/// Why a shell's link could not be made of `--preset`, `--up` and
/// `--down`.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// `--up`'s or `--down`'s options (or the rules made with them) do not
    /// parse: the parser's words.
    #[error("{what}: {error}")]
    Options { what: &'static str, error: String },
    #[error("unknown preset `{0}`; known: {known}", known = presets::names().join(", "))]
    UnknownPreset(String),
    /// A preset's own options do not parse (a bug in the table).
    #[error("preset `{name}`: {error}")]
    InPreset { name: String, error: Box<LinkError> },
    #[error("preset `{preset}` has no pipe {number} to merge {flag} onto")]
    NoPipe {
        preset: String,
        number: u32,
        flag: &'static str,
    },
    /// The preset's traces could not be written for use.
    #[error(transparent)]
    Preset(#[from] presets::PresetError),
    /// A line the engine refused.
    #[error("the link configuration (line {line}): {error}")]
    Configuration { line: usize, error: String },
    /// A rule a joined link is given does not parse (a bug).
    #[error("the joined link's rule {line}: {error}")]
    JoinedRule { line: usize, error: String },
    /// A command a joined link cannot take (only its pipes and queues).
    #[error("a joined link cannot take {0:?}")]
    NotForAJoinedLink(Box<Command>),
}

/// What each direction of a shell's link is, for the start of a shell:
/// the configuration after any merge, checked by an engine as the
/// emulator will check it. One line per pipe (`dummynet shell: up (pipe
/// 1): 10 Mbit/s, 20 ms, queue 50 slots`); `verbose`: as `pipe show`
/// prints it (link and queue lines).
pub fn describe_links(
    config: &[(usize, Command)],
    seed: u64,
    verbose: bool,
) -> Result<String, LinkError> {
    let engine: dummynet_engine::Engine<dummynet_dataplane::Carrier> =
        dummynet_dataplane::lang::configure(config, seed)
            .map_err(|(line, error)| LinkError::Configuration { line, error })?;
    let snapshot = engine.snapshot();
    let mut out = String::new();
    for (number, what) in [(1, "up (pipe 1)"), (2, "down (pipe 2)")] {
        if !verbose {
            let views = crate::views::pipes(&snapshot, &[number]);
            if let Some(pipe) = views.pipes.first() {
                let _ = writeln!(out, "dummynet shell: {what}: {}", one_line(pipe));
            }
            continue;
        }
        let shown = dummynet_lang::format_pipes(&snapshot, &[number]);
        let _ = writeln!(out, "dummynet shell: {what}:");
        // The scheduler lines say nothing about a pipe's own FIFO.
        for line in shown.lines().take_while(|l| !l.starts_with(" sched")) {
            let _ = writeln!(out, "    {line}");
        }
    }
    Ok(out)
}

/// A pipe in a few words: its rate, delay, queue and what else it does.
fn one_line(pipe: &crate::views::PipeJson) -> String {
    let link = &pipe.link;
    let mut parts = vec![match (&link.profile, link.trace, link.bandwidth_bps) {
        (Some(p), _, _) => format!("profile {p}"),
        (None, true, _) => "trace-driven".to_string(),
        (None, false, 0) => "unlimited".to_string(),
        (None, false, bw) => presets::format_bw(bw),
    }];
    parts.push(format!("{} ms", link.delay_ns as f64 / 1e6));
    parts.extend(link.impairments.iter().cloned());
    if let Some(q) = &pipe.queue {
        match (q.limit_packets, q.limit_bytes) {
            (Some(n), _) => parts.push(format!("queue {n} slots")),
            (None, Some(b)) => parts.push(format!("queue {b} bytes")),
            (None, None) => {}
        }
        if q.plr > 0.0 {
            parts.push(format!("plr {}", q.plr));
        }
        if q.aqm != "droptail" {
            parts.push(q.aqm.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        parts.extend(q.impairments.iter().cloned());
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn super_packets_cross_whole_only_where_no_pipe_counts_packets() {
        let engine =
            |c: &[(usize, Command)]| -> dummynet_engine::Engine<dummynet_dataplane::Carrier> {
                dummynet_dataplane::lang::configure(c, 1).unwrap()
            };
        let whole = |up: &str, down: &str| engine(&shell_config(up, down).unwrap()).only_delays();
        assert!(whole("bw 0", "bw 0"));
        assert!(whole("delay 20ms", "delay 20ms queue 10"));
        for limited in [
            "bw 10Mbit/s",
            "delay 10ms plr 0.01",
            "delay 10ms jitter 1ms",
            "delay 10ms loss 1%",
            "delay 10ms codel",
            "trace examples/traces/constant-12mbit.trace",
        ] {
            if let Ok(c) = shell_config(limited, "bw 0") {
                assert!(!engine(&c).only_delays(), "{limited}");
            }
        }
        assert!(!whole("delay 10ms", "bw 1Mbit/s"));
        // A schedule may bring a limit in; once it has, the state says so.
        let mut c = shell_config("bw 0", "bw 0").unwrap();
        c.extend(
            dummynet_dataplane::lang::commands("at 5s pipe 1 modify bw 1Mbit/s\n", None).unwrap(),
        );
        let mut e = engine(&c);
        assert!(!e.only_delays());
        let _ = e.poll(6_000_000_000);
        assert_eq!(e.schedule_stats().applied, 1);
        assert!(!e.only_delays());
        // A change back to delay only, by hand: whole again, and the
        // configuration epoch moved both times.
        let epoch = e.config_epoch();
        let argv: Vec<String> = "pipe 1 modify bw 0".split(' ').map(String::from).collect();
        let reply = crate::control::run_command(&mut e, 7_000_000_000, &argv, None);
        assert_eq!(reply.status, 0, "{}", reply.stderr);
        assert!(e.only_delays());
        assert!(e.config_epoch() > epoch);
    }

    /// The pipe config a shell's commands give pipe `n`.
    fn pipe(config: &[(usize, Command)], n: u32) -> &PipeConfig {
        config
            .iter()
            .find_map(|(_, c)| match c {
                Command::ConfigPipe(m, cfg) if *m == n => Some(cfg),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no pipe {n} in {config:?}"))
    }

    #[test]
    fn an_override_is_merged_onto_the_preset_option_by_option() {
        let lte = presets::lookup("lte").unwrap();
        let (lte_up, lte_down) = lte.options_for_use().unwrap();
        let preset = shell_config(&lte_up, &lte_down).unwrap();
        let merged = link_config(Some("lte"), Some("delay 50ms"), None).unwrap();
        let (was, now) = (pipe(&preset, 1), pipe(&merged, 1));
        // The preset's bandwidth and queue, the new delay.
        assert_eq!(now.link.bw, lte.up.bw);
        assert_eq!(now.link.bw, 10_000_000);
        assert_eq!(now.link.delay, 50_000_000);
        assert_ne!(was.link.delay, now.link.delay);
        assert_eq!(now.flowset.limit, was.flowset.limit);
        // The other direction is the preset's, untouched.
        assert_eq!(pipe(&merged, 2), pipe(&preset, 2));
        // Options the preset lacks are added; the rest stays.
        let lossy = link_config(Some("lte"), None, Some("plr 0.01")).unwrap();
        let down = pipe(&lossy, 2);
        assert!(!down.flowset.plr.is_zero());
        assert_eq!(down.link.bw, lte.down.bw);
        assert_eq!(down.link.delay, pipe(&preset, 2).link.delay);
        // What the shell prints at start is that merged configuration.
        let shown = describe_links(&merged, 1, true).unwrap();
        println!("{shown}");
        assert!(shown.contains("10.000 Mbit/s   50 ms"), "{shown}");
        // By default, one line per pipe, saying the same.
        let short = describe_links(&merged, 1, false).unwrap();
        println!("{short}");
        assert_eq!(short.lines().count(), 2, "{short}");
        assert!(
            short.starts_with("dummynet shell: up (pipe 1): 10Mbit/s, 50 ms, queue "),
            "{short}"
        );
        // Without a preset, --up is the whole configuration of pipe 1.
        let bare = link_config(None, Some("delay 50ms"), None).unwrap();
        assert_eq!(pipe(&bare, 1).link.bw, 0);
    }

    #[test]
    fn a_bad_override_or_preset_is_named() {
        let e = link_config(Some("lte"), Some("dealy 50ms"), None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--up:"), "{e}");
        let e = link_config(Some("lte"), None, Some("bw fast"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--down:"), "{e}");
        let e = link_config(Some("no-such-link"), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown preset `no-such-link`") && e.contains("lte"),
            "{e}"
        );
    }

    /// `--up "bw 1Mbit/s type fq_codel"` really runs FQ-CoDel: the shell
    /// sends the direction to a queue of scheduler 1 (not to the pipe's own
    /// FIFO queue), so on the virtual clock a lone packet of a new flow
    /// leaves right away behind a bulk flow's backlog, which a FIFO would
    /// make it wait behind (or drop it, full).
    #[test]
    fn a_scheduler_type_in_up_is_fed_and_isolates_flows() {
        use dummynet_engine::{FlowKey, PacketInfo};
        let lone_wait = |up: &str| -> Option<u64> {
            let config = link_config(None, Some(up), None).unwrap();
            let mut e: dummynet_engine::Engine<()> =
                dummynet_dataplane::lang::configure_for(&config, 1).unwrap();
            let app = e.iface(APP_IF);
            let packet = |sport: u16| PacketInfo {
                len: 1500,
                key: FlowKey::v4(
                    std::net::Ipv4Addr::new(10, 0, 0, 1),
                    std::net::Ipv4Addr::new(10, 0, 0, 2),
                    17,
                    sport,
                    9,
                ),
                dir: dummynet_engine::Direction::In,
                recv_if: Some(app),
                xmit_if: None,
            };
            // 40 packets of a bulk flow (480 ms of 1 Mbit/s), then one of
            // another flow at 1 ms.
            for _ in 0..40 {
                let _ = e.input(0, packet(1000), ());
            }
            let lone = 1_000_000;
            let _ = e.input(lone, packet(2000), ());
            let mut now = 0;
            while now < 2_000_000_000 {
                while let Some(out) = e.poll(now) {
                    if out.info.key.sport == 2000 {
                        return out.delivered().then(|| out.at - lone);
                    }
                }
                now += 1_000_000;
            }
            None
        };
        let fq = lone_wait("bw 1Mbit/s type fq_codel").expect("the lone packet left");
        // Behind a few of the bulk flow's packets (12 ms each), not 40.
        assert!(fq <= 50_000_000, "waited {fq} ns under FQ-CoDel");
        let fifo = lone_wait("bw 1Mbit/s").expect("the lone packet left");
        assert!(
            fifo >= 400_000_000,
            "a FIFO makes it wait behind the backlog: {fifo} ns"
        );
        // The generated commands: queue 1 of scheduler 1, the rule to it.
        let config = link_config(None, Some("bw 1Mbit/s type fq_codel"), None).unwrap();
        assert!(config.iter().any(|(_, c)| matches!(c,
            Command::ConfigQueue(1, q) if q.sched == Some(1))));
        assert!(config.iter().any(|(_, c)| matches!(c,
            Command::AddRule(r) if r.action == dummynet_engine::config::Action::Queue(1))));
        assert!(!config
            .iter()
            .any(|(_, c)| matches!(c, Command::ConfigQueue(2, _))));
    }

    #[test]
    fn shell_config_names_the_bad_direction() {
        assert!(shell_config("bw 1Mbit/s", "delay 5ms").is_ok());
        let e = shell_config("bw 1Mbit/s", "dealy 5ms")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--down:"), "{e}");
        let e = shell_config("bw fast", "delay 5ms")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--up:"), "{e}");
    }
}
