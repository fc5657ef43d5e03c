#!/usr/bin/env python3
"""Writes hand-built seeds for the engine_sequence target into
seeds/engine_sequence: sequences that reach deep states at once (queues
full under overload, AQMs dropping, states, schedulers, scheduled steps,
reconfiguration with packets inside), which random bytes reach slowly.

The bytes follow the target's Arbitrary layout (arbitrary 1.5): a
`Vec<Step>` taken from the rest of the input is, per step, a byte with the
low bit set ("one more"), then the `Step` variant as a little-endian u32
scaled to the 6 variants, then its fields in order (u8: 1 byte, u16: 2
bytes little-endian, bool: low bit of 1 byte). Commands are picked from
dummynet_fuzz::TEMPLATES by their text, read from src/lib.rs.

    cd fuzz && python3 engine_sequence_seeds.py
"""
import os, re, struct
here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, 'src/lib.rs')).read()
block = src[src.index('pub const TEMPLATES'):]
block = block[:block.index('];')]
T = re.findall(r'^\s*"(.*)",\s*$', block, re.M)
def idx(t):
    return T.index(t)
D = lambda k: b'\x01' + struct.pack('<I', k * 715827883)
def cmd(t, a=1, b=1000): return D(0) + bytes([idx(t), a]) + struct.pack('<H', b)
def pkt(src=0, dst=0, proto=1, port=0, ln=1000, out=True, iface=0, tos=0):
    return D(2) + bytes([src, dst, proto, port]) + struct.pack('<H', ln) + bytes([1 if out else 0, iface, tos])
