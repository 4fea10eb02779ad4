"""A multi-host test cluster on one machine: Linux network namespaces, each running a real sshd.

Host ``<prefix>-h<i>`` is the namespace of that name, with one interface, ``hvd0``, addressed
198.18.<subnet>.<10+i>/24 (the benchmarking range: never routed, never the machine's own), plugged
into a bridge that lives in its own namespace ``<prefix>-sw``. Nothing is added to the machine's
own namespace. The namespaces share the filesystem, like hosts sharing an NFS home: the same Python
and virtual environment work on every host. ``ip netns exec`` bind-mounts ``/etc/netns/<ns>/*``
over ``/etc``, which gives each host a hosts file naming the cluster and an ssh client configuration
with the cluster's key and known hosts, so a plain ``ssh <prefix>-h1`` works from any host without
touching the machine's ``/etc`` or ``~/.ssh``. Every host has the machine's hostname (the UTS
namespace is not separated), so the cluster's names never mean "this machine".

A killed run leaves namespaces and daemons behind; ``up()`` removes whatever carries its prefix
first, and ``python -m horovod.runner.testing.netns_cluster down --prefix P`` does it by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from horovod.runner.testing import _cleanup, _sshd
from horovod.runner.testing._cleanup import ETC_NETNS, INTERFACE, leftovers, remove_cluster
from horovod.runner.testing._sshd import ClusterError

__all__ = ["INTERFACE", "ClusterError", "NetnsCluster", "leftovers", "remove_cluster", "requirements_missing"]


def requirements_missing() -> str | None:
    """What this machine lacks to run a cluster, or None."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces need Linux (this is {sys.platform})"
    missing = [] if os.geteuid() == 0 else [f"root (network namespaces need it; running as uid {os.geteuid()})"]
    missing += [f"{name} (not in PATH nor /usr/sbin)" for name in ("ip", "ssh", "ssh-keygen") if not _sshd.tool(name)]
    if not os.access(_sshd.SSHD, os.X_OK):
        missing.append(f"{_sshd.SSHD} (Debian: apt-get install openssh-server)")
    try:
        pwd.getpwnam("sshd")
    except KeyError:
        missing.append("the user 'sshd' (sshd's privilege separation user; openssh-server creates it)")
    return "missing: " + "; ".join(missing) if missing else None


