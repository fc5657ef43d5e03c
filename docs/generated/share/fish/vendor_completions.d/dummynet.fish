# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_dummynet_global_optspecs
    string join \n h/help V/version
end

function __fish_dummynet_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_dummynet_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_dummynet_using_subcommand
    set -l cmd (__fish_dummynet_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c dummynet -n "__fish_dummynet_needs_command" -s h -l help -d 'Print help'
complete -c dummynet -n "__fish_dummynet_needs_command" -s V -l version -d 'Print version'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "sim" -d 'Replay captures through an ipfw/dummynet configuration on virtual time'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "plot" -d 'Draw throughput, delay, queue and drops from an event log (sim --log)'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "gen" -d 'Write synthetic constant-rate traffic to a pcap file'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "gen-trace" -d 'Write a synthetic mahimahi trace (delivery opportunities, one millisecond per line) for `pipe N config trace FILE`'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "bench" -d 'Measure the engine\'s packet rate on synthetic traffic'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "demo" -d 'Two namespaces, the emulator between them with a preset (LTE by default), measured by built-in probes: configured vs measured'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "run" -d 'Run the live emulator: bridge two interfaces or shape this host'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "shell" -d 'Run a command behind an emulated link, in its own network namespace'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "experiment" -d 'Run an experiment file (TOML): flows through a shell\'s link, measured'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "flood" -d 'Send a bounded flood of UDP frames out of an interface (live benchmarks)'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "presets" -d 'List the built-in link presets (the typical-links table of the FreeBSD dummynet article, browser and mobile test tools\' profiles, lossy and traced links)'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "install" -d 'Copy this binary to a directory on the PATH with `ipfw` and `dnctl` links, and its man pages and shell completions beside it'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "ps" -d 'List the dummynet daemons on this machine and what each shapes: PID, mode, network namespace, control socket, HTTP address, uptime'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "stats" -d 'Counters and release lateness (p50/p99/max) of a running daemon'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "ipfw" -d 'Send an ipfw command to a running daemon (`dummynet ipfw pipe 1 show`)'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "dnctl" -d 'Send a dnctl command to a running daemon (`dummynet dnctl pipe show`)'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "tc" -d 'tc(8)\'s netem, tbf and fq_codel qdiscs, carried out by dummynet'
complete -c dummynet -n "__fish_dummynet_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l config -d 'ipfw / dnctl commands, one per line, applied at time 0' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l pcap -d 'A pcap or pcapng capture to replay, entering on IFACE (default sim0) in direction in (default) or out, one pass through the rules; or crossing a bridge from RECV to XMIT (IN.pcap@RECV:bridge:XMIT), two passes: in on RECV, then out on XMIT. Repeat to merge several captures by timestamp' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l out -d 'Write delivered packets here (pcap, nanosecond timestamps)' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l log -d 'Write one JSON line per arrival, departure and drop here' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l seed -d 'Seed of the engine\'s random draws, so that a run can be replayed: rules\' `prob`, `plr`, netem\'s `loss`, `duplicate` and `corrupt` (which packets, and which bit), `jitter`, `reorder`, `slot`, profiles\' loss and delay draws, and RED\'s, GRED\'s and PIE\'s random drops' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l me -d 'The addresses rules\' `me` and `me6` match (this host\'s, as the capture sees it), comma-separated: `--me 10.0.0.1,2001:db8::1`. Without it, `me` matches nothing' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l plot -d 'Draw the run as `dummynet plot` would from its log (.svg or .png), with the capacity of --config\'s pipe (--pipe N, or the only one)' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l pipe -d 'Only the packets that pipe N let out or dropped; their delay is from when they reached the pipe. Default: every packet in the log' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l what -d 'Panels, top to bottom, sharing the time axis' -r -f -a "throughput\t''
delay\t''
queue\t''
drops\t''"
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l capacity -d 'The link\'s capacity, drawn on the throughput panel (e.g. 10Mbit/s); it wins over the configuration\'s' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l window -d 'Width of the windows that throughput, percentiles, queue and drops are counted over (e.g. 100ms, 1s)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -l title -d 'A title above the panels' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand sim" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dummynet -n "__fish_dummynet_using_subcommand plot" -s o -l out -d 'The picture: .svg, or .png (which needs a font on this system)' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand plot" -l config -d 'The configuration the log was made with: the capacity line is the pipe\'s `bw` (or its `trace`\'s delivery opportunities); that of pipe N with --pipe, else of the only pipe' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand plot" -l pipe -d 'Only the packets that pipe N let out or dropped; their delay is from when they reached the pipe. Default: every packet in the log' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand plot" -l what -d 'Panels, top to bottom, sharing the time axis' -r -f -a "throughput\t''
delay\t''
queue\t''
drops\t''"
complete -c dummynet -n "__fish_dummynet_using_subcommand plot" -l capacity -d 'The link\'s capacity, drawn on the throughput panel (e.g. 10Mbit/s); it wins over the configuration\'s' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand plot" -l window -d 'Width of the windows that throughput, percentiles, queue and drops are counted over (e.g. 100ms, 1s)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand plot" -l title -d 'A title above the panels' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand plot" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l out -d 'The pcap file to write (nanosecond timestamps). Its size is stated before writing, and a file larger than the free space of its filesystem is refused before it is created' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l rate -d 'Sending rate, counting IP bytes: bit/s, Kbit/s, Mbit/s, Gbit/s, or Byte/s, KByte/s...' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l size -d 'IP packet length in bytes (what dummynet bills; Ethernet adds 14)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l duration -d 'How long to send, e.g. 1s, 250ms (a bare number is seconds). Default 1s' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l packets -d 'How many packets to send, instead of --duration' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l flows -d 'Number of flows, sent round-robin' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l proto -r -f -a "udp\t''
tcp\t''
icmp\t''"
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l src -d 'Source network; flows take its hosts in turn [default: 10.0.0.0/24, or 2001:db8::/64 with --ipv6]' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l dst -d 'Destination address [default: 10.0.1.1, or 2001:db8:1::1 with --ipv6]' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l start -d 'Capture timestamp of the first packet (a bare number is seconds since the epoch)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l raw -d 'Write raw IP (LINKTYPE_RAW) instead of Ethernet'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -l ipv6 -d 'IPv6 instead of IPv4'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and not __fish_seen_subcommand_from constant walk onoff help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and not __fish_seen_subcommand_from constant walk onoff help" -f -a "constant" -d 'The same rate throughout'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and not __fish_seen_subcommand_from constant walk onoff help" -f -a "walk" -d 'Cellular-like: a mean-reverting random walk of the rate in log space, clipped to MIN..MAX, with optional outages'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and not __fish_seen_subcommand_from constant walk onoff help" -f -a "onoff" -d 'Wi-Fi-like: bursts at RATE separated by silences'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and not __fish_seen_subcommand_from constant walk onoff help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from constant" -l rate -d 'The rate: bit/s, Kbit/s, Mbit/s... (12.032Mbit/s is one opportunity per ms)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from constant" -l duration-ms -d 'The trace\'s length (its period when looped), ms' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from constant" -l seed -d 'Seed of the random draws' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from constant" -l out -d 'The trace file to write [default: standard output]' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from constant" -s h -l help -d 'Print help'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l mean -d 'The rate the walk reverts to; the unclipped walk averages it' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l min -d 'The lowest rate outside outages [default: MEAN / 10]' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l max -d 'The highest rate [default: MEAN × 4]' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l step-ms -d 'How often the rate changes, ms' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l volatility -d 'σ: how fast the log of the rate moves, per √s' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l revert-s -d 'τ: the time constant of the pull back to the mean, s' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l outage-prob -d 'The chance, at each step, that an outage starts' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l outage-ms -d 'How long an outage lasts, ms' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l duration-ms -d 'The trace\'s length (its period when looped), ms' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l seed -d 'Seed of the random draws' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -l out -d 'The trace file to write [default: standard output]' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from walk" -s h -l help -d 'Print help'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from onoff" -l rate -d 'The rate while on' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from onoff" -l on-ms -d 'Mean length of an on period, ms' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from onoff" -l off-ms -d 'Mean length of an off period, ms' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from onoff" -l duration-ms -d 'The trace\'s length (its period when looped), ms' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from onoff" -l seed -d 'Seed of the random draws' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from onoff" -l out -d 'The trace file to write [default: standard output]' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from onoff" -s h -l help -d 'Print help'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from help" -f -a "constant" -d 'The same rate throughout'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from help" -f -a "walk" -d 'Cellular-like: a mean-reverting random walk of the rate in log space, clipped to MIN..MAX, with optional outages'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from help" -f -a "onoff" -d 'Wi-Fi-like: bursts at RATE separated by silences'
complete -c dummynet -n "__fish_dummynet_using_subcommand gen-trace; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dummynet -n "__fish_dummynet_using_subcommand bench" -l scenario -d 'allow | pipe | bw1g | delay10ms (all four when neither this nor --sched is given), or an impaired pipe: jitter | jitter-normal | jitter-unordered | netem (also runs delay10ms and prints the ratio) | netem-sparse (packets 4.1 ms apart, against delay10ms-sparse) | trace | slot. Several, comma-separated, run in the order given' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand bench" -l sched -d 'Scheduler cost mode: a registered scheduler type (fifo, wf2q+, ...)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand bench" -l flows -d 'Backlogged flows for --sched (default: 1, 100, 10000 and 1000000). A million flows hold two million packets: about 1 GB and 10 s' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand bench" -l packets -d 'Packets per scenario' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand bench" -l size -d 'Packet size in bytes' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand bench" -l clock -d 'Instead of the engine: measure this machine\'s floor under the live data plane\'s release lateness, over SECONDS (default 6): how often and how long a spinning thread loses the CPU, and how late its wait wakes for a deadline (see `live::floor`)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand bench" -l workers -d 'Instead of the scenarios: the sharded data plane (`run --workers`) on this many worker threads, in memory, each a comma-separated count (e.g. `1,2`), over `--pipes` unlimited pipes (see `workers::bench`)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand bench" -l pipes -d 'With --workers: how many pipes the packets are spread over, each a comma-separated count (default `1,2`)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand bench" -l json -d 'Print one JSON object per result instead of a table'
complete -c dummynet -n "__fish_dummynet_using_subcommand bench" -s h -l help -d 'Print help'
complete -c dummynet -n "__fish_dummynet_using_subcommand demo" -l preset -d 'The link to emulate (`dummynet presets` lists them)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand demo" -l seconds -d 'Seconds of bulk transfer in each direction (default: 40 round trips, 4 to 20 s, enough for TCP to settle on the preset\'s path)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand demo" -l probes -d 'RTT probes to send' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand demo" -l precision -d 'How exactly departures leave: `timer` (default) or `max` (see `dummynet run --help`)' -r -f -a "timer\t'Sleep on the kernel\'s timer up to each departure, aimed so that the median wake-up lands on time, and spin only what is left (at most 50 µs); no polling after arrivals, and arrivals that carry the kernel\'s receive time wait in the kernel until the next departure whenever every one stays inside at least 1 ms. Departures leave within the timer\'s jitter (tens of µs on a VM) for a small share of a core: the default'
max\t'Spin the last 300 µs (or `--spin-us`) before every departure, release it ahead and hand it over on the nanosecond, and poll the ports a while after every arrival: about a microsecond late, at the cost of a core whenever departures are closer together than the spin'"
complete -c dummynet -n "__fish_dummynet_using_subcommand demo" -l log -d 'Write one JSON line per packet event of the demo\'s traffic here (the schema of `sim --log` and `run --log`)' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand demo" -l plot -d 'Draw the downlink\'s throughput (against its capacity), per-packet delay, queue and drops over the demo here, as `dummynet plot` does (.svg, or .png with a system font); --plot-pipe 1 for the uplink' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand demo" -l plot-pipe -d 'The pipe --plot draws: 2, the downlink (default), or 1, the uplink' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l bridge -d 'Bridge two interfaces: frames from one go through the rules and pipes to the other (`in recv IF_A`, then `out xmit IF_B`)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l xdp-frames -d '--xdp: frames the UMEM holds, in the kernel\'s rings and in pipes together (a power of two, 256 to 1048576; 2 KiB each). A pipe holding them all makes the kernel drop arrivals, counted as IF.rx_fill_ring_empty' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l xdp-attach -d '--xdp: where the XDP program runs. `generic` (the kernel\'s generic XDP): frames up to a chunk (1792 bytes) cross through AF_XDP, longer ones (GSO super-packets) through an AF_PACKET bridge beside it, and a veth\'s peer keeps its GSO. `driver`: the driver\'s XDP, zero-copy where the driver has it, every frame through AF_XDP; on a veth the peer then segments TCP. `auto`: generic if a port is a veth' -r -f -a "auto\t'Generic XDP if either port is a veth, the driver\'s XDP otherwise'
driver\t'The driver\'s XDP (zero-copy where the driver has it)'
generic\t'The kernel\'s generic XDP, with super-packets through AF_PACKET'"
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l workers -d '--bridge: data-plane worker threads, each reading its share of both ports (the kernel spreads frames by flow hash, PACKET_FANOUT) and owning a share of the pipes (pipe N on worker N mod WORKERS; a masked pipe\'s instances by flow hash), with a frame for another worker\'s pipe handed over a lock-free ring. `auto` (the default): one per CPU this process may run on (its affinity mask) less one for the control plane and the kernel\'s own work, at least 1 (so 1 on two cores); 1 where workers do not apply (--xdp, host mode, a configuration with `one_pass 0`), said at start. AF_PACKET bridge only. See the book\'s "Workers" chapter' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l queue -d 'NFQUEUE number for --host' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l hooks -d '--host: directions to intercept: in, out, forward (comma-separated)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l oif -d '--host: intercept only packets leaving by interface IF (an `oifname IF` match; with --hooks out and/or forward). `dummynet tc` runs its daemons so' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l firewall -d '--host: which firewall sends the host\'s packets to the queue: `auto` (nftables, a table `inet dummynet-QUEUE` of its own, or iptables where nftables cannot be used), `nftables`, `iptables` (the programs the distribution\'s `iptables` is), `iptables-nft` or `iptables-legacy`' -r -f -a "auto\t''
nftables\t''
iptables\t''
iptables-nft\t''
iptables-legacy\t''"
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l copy-mark -d '--host: the netfilter mark of the copies of outgoing packets, which the interception rules let pass' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l netns -d 'Work inside another network namespace, a running container\'s, from outside it: the interfaces (--bridge), the NFQUEUE and its rules (--host) and the data plane are that namespace\'s; the control socket and --http stay in this one. PATH|PID: /proc/PID/ns/net, /run/netns/NAME, a container runtime\'s namespace file, or a PID. Needs root. If the namespace\'s process ends (or PATH no longer names the namespace), the daemon stops with exit status 69' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l config -d 'An ipfw commands file applied at start' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l socket -d 'Control socket (default: $DUMMYNET_SOCKET or /run/dummynet.sock). 32 clients at once, each with 2 s to send its request; one still sending yields its place to a newcomer (and is told busy)' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l socket-group -d 'A group (name or number) whose members may also use the control socket (made mode 0660 and owned by it); they may not name files (profiles, traces), which the daemon would read as root' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l http -d 'Serve the HTTP API (JSON, /metrics for Prometheus) on ADDR:PORT, e.g. 127.0.0.1:8080 (port 0: any free port, printed at start). Off by default. Any address but loopback needs --http-token. No TLS: put a TLS proxy in front. Idle and slow clients cannot lock it out: 32 connections, 8 per address, 2 s to send a request\'s head; one that has not sent it yields its slot to a newcomer. See the book\'s "HTTP API" chapter' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l http-token -d 'A file whose first line is the bearer token HTTP clients must send (`Authorization: Bearer TOKEN`), at least 16 bytes; required for an --http address other than loopback' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l seed -d 'Seed of the engine\'s random draws, so that a run can be replayed: rules\' `prob`, `plr`, netem\'s `loss`, `duplicate` and `corrupt` (which packets, and which bit), `jitter`, `reorder`, `slot`, profiles\' loss and delay draws, and RED\'s, GRED\'s and PIE\'s random drops' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l precision -d 'How exactly departures leave: `max` (the default for `run`, which usually has a machine to itself) spins before each one and leaves within about a microsecond, and polls its ports after arrivals so that a sender does not pay for waking it, for a core whenever departures come closer together than the spin; `timer` (the default of `shell` and `demo`, which share their cores with the traffic\'s own programs) sleeps on the kernel\'s timer to each one, within its jitter (tens of µs on a VM), for a small share of a core' -r -f -a "timer\t'Sleep on the kernel\'s timer up to each departure, aimed so that the median wake-up lands on time, and spin only what is left (at most 50 µs); no polling after arrivals, and arrivals that carry the kernel\'s receive time wait in the kernel until the next departure whenever every one stays inside at least 1 ms. Departures leave within the timer\'s jitter (tens of µs on a VM) for a small share of a core: the default'
max\t'Spin the last 300 µs (or `--spin-us`) before every departure, release it ahead and hand it over on the nanosecond, and poll the ports a while after every arrival: about a microsecond late, at the cost of a core whenever departures are closer together than the spin'"
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l spin-us -d 'At `--precision max`: microseconds the data plane spins before each deadline instead of sleeping: more is more exact on a busy machine, and burns more CPU. Under SCHED_FIFO, while short of the idle time the kernel\'s RT budget asks for, it spins only as long as its timer has lately needed (at most this)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l memory-limit -d 'The most packet bytes the daemon holds in its pipes at once (queues and delay lines): a packet that would go above it is dropped as `memory-limit`. SIZE in bytes, with K, M or G (powers of 1024), or 0 for none. Default: a quarter of the machine\'s memory. It counts packet bytes; each held frame costs a little more. Settable live: `sysctl net.inet.ip.dummynet.held_limit=BYTES`' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l log -d 'Write one JSON line per packet event here (arrival, forward, departure, drop; the schema of `sim --log`), after a first line with the wall-clock time of `t_ns` 0. Written off the data plane: events it cannot keep up with are counted (`dummynet stats`), not waited for' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l capture-in -d 'Write what entered the emulator here (pcap, nanosecond stamps: the kernel\'s receive time), each frame cut to --capture-snaplen bytes' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l capture-out -d 'Write what left the emulator here (pcap, nanosecond stamps: when it was released), each frame cut to --capture-snaplen bytes' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l capture-snaplen -d 'Bytes of each frame the captures keep (the data plane copies only those)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l mm-log -d 'Write a mahimahi link log of one pipe here (what mm-link\'s --uplink-log writes, for mm-throughput-graph and mm-delay-graph): `# base timestamp: T` (the start, ms since the Unix epoch), then `T + BYTES` for a packet entering the pipe, `T - BYTES DELAY` for one leaving it (DELAY in ms since it entered), `T # BYTES` for a delivery opportunity of a trace-driven pipe; T in ms' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l mm-log-pipe -d 'The pipe --mm-log follows (default: the first pipe the configuration makes)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l exit-on-link-loss -d '--bridge: if a port\'s interface is deleted, exit with status 69 (EX_UNAVAILABLE) and a message naming it, instead of waiting for an interface of the same name to come back'
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l xdp -d '--bridge over AF_XDP sockets sharing one UMEM (zero-copy where the driver allows, copy mode elsewhere, as on veth); where AF_XDP cannot be used, the AF_PACKET bridge, with a message saying why. Each port\'s receive queue 0 only; in driver XDP, MTU up to 1774'
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l host -d 'Shape this machine\'s own traffic: a netfilter table of the daemon\'s own (see --firewall) sends its packets to an NFQUEUE'
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l no-bypass -d '--host: without the queue\'s bypass flag, traffic stops if the daemon dies (by default it flows unshaped)'
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l loopback -d '--host: also intercept loopback traffic'
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l hold-output -d '--host: hold the host\'s own outgoing packets in the kernel until they leave their pipe, instead of freeing them at once and sending copies (TCP Small Queues then limit a TCP sender through a delay to a few packets in flight)'
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l default-allow -d 'Let through what no rule passes or sends to a pipe: rule 65535 allows, as `kenv net.inet.ip.fw.default_to_accept=1` makes it on FreeBSD (by default it denies, as there)'
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -l nice -d 'Run the data plane at nice -20 instead of SCHED_FIFO (the default, when permitted: far lower lateness on a busy machine; it leaves the kernel\'s share of its CPU, 7% by default, to other tasks so that the kernel never throttles it)'
complete -c dummynet -n "__fish_dummynet_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l preset -d 'A preset for both directions (`dummynet presets` lists them: the typical-links table of the FreeBSD dummynet article, browser and mobile test tools\' profiles, lossy, jittery and trace-driven links). With --up or --down, the options they give replace the preset\'s of the same kind and the rest stays (`--preset lte --up "delay 50ms"` is lte with a 50 ms uplink delay), as `pipe N modify` does; the resulting configuration is printed at start' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l up -d 'Pipe options for the command\'s outgoing traffic, e.g. "bw 10Mbit/s delay 20ms" (pipe 1): the whole configuration, or with --preset the options changed from it' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l down -d 'Pipe options for traffic towards the command (pipe 2), as --up' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l config -d 'An ipfw commands file for the emulator instead (its interfaces are `app`, towards the command, and `peer`)' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l seed -d 'Seed of the engine\'s random draws, so that a run can be replayed: rules\' `prob`, `plr`, netem\'s `loss`, `duplicate` and `corrupt` (which packets, and which bit), `jitter`, `reorder`, `slot`, profiles\' loss and delay draws, and RED\'s, GRED\'s and PIE\'s random drops' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l nat -d 'How the command\'s traffic goes beyond this host: the shell turns forwarding on in the namespace it was started in and masquerades the link\'s addresses (IPv4 and IPv6) in a table of its own, removed when it ends (`auto`: with `nft`, else with `iptables`). `off`: the command reaches this host (its peer) only' -r -f -a "auto\t'`nft` if installed, else `iptables`/`ip6tables`'
nft\t''
iptables\t''
off\t'No forwarding and no NAT: the command reaches this namespace\'s addresses (its peer) and nothing further'"
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l user-net -d 'Without root only (see the book\'s "Without root" chapter): the userspace network stack that connects the shell\'s own namespaces to this host\'s network: `auto` takes pasta (package passt) if installed, else slirp4netns, else none; `none`: the command reaches its peer only' -r -f -a "auto\t'pasta if installed, else slirp4netns, else none (and say so)'
pasta\t''
slirp4netns\t''
none\t'The command reaches its peer only'"
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l socket -d 'The emulator\'s control socket, which `dummynet ipfw` inside the shell finds in $DUMMYNET_SOCKET (default /run/dummynet/shell-PID.sock; without root $XDG_RUNTIME_DIR/dummynet/shell-PID.sock, else /tmp/dummynet-UID/shell-PID.sock). A socket file nobody listens on is replaced; anything else there is an error' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l http -d 'Serve the HTTP API (JSON, /metrics for Prometheus) on ADDR:PORT, e.g. 127.0.0.1:8080 (port 0: any free port, printed at start). Off by default. Any address but loopback needs --http-token. No TLS: put a TLS proxy in front. Idle and slow clients cannot lock it out: 32 connections, 8 per address, 2 s to send a request\'s head; one that has not sent it yields its slot to a newcomer. See the book\'s "HTTP API" chapter' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l http-token -d 'A file whose first line is the bearer token HTTP clients must send (`Authorization: Bearer TOKEN`), at least 16 bytes; required for an --http address other than loopback' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l gso -d 'Whether TCP\'s GSO super-packets (up to 64 KB) cross whole, which multi-Gbit/s rates need: `auto` (the default) lets them while that changes nothing a pipe does (every pipe only delays), and makes every frame one wire packet otherwise, following the configuration as `ipfw` commands change it; `on` (also plain `--gso`) always, though a super-packet then takes one queue slot, one loss draw and one billing; `off` never' -r -f -a "auto\t'While the engine says they fare as their segments would (`Engine::only_delays`), following its configuration'
on\t''
off\t''"
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l precision -d 'How exactly departures leave: `timer` (default: within the kernel timer\'s jitter, for a small share of a core) or `max` (within about a microsecond, spinning a core under load). See `dummynet run --help`' -r -f -a "timer\t'Sleep on the kernel\'s timer up to each departure, aimed so that the median wake-up lands on time, and spin only what is left (at most 50 µs); no polling after arrivals, and arrivals that carry the kernel\'s receive time wait in the kernel until the next departure whenever every one stays inside at least 1 ms. Departures leave within the timer\'s jitter (tens of µs on a VM) for a small share of a core: the default'
max\t'Spin the last 300 µs (or `--spin-us`) before every departure, release it ahead and hand it over on the nanosecond, and poll the ports a while after every arrival: about a microsecond late, at the cost of a core whenever departures are closer together than the spin'"
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l napi -d 'Who runs the receiving TCP stacks of the link\'s endpoints: `threaded` (default) the kernel\'s NAPI threads (GRO on and threaded NAPI on the link\'s ends, TSO off on the emulator\'s ports while the ends segment, as --gso decides), so the emulator\'s thread only sends; `inline` leaves the ends as the kernel makes them, and a veth then runs its receiver\'s stack inside each of the emulator\'s sends (which makes releases late with many links). What the kernel refuses is said once; the link works either way' -r -f -a "threaded\t'The kernel\'s NAPI threads: GRO on and threaded NAPI on the ends, TSO off on the emulator\'s ports while the ends segment'
inline\t'The emulator\'s thread, inside its sends: the ends as the kernel makes them (GRO off, TSO on, NAPI not threaded)'"
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l log -d 'Write one JSON line per packet event here (arrival, forward, departure, drop; the schema of `sim --log`), after a first line with the wall-clock time of `t_ns` 0. Written off the data plane: events it cannot keep up with are counted (`dummynet stats`), not waited for' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l capture-in -d 'Write what entered the emulator here (pcap, nanosecond stamps: the kernel\'s receive time), each frame cut to --capture-snaplen bytes' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l capture-out -d 'Write what left the emulator here (pcap, nanosecond stamps: when it was released), each frame cut to --capture-snaplen bytes' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l capture-snaplen -d 'Bytes of each frame the captures keep (the data plane copies only those)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l mm-log -d 'Write a mahimahi link log of one pipe here (what mm-link\'s --uplink-log writes, for mm-throughput-graph and mm-delay-graph): `# base timestamp: T` (the start, ms since the Unix epoch), then `T + BYTES` for a packet entering the pipe, `T - BYTES DELAY` for one leaving it (DELAY in ms since it entered), `T # BYTES` for a delivery opportunity of a trace-driven pipe; T in ms' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l mm-log-pipe -d 'The pipe --mm-log follows (default: the first pipe the configuration makes)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -l join -d 'Put this shell\'s link in the emulator already running behind SOCKET (another `dummynet shell`\'s, or `dummynet run --bridge`\'s) instead of starting one: its own pipes and rules, created with the shell and removed when it ends or dies, so many links cost one data plane. Super-packets are split (as --gso off) unless --gso on' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -s v -l verbose -d 'Print each pipe\'s configuration in full at start, as `pipe show` does (by default: one line per pipe)'
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -s q -l quiet -d 'Print nothing but errors and warnings: no configuration at start, no report at the end'
complete -c dummynet -n "__fish_dummynet_using_subcommand shell" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dummynet -n "__fish_dummynet_using_subcommand experiment" -s o -l out -d 'The directory the runs\' directories go in (made if need be)' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand experiment" -l dry-run -d 'Read the file and list its runs, run nothing'
complete -c dummynet -n "__fish_dummynet_using_subcommand experiment" -l svg-only -d 'Figures as SVG only (a PNG takes seconds to rasterise, and needs a font on this system)'
complete -c dummynet -n "__fish_dummynet_using_subcommand experiment" -l check -d 'Exit 1 when one of the file\'s `assert` checks fails on a run (they are evaluated, printed and written to summary.json either way)'
complete -c dummynet -n "__fish_dummynet_using_subcommand experiment" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dummynet -n "__fish_dummynet_using_subcommand flood" -l seconds -d 'How long to send, in seconds (at most 60)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand flood" -l size -d 'Frame size in bytes, Ethernet header included, without FCS (60..=1514)' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand flood" -l rate -d 'Frames per second; 0 sends as fast as the socket takes them' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand flood" -l dst-mac -d 'Destination MAC address' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand flood" -l src -d 'Source and destination IPv4 addresses of the UDP flow' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand flood" -l dst -r
complete -c dummynet -n "__fish_dummynet_using_subcommand flood" -l flows -d 'Number of UDP flows (1..=65535): the source port cycles from 1024 over this many values, frame by frame, so that a `mask src-port` makes this many dynamic queues' -r
complete -c dummynet -n "__fish_dummynet_using_subcommand flood" -s h -l help -d 'Print help'
complete -c dummynet -n "__fish_dummynet_using_subcommand presets" -l traces -d 'Write the trace presets\' trace files into DIR and name them there in the options (ready for `dummynet shell --up/--down`)' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand presets" -l json -d 'Print them as JSON, with each direction\'s pipe options'
complete -c dummynet -n "__fish_dummynet_using_subcommand presets" -s h -l help -d 'Print help'
complete -c dummynet -n "__fish_dummynet_using_subcommand install" -l dir -d 'Directory for `dummynet`, `ipfw` and `dnctl`; the man pages and completions go under its parent\'s `share/` (/usr/local/share)' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand install" -l tc-shim -d 'Only put a `tc` in DIR that is this binary (a link to it): with DIR first on the PATH, tc\'s netem and tbf qdiscs go to dummynet and the rest to the system\'s tc. With --uninstall, remove that link' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand install" -l uninstall -d 'Remove what `dummynet install --dir DIR` installed instead'
complete -c dummynet -n "__fish_dummynet_using_subcommand install" -s h -l help -d 'Print help'
complete -c dummynet -n "__fish_dummynet_using_subcommand ps" -l json -d 'One JSON object, `{"daemons": [...], "removed_sockets": [...]}`, each daemon with pid, mode (kind: bridge with interfaces, host with queue, shell with command), netns (inode, and name, pid, path when known), socket, http, started (Unix seconds), uptime_s, version, start_ticks and pid_ns; each removed socket with path and pid'
complete -c dummynet -n "__fish_dummynet_using_subcommand ps" -s h -l help -d 'Print help'
complete -c dummynet -n "__fish_dummynet_using_subcommand stats" -l socket -d 'The daemon\'s control socket (default: $DUMMYNET_SOCKET or /run/dummynet.sock)' -r -F
complete -c dummynet -n "__fish_dummynet_using_subcommand stats" -l json -d 'One JSON object instead of text (its field names: the book, "Live", `stats --json`)'
complete -c dummynet -n "__fish_dummynet_using_subcommand stats" -s h -l help -d 'Print help'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "sim" -d 'Replay captures through an ipfw/dummynet configuration on virtual time'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "plot" -d 'Draw throughput, delay, queue and drops from an event log (sim --log)'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "gen" -d 'Write synthetic constant-rate traffic to a pcap file'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "gen-trace" -d 'Write a synthetic mahimahi trace (delivery opportunities, one millisecond per line) for `pipe N config trace FILE`'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "bench" -d 'Measure the engine\'s packet rate on synthetic traffic'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "demo" -d 'Two namespaces, the emulator between them with a preset (LTE by default), measured by built-in probes: configured vs measured'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "run" -d 'Run the live emulator: bridge two interfaces or shape this host'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "shell" -d 'Run a command behind an emulated link, in its own network namespace'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "experiment" -d 'Run an experiment file (TOML): flows through a shell\'s link, measured'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "flood" -d 'Send a bounded flood of UDP frames out of an interface (live benchmarks)'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "presets" -d 'List the built-in link presets (the typical-links table of the FreeBSD dummynet article, browser and mobile test tools\' profiles, lossy and traced links)'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "install" -d 'Copy this binary to a directory on the PATH with `ipfw` and `dnctl` links, and its man pages and shell completions beside it'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "ps" -d 'List the dummynet daemons on this machine and what each shapes: PID, mode, network namespace, control socket, HTTP address, uptime'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "stats" -d 'Counters and release lateness (p50/p99/max) of a running daemon'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "ipfw" -d 'Send an ipfw command to a running daemon (`dummynet ipfw pipe 1 show`)'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "dnctl" -d 'Send a dnctl command to a running daemon (`dummynet dnctl pipe show`)'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "tc" -d 'tc(8)\'s netem, tbf and fq_codel qdiscs, carried out by dummynet'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and not __fish_seen_subcommand_from sim plot gen gen-trace bench demo run shell experiment flood presets install ps stats ipfw dnctl tc help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and __fish_seen_subcommand_from gen-trace" -f -a "constant" -d 'The same rate throughout'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and __fish_seen_subcommand_from gen-trace" -f -a "walk" -d 'Cellular-like: a mean-reverting random walk of the rate in log space, clipped to MIN..MAX, with optional outages'
complete -c dummynet -n "__fish_dummynet_using_subcommand help; and __fish_seen_subcommand_from gen-trace" -f -a "onoff" -d 'Wi-Fi-like: bursts at RATE separated by silences'
