use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dummynet_engine::config::Trace;
use dummynet_engine::{Direction, DropReason, Engine, Nanos, Target};

use super::record::Msg;
use super::*;
use crate::capture;
use crate::events::Event;

fn arrival(id: u64, t_ns: Nanos) -> Record {
    Record {
        len: 84,
        ..Record::new(Kind::Arrival, t_ns, (id, false))
    }
}

fn through_pipe(kind: Kind, id: u64, t_ns: Nanos, pipe: u32) -> Record {
    Record {
        len: 84,
        rule: Some(100),
        target: Some(Target::Pipe(pipe)),
        ..Record::new(kind, t_ns, (id, false))
    }
}

/// A buffer nobody empties takes what it holds and counts the rest by
/// kind, without ever waiting.
#[test]
fn a_full_buffer_sheds_and_counts_by_kind() {
    let engine: Engine<()> = Engine::new(1);
    let o = ObserveOptions {
        log: Some(PathBuf::from("unused")),
        buffer: 4,
        ..ObserveOptions::default()
    };
    let (mut tap, rx, _spare) = Tap::new(&o);
    tap.refresh();
    assert!(tap.on, "files are asked for");
    for id in 0..3 {
        tap.push(&engine, arrival(id, id * 10), None);
    }
    for id in 0..5 {
        tap.push(&engine, through_pipe(Kind::Departure, id, 100, 1), None);
    }
    let stats = tap.stats();
    assert_eq!(stats.sent, 4);
    assert_eq!(stats.lost, vec![("departure", 4)]);
    assert_eq!(stats.lost_total(), 4);
    // What was taken is there, in order.
    let kinds: Vec<Kind> = rx
        .try_iter()
        .map(|m| match m {
            Msg::Packet(r) | Msg::Frame(r, ..) => r.kind,
            _ => panic!("only packets were pushed"),
        })
        .collect();
    assert_eq!(
        kinds,
        [Kind::Arrival, Kind::Arrival, Kind::Arrival, Kind::Departure]
    );
    // Room again: taken again.
    tap.push(&engine, arrival(9, 500), None);
    assert_eq!(tap.stats().sent, 5);
}

/// With neither files nor subscribers the data plane sends nothing; a
/// subscriber turns it on and gets the start line, then the events its
/// filter keeps; a slow one loses events, counted; dropping the tap
/// ends every subscription.
#[test]
fn a_capture_takes_buffers_from_a_pool_made_at_start_and_counts_frames_it_misses() {
    let engine: Engine<()> = Engine::new(1);
    // A 1 MiB snap length: the 16 MiB pool holds 16 buffers.
    let o = ObserveOptions {
        capture_in: Some(PathBuf::from("unused")),
        snaplen: 1 << 20,
        ..ObserveOptions::default()
    };
    let (mut tap, rx, spare) = Tap::new(&o);
    tap.refresh();
    let frame = [7u8; 100];
    for id in 0..20 {
        tap.push(&engine, arrival(id, id), Some(&frame));
    }
    let stats = tap.stats();
    // Every record went; the four past the pool's sixteen without bytes.
    assert_eq!((stats.sent, stats.capture_lost), (20, 4));
    let frames: Vec<Vec<u8>> = rx
        .try_iter()
        .filter_map(|m| match m {
            Msg::Frame(_, buf, 100) => Some(buf),
            _ => None,
        })
        .collect();
    assert_eq!(frames.len(), 16);
    assert!(frames
        .iter()
        .all(|b| b[..] == frame[..] && b.capacity() >= 1 << 20));
    // A buffer handed back is taken again, with no allocation.
    let back = frames.into_iter().next().expect("a frame");
    let at = back.as_ptr();
    spare.try_send(back).expect("room for it");
    tap.push(&engine, arrival(20, 20), Some(&frame));
    match rx.try_recv() {
        Ok(Msg::Frame(_, buf, _)) => assert_eq!(buf.as_ptr(), at),
        _ => panic!("the returned buffer carries the next frame"),
    }
    assert_eq!(tap.stats().capture_lost, 4);
}