class NetnsCluster:
    """``hosts`` hosts named ``<prefix>-h<i>``, on 198.18.<subnet>.0/24 (198.19.* for subnet >= 256).

    Use it as a context manager (``up()`` on entry, ``down()`` on exit). Two clusters can run at
    once when their prefixes differ; a second cluster with the same prefix replaces the first.
    """

    interface = INTERFACE

    def __init__(self, hosts: int = 3, prefix: str = "hvdt", subnet: int = 0, *, base_dir: str | None = None) -> None:
        # Short and plain: names become interface names (15 characters at most) and host names.
        if not re.fullmatch(r"[a-z][a-z0-9]{0,7}", prefix):
            raise ValueError(f"prefix {prefix!r}: 1 to 8 lower-case letters and digits, starting with a letter")
        if not 1 <= hosts <= 200:
            raise ValueError(f"hosts={hosts}: 1 to 200")
        if not 0 <= subnet <= 511:
            raise ValueError(f"subnet={subnet}: 0 to 511 (a /24 of 198.18.0.0/15)")
        self.prefix = prefix
        self.subnet = subnet
        self.hosts = [f"{prefix}-h{i}" for i in range(hosts)]
        self.switch = f"{prefix}-sw"
        self._base_dir = Path(base_dir) if base_dir else _cleanup.BASE_DIR
        self._dir: Path | None = None

    @property
    def dir(self) -> Path:
        """The cluster's private directory (keys, configurations, sshd logs), while it is up."""
        if self._dir is None:
            raise ClusterError(f"the {self.prefix!r} cluster is not up")
        return self._dir

    @property
    def identity_file(self) -> Path:
        """The private key every host accepts for root (ssh inside the cluster uses it already)."""
        return self.dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    def namespace(self, host: str) -> str:
        if host not in self.hosts:
            raise ValueError(f"{host!r} is not a host of this cluster ({', '.join(self.hosts)})")
        return host

    def address(self, host: str) -> str:
        index = self.hosts.index(self.namespace(host))
        return f"198.{18 + self.subnet // 256}.{self.subnet % 256}.{10 + index}"

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """argv, to be run on host (in its namespace, with its /etc/hosts and ssh configuration)."""
        return [_sshd.need("ip"), "netns", "exec", self.namespace(host), *argv]

    def run(
        self, host: str, argv: Sequence[str], *, timeout: float = 60.0, **kwargs: Any
    ) -> subprocess.CompletedProcess[Any]:
        """subprocess.run of argv on host; the timeout is always set (a hang must fail a test)."""
        return subprocess.run(self.command(host, argv), timeout=timeout, **kwargs)

    def processes(self, host: str) -> list[int]:
        """pids running on host other than sshd (its listener and its per-session processes)."""
        nets = _cleanup.net_ids([self.namespace(host)])
        pids = []
        for pid, net, _ in _cleanup.processes():
            if net in nets:
                try:
                    exe = os.readlink(f"/proc/{pid}/exe")
                except FileNotFoundError:
                    continue  # gone since the scan
                if exe != _sshd.SSHD:
                    pids.append(pid)
        return sorted(pids)

    def leftovers(self) -> list[str]:
        """What remains of clusters with this prefix: empty once down() (or a stale clean-up) ran."""
        return leftovers(self.prefix)

    def pause_host(self, host: str) -> None:
        """The host stops answering (its link goes down): ssh to it times out, its peers' sockets stall."""
        _sshd.run([_sshd.need("ip"), "-n", self.namespace(host), "link", "set", INTERFACE, "down"])

    def resume_host(self, host: str) -> None:
        _sshd.run([_sshd.need("ip"), "-n", self.namespace(host), "link", "set", INTERFACE, "up"])

    def stop_sshd(self, host: str) -> None:
        """Stop host's sshd: new ssh connections are refused; sessions already open go on."""
        _sshd.stop(self.dir / self.namespace(host) / "sshd.pid")

    def start_sshd(self, host: str) -> None:
        """Start host's sshd again (after stop_sshd) and wait until it answers (to itself: peers may be paused)."""
        self._start_sshd([self.namespace(host)], across=False)

    @contextlib.contextmanager
    def refusing_keys(self, host: str) -> Iterator[None]:
        """Within: host's sshd accepts no key, so ssh to it fails with "Permission denied (publickey)"."""
        empty = self.dir / host / "no_authorized_keys"
        _sshd.write_private(empty, "")
        self.stop_sshd(host)
        try:
            # The daemon listens before it detaches: no probe (which it would refuse) is needed.
            self._start_sshd([host], authorized_keys=empty, probe=False)
            yield
        finally:
            self.stop_sshd(host)
            self._start_sshd([host], across=False)

    def restore(self) -> None:
        """Undo pause_host and stop_sshd on every host (a shared cluster, after a fault test)."""
        for host in self.hosts:
            self.resume_host(host)
        stopped = [h for h in self.hosts if not _sshd.running(self.dir / h / "sshd.pid")]
        if stopped:
            self._start_sshd(stopped)

    def up(self) -> NetnsCluster:
        """Remove a stale cluster of this prefix, then make the hosts and wait until each answers ssh."""
        missing = requirements_missing()
        if missing:
            raise ClusterError(missing)
        remove_cluster(self.prefix)
        try:
            self._build()
        except BaseException:
            # Half a cluster is worse than none (and a Ctrl-C of the CLI lands here too).
            with contextlib.suppress(ClusterError):
                remove_cluster(self.prefix)
            self._dir = None
            raise
        return self

    def down(self) -> None:
        """Stop every process on the hosts, delete the namespaces and files; raise if any remain."""
        self._dir = None
        remove_cluster(self.prefix)
        remaining = leftovers(self.prefix)
        if remaining:
            raise ClusterError(f"the {self.prefix!r} cluster left behind: " + "; ".join(remaining))

    def __enter__(self) -> NetnsCluster:
        return self.up()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.down()

    def describe(self) -> str:
        """What the command line prints: hosts, addresses and how to use and remove them."""
        lines = [f"{h}  {self.address(h)}  (namespace {h}, interface {INTERFACE})" for h in self.hosts]
        two = self.hosts[:2]
        example = f"horovodrun -np {2 * len(two)} -H {','.join(f'{h}:2' for h in two)} --network-interface {INTERFACE}"
        lines += [
            f"files: {self.dir}   state: {_cleanup.state_file(self.prefix)}",
            "example (the namespaces share this filesystem, so the same Python works on every host):",
            f"  ip netns exec {self.hosts[0]} {example} python train.py",
            f"remove it: python -m horovod.runner.testing.netns_cluster down --prefix {self.prefix}",
        ]
        return "\n".join(lines)

    def _build(self) -> None:
        # sshd's privilege separation directory; Debian makes it only when its own service starts.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self._dir = root = Path(tempfile.mkdtemp(prefix=f"hvd-netns-{self.prefix}-", dir=self._base_dir))
        # Written first, so that whatever a killed set-up leaves is found by the next up() or down.
        hosts = {h: self.address(h) for h in self.hosts}
        state = {"prefix": self.prefix, "subnet": self.subnet, "dir": str(root), "hosts": hosts}
        _cleanup.state_file(self.prefix).write_text(json.dumps(state, indent=1) + "\n")
        for host in self.hosts:
            (root / host).mkdir(mode=0o700)
        _sshd.generate_keys(
            [(self.identity_file, f"{self.prefix} cluster"), *((self._host_key(h), h) for h in self.hosts)]
        )
        _sshd.write_private(root / "authorized_keys", _sshd.public_key(self.identity_file) + "\n")
        known = "".join(f"{h},{self.address(h)} {_sshd.public_key(self._host_key(h))}\n" for h in self.hosts)
        _sshd.write_private(self.known_hosts, known)
        self._network()
        self._etc()
        self._start_sshd(self.hosts)

    def _host_key(self, host: str) -> Path:
        return self.dir / host / "ssh_host_ed25519_key"

    def _network(self) -> None:
        """The namespaces, the switch's bridge and one veth pair per host, made inside namespaces only."""
        ip, root = _sshd.need("ip"), self.dir
        bridge = f"{self.prefix}-br"
        batches: dict[str, list[str]] = {"": [f"netns add {ns}" for ns in [self.switch, *self.hosts]]}
        # No IPv6 link-local addresses (addrgenmode none): the cluster's only addresses are its own.
        switch = [f"link add {bridge} type bridge", f"link set {bridge} addrgenmode none up", "link set lo up"]
        for i, host in enumerate(self.hosts):
            port = f"{self.prefix}-p{i}"
            # Both ends are born in their namespaces: the machine's own never sees them.
            switch += [
                f"link add {port} type veth peer name {INTERFACE} netns {host}",
                f"link set {port} addrgenmode none master {bridge} up",
            ]
            batches[host] = [
                "link set lo up",
                f"link set {INTERFACE} addrgenmode none",
                f"addr add {self.address(host)}/24 dev {INTERFACE}",
                f"link set {INTERFACE} up",
            ]
        batches[self.switch] = switch
        for ns, lines in batches.items():
            (root / f"net-{ns or 'root'}.batch").write_text("\n".join(lines) + "\n")

        def batch(ns: str) -> list[str]:
            return [ip, *(["-n", ns] if ns else []), "-batch", str(root / f"net-{ns or 'root'}.batch")]

        _sshd.run(batch(""))
        _sshd.run(batch(self.switch))  # before the hosts': it makes their hvd0
        _sshd.check_all([batch(h) for h in self.hosts])

    def _etc(self) -> None:
        """/etc/netns/<host>/: the hosts file and the ssh client directory that replace /etc's in there."""
        hosts = "127.0.0.1 localhost\n" + "".join(f"{self.address(h)} {h}\n" for h in self.hosts)
        client = _sshd.ssh_config(known_hosts=self.known_hosts, identity=self.identity_file)
        for host in self.hosts:
            (ETC_NETNS / host / "ssh").mkdir(parents=True, exist_ok=True)
            (ETC_NETNS / host / "hosts").write_text(hosts)
            (ETC_NETNS / host / "ssh" / "ssh_config").write_text(client)

    def _start_sshd(
        self, hosts: Sequence[str], *, across: bool = True, authorized_keys: Path | None = None, probe: bool = True
    ) -> None:
        """Start the hosts' daemons; return once each answers ssh from the next host (across) or itself."""
        configs = []
        for host in hosts:
            config = self.dir / host / "sshd_config"
            text = _sshd.sshd_config(
                address=self.address(host),
                host_key=self._host_key(host),
                authorized_keys=authorized_keys or self.dir / "authorized_keys",
                pid_file=self.dir / host / "sshd.pid",
            )
            _sshd.write_private(config, text)
            configs.append(config)
        prefixes = [self.command(h, []) for h in hosts]
        _sshd.start(prefixes, configs, [self.dir / h / "sshd.log" for h in hosts])
        if not probe:
            return
        ssh = _sshd.need("ssh")
        sources = [self.hosts[(self.hosts.index(h) + 1) % len(self.hosts)] if across else h for h in hosts]
        probes = [
            self.command(s, [ssh, "-o", "ConnectTimeout=2", h, "true"]) for s, h in zip(sources, hosts, strict=True)
        ]
        _sshd.wait_until_answering(probes, [self.dir / h / "sshd.log" for h in hosts])