def adv(value, scale): return D(3) + struct.pack('<H', value) + bytes([scale])
POLL = D(4); WAKE = D(5)
def flood(n, flows=8, ln=1400, out=True, tos=0, proto=1):
    return b''.join(pkt(src=i % flows, dst=(i // flows) % 8, proto=proto, port=i % 8, ln=ln, out=out, tos=tos) for i in range(n))
def drain(k): return b''.join(adv(100, 4) + POLL for _ in range(k)) + WAKE * 4
seeds = {
  # A shaped, delayed pipe under a flood, drained in steps.
  'pipe-bw-delay-flood': cmd("pipe {a} config bw {b}Kbit/s delay {a}ms", 1, 500) + cmd("add {a} pipe {a} ip from any to any out") + flood(60) + drain(20),
  # fq_codel under overload long enough for CoDel to drop and ECN-mark.
  'fq-codel-overload': cmd("pipe {a} config bw {b}Kbit/s", 1, 200) + cmd("sched {a} config pipe {a} type fq_codel target {a}ms quantum {b} flows {a}", 1, 1514) + cmd("queue {a} config sched {a} weight {b} mask all", 1, 10) + cmd("add {a} queue {a} ip from any to any") + flood(80, tos=2) + drain(30) + flood(40, tos=1) + drain(30),
  # RED and GRED with a small queue, overflowing.
  'red-gred-small-queue': cmd("pipe {a} config bw {b}Kbit/s red 0.1/{a}/{b}/0.2", 1, 100) + cmd("pipe {a} config bw {b}Kbit/s gred 0.1/{a}/{b}/0.2", 2, 100) + cmd("add {a} pipe {a} ip from any to any out", 1) + cmd("add {a} pipe {a} ip from any to any in", 2) + flood(50) + flood(50, out=False) + drain(20),
  # Stateful rules: keep-state, check-state and per-source limits.
  'keep-state-limits': cmd("sysctl net.inet.ip.fw.dyn_max={a}", 4) + cmd("add {a} check-state", 1) + cmd("add {a} allow ip from any to any keep-state limit src-addr {a}", 2) + cmd("add {a} allow tcp from any to any setup keep-state", 3) + flood(40, proto=0) + flood(40, proto=1) + adv(60000, 5) + POLL + flood(10),
  # Every impairment on one delayed pipe: loss, duplication, corruption, reordering, jitter.
  'impairments': cmd("pipe {a} config delay {b}ms jitter {a}ms correlation 25% distribution normal", 1, 20) + cmd("pipe {a} config loss {a}% {b}%", 2, 30) + cmd("pipe {a} config duplicate {a}%", 3) + cmd("pipe {a} config corrupt {a}%", 4) + cmd("pipe {a} config delay {a}ms reorder {b}% 50%", 5, 10) + cmd("pipe {a} config loss gemodel {a}% {b}%", 6, 40) + b''.join(cmd("add {a} pipe {a} ip from any to any", a) for a in range(1, 7)) + flood(60) + drain(40),
  # Scheduled changes (at) crossed by time, with traffic in flight.
  'scheduled-steps': cmd("pipe {a} config bw {b}Kbit/s delay {a}ms", 1, 1000) + cmd("add {a} pipe {a} ip from any to any") + cmd("at {a}ms pipe {a} config bw {b}Kbit/s", 5, 50) + cmd("at {a}s pipe {a} delete", 2) + flood(30) + adv(3000, 3) + POLL + flood(30) + drain(30) + adv(3000, 6) + WAKE,
  # Weighted schedulers: QFQ, WF2Q+, priority, with several queues.
  'weighted-schedulers': cmd("pipe {a} config bw {b}Kbit/s", 1, 300) + cmd("sched {a} config pipe {a} type qfq", 1) + cmd("pipe {a} config bw {b}Kbit/s", 2, 300) + cmd("sched {a} config pipe {a} type prio", 2) + cmd("queue {a} config sched {a} weight {b} mask all", 1, 5) + cmd("queue {a} config sched {a} priority {a}", 2) + cmd("queue {a} config sched {a} weight {b} mask all", 3, 50) + cmd("add {a} queue {a} udp from any to any dst-port {b}", 1, 80) + cmd("add {a} queue {a} ip from any to any", 2) + cmd("add {a} queue {a} ip from any to any", 3) + flood(64) + drain(30),
  # Table lookups with tablearg, tags, skipto, call/return.
  'tables-tags-calls': cmd("table {a} create type number", 1) + cmd("table {a} add {a} {a}", 1) + cmd("table {a} add {b} {a}", 1, 80) + cmd("pipe {a} config bw {b}Kbit/s", 1, 800) + cmd("add {a} pipe tablearg ip from any to any lookup dst-port {a}", 1) + cmd("add {a} tag {a} ip from any to any", 2) + cmd("add {a} pipe {a} ip from any to any tagged {a}", 3) + cmd("add {a} call {b} ip from any to any", 4, 6) + cmd("add {a} return ip from any to any", 6) + cmd("add {a} skipto {b} ip from any to any", 5, 7) + flood(40) + drain(20),
  # Reconfiguration while packets are inside: modify, delete, flush.
  'reconfigure-while-full': cmd("pipe {a} config bw {b}Kbit/s queue {b}Kbytes", 1, 100) + cmd("add {a} pipe {a} ip from any to any") + flood(40) + cmd("pipe {a} modify bw {b}Kbit/s", 1, 5000) + adv(500, 4) + POLL + cmd("pipe {a} modify delay {a}ms", 1) + flood(20) + cmd("pipe {a} delete", 1) + flood(10) + cmd("pipe flush") + cmd("flush") + drain(10),
  # Slotted (WiFi-like) and bursty links with per-flow masks.
  'slots-bursts-masks': cmd("pipe {a} config bw {b}Kbit/s slot {a}ms {b}ms packets {a}", 1, 40) + cmd("pipe {a} config bw {b}Kbit/s burst {b}", 2, 3000) + cmd("pipe {a} config bw {b}Kbit/s mask all buckets {a}", 3, 2000) + cmd("add {a} pipe {a} ip from any to any out", 1) + cmd("add {a} pipe {a} ip from any to any in", 2) + cmd("add {a} pipe {a} ip6 from any to any", 3) + flood(40) + flood(40, out=False) + drain(40),
}
out = os.path.join(here, 'seeds/engine_sequence')
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    open(os.path.join(out, name), 'wb').write(data)
    print(name, len(data))