#[test]
fn subscribers_get_filtered_events_and_a_slow_one_loses_some() {
    let engine: Engine<()> = Engine::new(1);
    let (observer, mut tap, thread) = Observer::start(&ObserveOptions::default()).unwrap();
    tap.refresh();
    assert!(!tap.on, "nobody listens");
    let pipe1 = observer.subscribe(
        EventFilter {
            pipe: Some(1),
            ..EventFilter::default()
        },
        100,
    );
    let sampled = observer.subscribe(
        EventFilter {
            sample: Some(2),
            ..EventFilter::default()
        },
        100,
    );
    let slow = observer.subscribe(EventFilter::default(), 3);
    tap.refresh();
    assert!(tap.on);
    tap.start(1_000);
    for id in 0..4 {
        tap.push(&engine, arrival(id, id), None);
        let pipe = if id % 2 == 0 { 1 } else { 2 };
        tap.push(
            &engine,
            through_pipe(Kind::Departure, id, 10 + id, pipe),
            None,
        );
    }
    drop(tap);
    thread.join();
    let all = |s: &Subscription| -> Vec<Event<String>> {
        let mut v = Vec::new();
        while let Ok(e) = s.recv_timeout(Duration::from_secs(5)) {
            v.push(e);
        }
        v
    };
    let got = all(&pipe1);
    assert_eq!(
        got[0],
        Event::Start {
            t_ns: 0,
            wall_ns: 1_000
        }
    );
    let ids: Vec<_> = got[1..].iter().map(|e| (e.id(), e.target().0)).collect();
    assert_eq!(ids, [(Some(0), Some(1)), (Some(2), Some(1))]);
    assert_eq!(pipe1.lost(), 0);
    let got = all(&sampled);
    let ids: Vec<_> = got[1..].iter().filter_map(Event::id).collect();
    assert_eq!(ids, [0, 0, 2, 2], "every event of the even packets");
    // Nobody read the slow one while 9 events came: 3 kept, 6 lost.
    assert_eq!(all(&slow).len(), 3);
    assert_eq!(slow.lost(), 6);
    assert_eq!(observer.stats().subscriber_lost, 6);
    assert!(observer.stopped());
}