def cluster_for_tests(hosts: int = 3, prefix: str = "hvdt", subnet: int = 0) -> Iterator[NetnsCluster]:
    """The body of a pytest fixture that yields a cluster, up for the fixture's scope.

    Without root the test skips; as root, a machine that lacks what the cluster needs (ip, sshd,
    ssh-keygen) fails it, saying what is missing. Test sessions that may run at once (two packages'
    tests) give different prefixes and subnets.
    """
    import pytest

    missing = requirements_missing()
    if missing:
        if os.geteuid() != 0:
            pytest.skip(missing)
        pytest.fail(missing)
    with NetnsCluster(hosts=hosts, prefix=prefix, subnet=subnet) as cluster:
        yield cluster


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m horovod.runner.testing.netns_cluster",
        description="A test cluster of network namespaces running sshd, on this machine (root only).",
    )
    actions = parser.add_subparsers(dest="action", required=True)
    up = actions.add_parser("up", help="set the cluster up and leave it running (replacing one of the same prefix)")
    up.add_argument("--hosts", type=int, default=3, help="number of hosts (default 3)")
    up.add_argument("--prefix", default="hvdt", help="host names are PREFIX-h0, PREFIX-h1... (default hvdt)")
    up.add_argument("--subnet", type=int, default=0, help="addresses 198.18.SUBNET.10 and up (default 0)")
    down = actions.add_parser("down", help="stop and remove the cluster")
    down.add_argument("--prefix", default="hvdt", help="the prefix given to up (default hvdt)")
    args = parser.parse_args(argv)
    try:
        if args.action == "up":
            try:
                cluster = NetnsCluster(hosts=args.hosts, prefix=args.prefix, subnet=args.subnet)
            except ValueError as error:
                parser.error(str(error))
            print(cluster.up().describe())
        else:
            missing = requirements_missing()
            if missing:
                raise ClusterError(missing)
            remove_cluster(args.prefix)
            remaining = leftovers(args.prefix)
            if remaining:
                raise ClusterError("left behind: " + "; ".join(remaining))
            print(f"the {args.prefix!r} cluster is down")
    except ClusterError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
