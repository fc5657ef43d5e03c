#!/usr/bin/env python3
"""deploy/ tried with a real container runtime, on one machine.

Kubernetes is not here, but what the DaemonSet asks of a node is: this
script builds the image of deploy/Containerfile and runs the container of
deploy/dummynet-daemonset.yaml with podman, the way a kubelet would run it,
in a network namespace that stands in for the node.

1. The image. The Containerfile's first stage builds the release tarball
   from a Rust image on a registry; here that stage is given instead
   (`--build-context build=DIR`) as a directory holding what its RUN leaves
   in /out, from the tarball (or a static binary) built on this machine. The final stage,
   the one that ships, is built from the Containerfile as written.
2. The image's own checks: the entrypoint answers `--version`, the `ipfw`
   and `dnctl` links are the same program.
3. The DaemonSet, read from the manifest, not restated here: the
   container's args, its volume mounts (the Secret and the ConfigMap become
   read-only files, hostPath volumes the node's own directories),
   `privileged`, `hostNetwork` (the node namespace), `hostPID` and the
   liveness probe's command.
4. What the manifest promises, checked from outside the container:
   - the HTTP API on the node's port refuses a request without the token
     (401) and lists the ConfigMap's rules with it;
   - the liveness probe's command succeeds;
   - `dummynet ps` on the node lists the daemon (its /run/dummynet is the
     container's);
   - TCP to port 5201 across the node's link runs at the ConfigMap's pipe 1
     (10 Mbit/s) with both pipes' delay (40 ms RTT), and ping is untouched
     (--default-allow);
   - stopping the container stops the daemon, which takes its record and
     its nftables table away.

Network: two namespaces this script creates (`dnd-PID-node`, `dnd-PID-peer`,
joined by a veth, TEST-NET-1 addresses) and loopback; both are deleted,
with the container and podman's private storage, even when a check fails.
Every wait and every transfer is bounded.

Usage (as root; needs podman, iperf3, ping, ip, and python3's yaml):
    scripts/test-deploy.py [--tarball PATH | --binary PATH | --release]
CI gives --tarball, the release tarball scripts/release.sh made: the image
then holds its bin/, the stripped release build users get. Without
--tarball or --binary it builds one: `cargo build --locked --target
x86_64-unknown-linux-musl -p dummynet --bin dummynet` (with --release, the
Containerfile's own profile; without, a debug build, quicker, the same
program). Exit status 0 when every check passed, 1 otherwise.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    import yaml
except ImportError:
    sys.exit("test-deploy: python3's yaml module is missing (apt-get install python3-yaml, or pip install pyyaml)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTAINERFILE = os.path.join(ROOT, "deploy", "Containerfile")
MANIFEST = os.path.join(ROOT, "deploy", "dummynet-daemonset.yaml")
MUSL = "x86_64-unknown-linux-musl"

NODE_ADDR, PEER_ADDR = "192.0.2.1", "192.0.2.2"
TAG = f"dnd-{os.getpid()}"
IMAGE = f"localhost/{TAG}:test"


def say(msg):
    print(f"test-deploy: {msg}", flush=True)


class CheckFailed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise CheckFailed(what)
    say(f"ok: {what}")


def run(argv, limit=60, ok=True, **kw):
    """Runs argv to completion within `limit` seconds; its output."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=limit, **kw)
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"{' '.join(argv)}: still running after {limit} s")
    if ok and p.returncode != 0:
        raise CheckFailed(f"{' '.join(argv)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    return p


class Podman:
    """podman on storage of this run's own, so nothing of the machine's
    images or containers is read or touched, and all of it goes at the end.
    runc rather than crun: crun refuses cgroups mounted in hybrid mode."""

    def __init__(self, scratch):
        self.base = ["podman", "--root", f"{scratch}/root", "--runroot", f"{scratch}/run",
                     "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs",
                     "--events-backend", "none"]
        if shutil.which("runc"):
            self.base += ["--runtime", shutil.which("runc")]

    def __call__(self, *args, limit=120, ok=True):
        return run(self.base + list(args), limit=limit, ok=ok)

    def clean(self):
        for args in (["rm", "--all", "--force", "--time", "0"], ["system", "reset", "--force"]):
            subprocess.run(self.base + args, capture_output=True, timeout=120)


def build_binary(release):
    argv = ["cargo", "build", "--locked", "--target", MUSL, "-p", "dummynet", "--bin", "dummynet"]
    if release:
        argv.append("--release")
    say(" ".join(argv))
    subprocess.run(argv, cwd=ROOT, check=True, timeout=3600)
    return os.path.join(ROOT, "target", MUSL, "release" if release else "debug", "dummynet")


def stage_dir(scratch, binary=None, tarball=None):
    """What the Containerfile's build stage leaves in /out: the binary, its
    ipfw and dnctl links, and an empty /run/dummynet; from the release
    tarball's bin/ as the stage takes them, or from a binary."""
    stage = os.path.join(scratch, "stage")
    bin_dir = os.path.join(stage, "out", "bin")
    os.makedirs(os.path.join(stage, "out", "run", "dummynet"))
    if tarball is not None:
        unpacked = os.path.join(scratch, "unpacked")
        os.makedirs(unpacked)
        run(["tar", "-C", unpacked, "-xzf", tarball])
        (top,) = os.listdir(unpacked)
        shutil.copytree(os.path.join(unpacked, top, "bin"), bin_dir, symlinks=True)
        check(sorted(os.listdir(bin_dir)) == ["dnctl", "dummynet", "ipfw"],
              f"the tarball's bin/ holds dummynet and its links: {sorted(os.listdir(bin_dir))}")
        return stage
    os.makedirs(bin_dir)
    shutil.copy2(binary, os.path.join(bin_dir, "dummynet"))
    for name in ("ipfw", "dnctl"):
        os.symlink("dummynet", os.path.join(bin_dir, name))
    return stage


def read_manifest():
    docs = [d for d in yaml.safe_load_all(open(MANIFEST)) if d]
    by_kind = {d["kind"]: d for d in docs}
    return by_kind["ConfigMap"], by_kind["DaemonSet"]


def volume_flags(scratch, pod, container, configmap, token):
    """podman -v flags for the container's volumeMounts, as the kubelet
    would mount them: a Secret's items and a ConfigMap's data as files in a
    directory, a hostPath as the node's own directory."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    flags = []
    for m in container["volumeMounts"]:
        v = volumes[m["name"]]
        if "secret" in v:
            src = os.path.join(scratch, "vol-" + m["name"])
            os.makedirs(src)
            for item in v["secret"]["items"]:
                assert item["key"] == "token", f"the Secret holds a token, not {item['key']}"
                with open(os.path.join(src, item["path"]), "w") as f:
                    f.write(token)
        elif "configMap" in v:
            assert v["configMap"]["name"] == configmap["metadata"]["name"]
            src = os.path.join(scratch, "vol-" + m["name"])
            os.makedirs(src)
            for key, text in configmap["data"].items():
                with open(os.path.join(src, key), "w") as f:
                    f.write(text)
        elif "hostPath" in v:
            src = v["hostPath"]["path"]
            if v["hostPath"].get("type") == "DirectoryOrCreate":
                os.makedirs(src, exist_ok=True)
        else:
            raise CheckFailed(f"volume {m['name']}: a kind this script does not know")
        opts = []
        if m.get("readOnly"):
            opts.append("ro")
        if m.get("mountPropagation") == "HostToContainer":
            opts.append("rslave")
        flags += ["-v", f"{src}:{m['mountPath']}" + (":" + ",".join(opts) if opts else "")]
    return flags


def http_get(url, token=None, limit=5):
    """(status, body) of GET url from the peer's namespace: off the node's
    loopback, where the API asks for its token."""
    code = (
        "import sys, urllib.request, urllib.error\n"
        "req = urllib.request.Request(sys.argv[1])\n"
        "if len(sys.argv) > 2: req.add_header('Authorization', 'Bearer ' + sys.argv[2])\n"
        "try:\n"
        "    r = urllib.request.urlopen(req, timeout=3); print(r.status); print(r.read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code); print(e.read().decode())\n"
    )
    argv = ["ip", "netns", "exec", f"{TAG}-peer", sys.executable, "-c", code, url]
    if token:
        argv.append(token)
    out = run(argv, limit=limit, ok=False).stdout
    status, _, body = out.partition("\n")
    return (int(status) if status.strip().isdigit() else None), body


def wait_for(what, test, limit=15):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        got = test()
        if got:
            return got
        time.sleep(0.2)
    raise CheckFailed(f"{what}: not within {limit} s")


def ping_ms(count=5):
    out = run(["ip", "netns", "exec", f"{TAG}-node", "ping", "-c", str(count), "-i", "0.1",
               "-W", "1", PEER_ADDR], limit=10).stdout
    rtts = [float(l.split("time=")[1].split()[0]) for l in out.splitlines() if "time=" in l]
    if len(rtts) != count:
        raise CheckFailed(f"ping node → peer: {len(rtts)} of {count} replies\n{out}")
    return min(rtts)


def refused_connect_ms(port):
    """How long a TCP connect() from the node to the peer's `port`, where
    nothing listens, takes to be refused (ms)."""
    code = (
        "import socket, sys, time\n"
        "s = socket.socket(); s.settimeout(3); t = time.monotonic()\n"
        "try:\n"
        "    s.connect((sys.argv[1], int(sys.argv[2]))); print('connected')\n"
        "except ConnectionRefusedError:\n"
        "    print((time.monotonic() - t) * 1000)\n"
    )
    out = run(["ip", "netns", "exec", f"{TAG}-node", sys.executable, "-c", code, PEER_ADDR,
               str(port)], limit=10).stdout.strip()
    try:
        return float(out)
    except ValueError:
        raise CheckFailed(f"connect to {PEER_ADDR}:{port}: {out!r}, not refused")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tarball", help="the release tarball (scripts/release.sh) whose bin/ goes in the image, "
                    "as the Containerfile's build stage takes it (what CI does)")
    ap.add_argument("--binary", help="a static dummynet to put in the image (default: build one)")
    ap.add_argument("--release", action="store_true", help="build it with the release profile")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("test-deploy: needs root (podman's privileged container, network namespaces)")
    missing = [t for t in ("podman", "iperf3", "ping", "ip") if not shutil.which(t)]
    if missing:
        sys.exit(f"test-deploy: not installed: {', '.join(missing)}")

    binary = None if args.tarball else args.binary or build_binary(args.release)
    configmap, ds = read_manifest()
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    scratch = tempfile.mkdtemp(prefix=TAG + "-")
    podman = Podman(scratch)
    node, peer = f"{TAG}-node", f"{TAG}-peer"
    name = f"{TAG}-ds"
    iperf = None
    try:
        # 1-2. The image.
        empty = os.path.join(scratch, "context")
        os.makedirs(empty)
        stage = stage_dir(scratch, binary, args.tarball)
        # The node's own `dummynet ps` below runs the image's binary.
        binary = os.path.join(stage, "out", "bin", "dummynet")
        podman("build", "--quiet", "--tag", IMAGE, "--file", CONTAINERFILE,
               "--build-context", f"build={stage}", empty, limit=300)
        size = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout.strip())
        say(f"the image: {size} bytes")
        limits = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
        version = podman("run", "--rm", *limits, "--network", "none", IMAGE, "--version").stdout
        check(version.startswith("dummynet "), f"the image's entrypoint: {version.strip()!r}")
        for tool in ("ipfw", "dnctl"):
            p = podman("run", "--rm", *limits, "--network", "none", "--entrypoint",
                       f"/usr/local/bin/{tool}", IMAGE, "show", ok=False)
            check(p.returncode != 0 and "/run/dummynet.sock" in p.stderr,
                  f"{tool} in the image is the client, asking for a daemon: {p.stderr.strip()!r}")

        # 3. The node and a peer beyond its link.
        for ns in (node, peer):
            run(["ip", "netns", "add", ns])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "-n", node, "link", "add", "n0", "type", "veth", "peer", "name", "p0",
             "netns", peer])
        for ns, dev, addr in ((node, "n0", NODE_ADDR), (peer, "p0", PEER_ADDR)):
            run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
            run(["ip", "-n", ns, "link", "set", dev, "up"])
        base_ping = ping_ms()

        check(pod.get("hostNetwork") is True and pod.get("hostPID") is True,
              "the DaemonSet runs in the node's network and PID namespaces")
        check(container["securityContext"].get("privileged") is True, "the container is privileged")
        token = os.urandom(16).hex()
        flags = ["--detach", "--name", name, "--privileged", "--network", f"ns:/run/netns/{node}",
                 "--pid", "host", *limits]
        flags += volume_flags(scratch, pod, container, configmap, token)
        podman("run", *flags, IMAGE, *container["args"])
        say(f"podman run {' '.join(flags)} {IMAGE} {' '.join(container['args'])}")

        # 4. What the manifest promises.
        (port,) = [p["hostPort"] for p in container["ports"] if p["name"] == "http"]
        url = f"http://{NODE_ADDR}:{port}/v1/rules"

        def api_up():
            state = podman("inspect", "--format", "{{.State.Running}}", name).stdout.strip()
            if state != "true":
                logs = podman("logs", name, ok=False)
                raise CheckFailed(f"the container stopped:\n{logs.stdout}{logs.stderr}")
            return http_get(url)[0]

        status = wait_for("the HTTP API on the node's port", api_up)
        check(status == 401, f"GET /v1/rules without the token from another host: {status}")
        status, body = http_get(url, "not-" + token)
        check(status == 401, f"GET /v1/rules with a wrong token: {status}")
        status, body = http_get(url, token)
        rules = json.loads(body) if status == 200 else None
        numbers = sorted(r.get("number") for r in (rules or {}).get("rules", []))
        want = sorted(int(l.split()[1]) for l in configmap["data"]["ipfw.conf"].splitlines()
                      if l.startswith("add "))
        check(status == 200 and numbers[: len(want)] == want,
              f"GET /v1/rules with the token lists the ConfigMap's rules {want}: {status} {numbers}")

        probe = container["livenessProbe"]["exec"]["command"]
        check(podman("exec", name, *probe, ok=False).returncode == 0,
              f"the liveness probe ({' '.join(probe)}) succeeds")

        ps = json.loads(run([binary, "ps", "--json"]).stdout)
        sock = container["args"][container["args"].index("--socket") + 1]
        mine = [d for d in ps["daemons"] if d.get("socket") == sock]
        check(len(mine) == 1 and mine[0]["mode"]["kind"] == "host",
              f"dummynet ps on the node lists the container's daemon: {mine}")
        daemon_pid = mine[0]["pid"]

        # Nothing listens on the peer's port 5201 yet: a connect() there is
        # refused after one round trip, the SYN through pipe 1 and the RST
        # back through pipe 2.
        connect_ms = min(refused_connect_ms(5201) for _ in range(3))
        check(40.0 <= connect_ms <= 42.5,
              f"a TCP connect to port 5201 takes both pipes' 20 ms: {connect_ms:.2f} ms")
        shaped_ping = ping_ms()
        check(shaped_ping < base_ping + 2.0,
              f"ping is not shaped (--default-allow): {shaped_ping:.2f} ms, {base_ping:.2f} before")
        iperf = subprocess.Popen(["ip", "netns", "exec", peer, "iperf3", "-s", "-1", "-p", "5201"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        out = run(["ip", "netns", "exec", node, "iperf3", "-c", PEER_ADDR, "-p", "5201", "-t", "5",
                   "-J"], limit=30).stdout
        result = json.loads(out)
        bps = result["end"]["sum_received"]["bits_per_second"]
        check(8.5e6 <= bps <= 10.1e6,
              f"TCP to port 5201 runs at pipe 1's 10 Mbit/s: {bps / 1e6:.2f} Mbit/s")
        # iperf3's RTTs are the kernel's smoothed ones: 40 ms and the queue
        # TCP fills in pipe 1 (at most its 50 slots, 60 ms at 10 Mbit/s).
        srtt_ms = result["end"]["streams"][0]["sender"].get("min_rtt", 0) / 1000
        check(40.0 <= srtt_ms <= 105.0,
              f"the transfer's smoothed RTT is 40 ms and pipe 1's queue: least {srtt_ms:.1f} ms")

        podman("stop", "--time", "10", name, limit=30)
        gone = not os.path.exists(f"/run/dummynet/daemons/{daemon_pid}.json")
        check(gone, "the daemon's record went with the container")
        tables = run(["ip", "netns", "exec", node, "nft", "list", "tables"], ok=False).stdout \
            if shutil.which("nft") else ""
        check("dummynet" not in tables, f"no dummynet nftables table is left in the node: {tables!r}")
        say("every check passed")
        return 0
    except CheckFailed as e:
        say(f"FAILED: {e}")
        logs = podman("logs", name, ok=False, limit=10)
        if logs.stdout or logs.stderr:
            say(f"the container's output:\n{logs.stdout}{logs.stderr}")
        return 1
    finally:
        if iperf:
            iperf.kill()
        podman.clean()
        for ns in (node, peer):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