/// The files: the log's lines, the captures' frames (cut to the snap
/// length, stamped with the wall clock to the nanosecond), the
/// mahimahi log's lines for the pipe it follows.
#[test]
fn files_hold_what_the_tap_was_given() {
    let dir = std::env::temp_dir().join(format!("dummynet-observer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = ObserveOptions {
        log: Some(dir.join("log.jsonl")),
        capture_in: Some(dir.join("in.pcap")),
        capture_out: Some(dir.join("out.pcap")),
        mm_log: Some((dir.join("mm.log"), 1)),
        snaplen: 20,
        ..ObserveOptions::default()
    };
    let engine: Engine<()> = Engine::new(1);
    let (_observer, mut tap, thread) = Observer::start(&o).unwrap();
    const WALL: u64 = 1_700_000_000_123_456_789;
    tap.start(WALL);
    let frame: Vec<u8> = (0..100).collect();
    tap.push(&engine, arrival(0, 5_000_000), Some(&frame));
    tap.push(&engine, through_pipe(Kind::Enqueue, 0, 5_000_000, 1), None);
    tap.push(
        &engine,
        through_pipe(Kind::Departure, 0, 25_000_001, 1),
        Some(&frame),
    );
    tap.push(&engine, arrival(1, 30_000_000), Some(&frame));
    let full = Record {
        reason: Some(DropReason::QueueFull),
        at_entry: true,
        ..through_pipe(Kind::Drop, 1, 30_000_000, 1)
    };
    tap.push(&engine, full, None);
    drop(tap);
    thread.join();
    let log = std::fs::read_to_string(dir.join("log.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["start", "arrival", "departure", "arrival", "drop"]);
    assert_eq!(lines[0]["wall_ns"], WALL);
    assert_eq!(lines[2]["t_ns"], 25_000_001);
    assert_eq!(lines[4]["reason"], "queue-full");
    let cin = capture::read_file(&dir.join("in.pcap")).unwrap();
    assert_eq!(cin.frames.len(), 2);
    assert_eq!(cin.frames[0].ts, WALL + 5_000_000);
    assert_eq!(cin.frames[0].data, frame[..20]);
    assert_eq!(cin.frames[0].orig_len, 100);
    let cout = capture::read_file(&dir.join("out.pcap")).unwrap();
    assert_eq!(cout.frames.len(), 1);
    assert_eq!(cout.frames[0].ts, WALL + 25_000_001);
    let mm = std::fs::read_to_string(dir.join("mm.log")).unwrap();
    let base = WALL / 1_000_000;
    let body: Vec<&str> = mm.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(mm.contains(&format!("# base timestamp: {base}\n")), "{mm}");
    // 5.12 ms in: +; 25.12 ms: - after 20 ms; 30.12: + (dropped at entry).
    assert_eq!(
        body,
        [
            format!("{} + 84", base + 5),
            format!("{} - 84 20", base + 25),
            format!("{} + 84", base + 30),
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two workers' streams (`run --workers 2`) read as one: written in
/// time order once both floors have passed, a packet handed from one
/// worker to the other and back keeps its steps in order even where
/// they share a time (the later step sent first, by the other worker),
/// a record no older than its worker's floor waits for it, ids keep
/// their worker, and a record older than what was written is written
/// when it comes and counted.
#[test]
fn two_workers_records_merge_in_time_order_and_keep_each_packets_steps() {
    let dir = std::env::temp_dir().join(format!("dummynet-merge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = ObserveOptions {
        log: Some(dir.join("log.jsonl")),
        ..ObserveOptions::default()
    };
    let engine: Engine<()> = Engine::new(1);
    let (observer, mut taps, thread) = Observer::start_workers(&o, 2).unwrap();
    let sub = observer.subscribe(EventFilter::default(), 1000);
    let mut w1 = taps.pop().unwrap();
    let mut w0 = taps.pop().unwrap();
    // The start an hour ahead: the merge window never passes anything,
    // only the floors do.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        + 3_600_000_000_000;
    w0.start(wall);
    w1.start(wall);
    let ms = 1_000_000;
    let (a, b) = (first_id(0), first_id(1));
    let (c, e, f) = (a + 1, b + 1, a + 2);
    let step = |kind, id, t, dir| Record {
        dir,
        target: Some(Target::Pipe(1)),
        ..Record::new(kind, t * ms, (id, false))
    };
    let into_pipe = |kind, id, t| step(kind, id, t, Direction::In);
    // A: read by worker 0 at 10 ms, queued by worker 1, out at 20 ms,
    // back to worker 0 for its `out` pass, gone at 20 ms. Worker 0
    // says so first.
    w0.push(&engine, arrival(a, 10 * ms), None);
    w0.push(&engine, step(Kind::Departure, a, 20, Direction::Out), None);
    w0.push(&engine, arrival(c, 30 * ms), None);
    w1.push(&engine, into_pipe(Kind::Enqueue, a, 10), None);
    w1.push(&engine, into_pipe(Kind::Forward, a, 20), None);
    // B: read by worker 1 at 15 ms, refused by its pipe.
    w1.push(&engine, arrival(b, 15 * ms), None);
    w1.push(&engine, into_pipe(Kind::Drop, b, 15), None);
    w0.floor(25 * ms, false);
    w1.floor(16 * ms, false);
    let kind = |ev: &Event<String>| match ev {
        Event::Start { .. } => "start",
        Event::Arrival { .. } => "arrival",
        Event::Forward { .. } => "forward",
        Event::Departure { .. } => "departure",
        Event::Drop { .. } => "drop",
    };
    let next = || match sub.recv_timeout(Duration::from_secs(10)) {
        Ok(ev) => (kind(&ev), ev.id(), ev.t_ns() / ms),
        Err(e) => panic!("no event: {e}"),
    };
    assert_eq!(next().0, "start");
    assert_eq!(next(), ("arrival", Some(a), 10));
    assert_eq!(next(), ("arrival", Some(b), 15));
    assert_eq!(next(), ("drop", Some(b), 15));
    // Worker 1 may still send from 16 ms on: what is later waits.
    w1.push(&engine, arrival(e, 17 * ms), None);
    w1.floor(40 * ms, false);
    assert_eq!(next(), ("arrival", Some(e), 17));
    assert_eq!(next(), ("forward", Some(a), 20));
    assert_eq!(next(), ("departure", Some(a), 20));
    // A record older than what was written: written as it comes, and
    // counted. (C, at 30 ms, is past worker 0's floor: it waits.)
    w0.push(&engine, arrival(f, 5 * ms), None);
    assert_eq!(next(), ("arrival", Some(f), 5));
    drop((w0, w1));
    assert_eq!(next(), ("arrival", Some(c), 30));
    thread.join();
    let stats = observer.stats();
    assert_eq!(stats.out_of_order, 1);
    assert_eq!(stats.lost_by_worker, [0, 0]);
    assert_eq!(stats.sent, 9);
    let log = std::fs::read_to_string(dir.join("log.jsonl")).unwrap();
    let ids: Vec<u64> = log
        .lines()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, [a, b, b, e, a, a, f, c]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A trace-driven pipe's `--mm-log` carries its delivery opportunities
/// (`T # 1504`), in time order with the packets' lines, from the
/// trace's start; a new trace restarts them and a plain link ends them.
#[test]
fn the_mahimahi_log_lists_a_traced_pipes_opportunities() {
    use dummynet_engine::config::{LinkConfig, PipeConfig, TraceMode};
    use dummynet_engine::Command;
    const MS: Nanos = 1_000_000;
    let dir = std::env::temp_dir().join(format!("dummynet-mm-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = ObserveOptions {
        mm_log: Some((dir.join("mm.log"), 1)),
        ..ObserveOptions::default()
    };
    let pipe = |trace: Option<Vec<Nanos>>| {
        Command::ConfigPipe(
            1,
            PipeConfig {
                link: LinkConfig {
                    trace: trace.map(|times| {
                        Arc::new(Trace {
                            name: "t".into(),
                            times,
                            mode: TraceMode::Loop,
                        })
                    }),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
    };
    let mut engine = Engine::new(1);
    let (_observer, mut tap, thread) = Observer::start(&o).unwrap();
    const WALL: u64 = 1_700_000_000_000_000_000;
    tap.start(WALL);
    // At 2 ms: opportunities at 0, 0 and 3 ms of a 3 ms lap.
    engine
        .apply(2 * MS, pipe(Some(vec![0, 0, 3 * MS])))
        .unwrap();
    tap.reconfigured(&engine, 2 * MS);
    tap.reconfigured(&engine, 3 * MS); // unchanged: nothing sent
    tap.push(&engine, through_pipe(Kind::Enqueue, 0, 6 * MS, 1), None);
    // At 9 ms, a new trace (one opportunity a lap of 4 ms) ...
    engine.apply(9 * MS, pipe(Some(vec![4 * MS]))).unwrap();
    tap.reconfigured(&engine, 9 * MS);
    tap.push(&engine, through_pipe(Kind::Departure, 0, 13 * MS, 1), None);
    // ... and at 20 ms a plain link.
    engine.apply(20 * MS, pipe(None)).unwrap();
    tap.reconfigured(&engine, 20 * MS);
    drop(tap);
    thread.join();
    let mm = std::fs::read_to_string(dir.join("mm.log")).unwrap();
    let base = WALL / 1_000_000;
    let body: Vec<String> = mm
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (t, rest) = l.split_once(' ').unwrap();
            format!("{} {rest}", t.parse::<u64>().unwrap() - base)
        })
        .collect();
    // First trace from 2 ms: 2, 2, 5 | 5, 5, 8 | 8, 8 (11 is after 9).
    // Second from 9 ms: 13, 17 (21 is after 20).
    assert_eq!(
        body,
        [
            "2 # 1504",
            "2 # 1504",
            "5 # 1504",
            "5 # 1504",
            "5 # 1504",
            "6 + 84",
            "8 # 1504",
            "8 # 1504",
            "8 # 1504",
            "13 # 1504",
            "13 - 84 7",
            "17 # 1504",
        ],
        "{mm}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A sleeping worker's floor, as the merge takes it: the time of the
/// look less the kernel's time to wake it, but no later than a packet
/// another worker handed it and it has not taken (it records that packet
/// with its hand-off time, however late it wakes), and no earlier than
/// the merge window.
#[test]
fn a_sleeping_workers_floor_waits_for_what_was_handed_to_it() {
    use super::merge::{worker_floor, MERGE_WINDOW, SLEEP_SLACK};
    use super::shared::PlaneCounters;
    use std::sync::atomic::Ordering;
    let ms = 1_000_000;
    let p = PlaneCounters::default();
    p.floor.store(3 * ms, Ordering::Relaxed);
    p.asleep.store(true, Ordering::Relaxed);
    p.sleep_until.store(Nanos::MAX, Ordering::Relaxed);
    p.handed_since.store(Nanos::MAX, Ordering::Relaxed);
    let now = 100 * ms;
    assert_eq!(worker_floor(&p, now), now - SLEEP_SLACK);
    // Handed a packet of 95 ms, asleep still at 100 ms.
    p.handed_since.store(95 * ms, Ordering::Relaxed);
    assert_eq!(worker_floor(&p, now), 95 * ms);
    // A hand-off it took before sleeping holds the merge a window at most.
    p.handed_since.store(10 * ms, Ordering::Relaxed);
    assert_eq!(worker_floor(&p, now), now - MERGE_WINDOW);
    // Taken (the ring drained): back to the look's time.
    let (_observer, taps, thread) = Observer::start_workers(&ObserveOptions::default(), 2).unwrap();
    taps[0].handed(1, 42 * ms);
    taps[0].handed(1, 44 * ms);
    assert_eq!(
        taps[0].shared.plane[1].handed_since.load(Ordering::Relaxed),
        42 * ms
    );
    taps[1].taking_handoffs();
    assert_eq!(
        taps[0].shared.plane[1].handed_since.load(Ordering::Relaxed),
        Nanos::MAX
    );
    drop(taps);
    thread.join();
}

/// A file that cannot be created stops the start, and the error names it
/// in the words `run` prints.
#[test]
fn a_log_that_cannot_be_created_is_named() {
    let path = PathBuf::from("/nonexistent-dummynet-dir/events.log");
    let o = ObserveOptions {
        log: Some(path.clone()),
        ..ObserveOptions::default()
    };
    let Err(e) = Observer::start(&o) else {
        panic!("started with a log in a missing directory");
    };
    assert!(matches!(&e, ObserverError::Create { path: p, source }
        if *p == path && source.kind() == std::io::ErrorKind::NotFound));
    assert!(
        e.to_string()
            .starts_with("cannot create /nonexistent-dummynet-dir/events.log: "),
        "{e}"
    );
}
