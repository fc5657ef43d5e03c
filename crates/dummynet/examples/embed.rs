//! The emulator embedded in a Rust program: a link with 20 ms each way,
//! a `ping` through it, the uplink's delay raised to 80 ms halfway, the
//! RTTs and the emulator's counters printed.
//!
//! ```text
//! sudo cargo run -p dummynet --example embed
//! ```
//!
//! It needs root (network namespaces) and `ping`. The link's far end is a
//! veth `dn-PID-0` in this namespace, removed when the program ends, as
//! are the shell's namespaces; no NAT, so the inside reaches only this
//! host.

use std::process::Stdio;
use std::time::Duration;

use dummynet::events::Event;
use dummynet::{EventFilter, Shell};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Pipe 1 carries what the inside sends, pipe 2 what it receives.
    let link = Shell::builder()
        .up("bw 10Mbit/s delay 20ms")
        .down("bw 10Mbit/s delay 20ms")
        .start()?;
    println!(
        "link up: inside {} <-> {} here (veth {})",
        link.addr(),
        link.peer(),
        link.interface()
    );

    // The packet events, from now on, of the packets pipe 1 handles.
    let events = link.events(EventFilter {
        pipe: Some(1),
        ..EventFilter::default()
    });

    // Ten pings, 200 ms apart, from inside the link to this host.
    let ping = link
        .command("ping")
        .args(["-c", "10", "-i", "0.2", "-w", "10"])
        .arg(link.peer().to_string())
        .stdout(Stdio::piped())
        .spawn()?;

    // Halfway through, the uplink slows down; the queued packets stay.
    std::thread::sleep(Duration::from_millis(1000));
    link.pipe(1).modify("delay 80ms")?;
    println!("pipe 1 now: {:?}", link.pipe(1).show()?.link);

    let out = ping.wait_with_output()?;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(at) = line.find("time=") {
            println!("  rtt {}", &line[at + 5..]);
        }
    }

    // A batch is applied whole or not at all: pipe 9 does not exist, so
    // pipe 2 keeps its delay.
    if let Err(e) = link.apply(["pipe 2 config delay 1ms", "pipe 9 modify delay 1ms"]) {
        println!("refused ({:?}): {e}", e.kind());
    }

    // Each echo request left pipe 1 once (along with whatever else the
    // inside sent: IPv6 neighbour discovery, say).
    let mut departures = 0;
    while let Ok(event) = events.try_recv() {
        if let Event::Departure { .. } = event {
            departures += 1;
        }
    }
    println!("departures from pipe 1: {departures}");

    let stats = link.stats()?;
    println!(
        "arrived {}, delivered {}, dropped {}, inside {}",
        stats.arrived, stats.delivered, stats.dropped, stats.inside
    );
    // Stopping the link, or dropping it (an early return, a panic), takes
    // everything down.
    let last = link.stop()?;
    println!("{}", last.cost());
    Ok(())
}
