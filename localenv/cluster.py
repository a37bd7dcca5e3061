"""A real local Kubernetes control plane without containers.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from Go modules (see
``hack/testenv.sh``), kwok faking two nodes and the Pod lifecycle, and the fake kubelet of
``localenv.kubelet`` for what kwok cannot do (readiness gates, running prefetch Jobs, binding
PVCs). Must run inside the private network namespace of ``hack/in-netns.sh``: every address
here is loopback or in the namespace-local Pod network 100.72.0.0/16.

Several clusters can run side by side in one namespace (``localenv.multicluster``): each takes
a ``ClusterSlot``, which gives it its own ports and its own share of the Pod network.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from localenv import identities, kwok_stages, pki
from localenv.paths import ensure_binaries, python_tool
from localenv.processes import ManagedProcess, wait_until

# The simulated Pod network: a local route in the test namespace (hack/in-netns.sh).
POD_NETWORK = "100.72.0.0/16"
NODE_IP = "100.72.0.1"
# Service ClusterIPs are never connected to (no kube-proxy here); keep them out of the
# private ranges all the same.
SERVICE_NETWORK = "100.96.0.0/16"
# Every listener of the default cluster (slot 0). Another slot adds its PORT_STRIDE multiple.
API_PORT = 6443
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
CONTROLLER_MANAGER_PORT = 10257
SCHEDULER_PORT = 10259
KWOK_PORT = 10247
LISTENERS = {
    "kube-apiserver": API_PORT,
    "etcd-client": ETCD_CLIENT_PORT,
    "etcd-peer": ETCD_PEER_PORT,
    "kube-controller-manager": CONTROLLER_MANAGER_PORT,
    "kube-scheduler": SCHEDULER_PORT,
    "kwok": KWOK_PORT,
}
# Several clusters share one network namespace (issue 25: a hub and a production cluster).
# Slot k moves each port up by k * PORT_STRIDE (100 keeps every slot's ports clear of the next
# slot's and of Temporal, the simulators and the codec server) and its Pod network to the k-th
# /18 of POD_NETWORK, so the namespace's one local route serves every slot and no two slots
# hand out the same Pod IP.
PORT_STRIDE = 100
# 2 ** (18 - 16) = 4 slots of 64 /24s each: room for the largest fleet benchmark's nodes.
SLOT_PREFIX = 18
MAX_SLOTS = 2 ** (SLOT_PREFIX - ipaddress.ip_network(POD_NETWORK).prefixlen)
# The slot's name goes into node names and the kubeconfig's context: a DNS label.
_SLOT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

MAX_PODS = 250
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@dataclass(frozen=True)
class FakeNode:
    name: str
    pod_cidr: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    gpus: int = 0


DEFAULT_NODES = (
    FakeNode("kwok-cpu-0", "100.72.1.0/24", {"dmrollout.dev/node-class": "cpu"}),
    FakeNode(
        "kwok-gpu-0",
        "100.72.2.0/24",
        {"dmrollout.dev/node-class": "gpu", "nvidia.com/gpu.present": "true"},
        [GPU_TAINT],
        gpus=2,
    ),
)


def _slot_network(index: int) -> ipaddress.IPv4Network:
    subnets = list(ipaddress.IPv4Network(POD_NETWORK).subnets(new_prefix=SLOT_PREFIX))
    return subnets[index]


@dataclass(frozen=True)
class ClusterSlot:
    """Which of the clusters sharing one network namespace a LocalCluster is.

    Slot 0 is the cluster the tests have always had, in every respect (ports, Pod network,
    node names) but the kubeconfig's context name, which is ``dmrollout-<name>``
    (``dmrollout-local`` for the default). Slot ``k`` has every port ``k * PORT_STRIDE`` up,
    its nodes' Pod CIDRs in the k-th /18 of POD_NETWORK and node names prefixed by its name.
    """

    index: int = 0
    name: str = "local"

    def __post_init__(self) -> None:
        if not 0 <= self.index < MAX_SLOTS:
            raise ValueError(f"cluster slot {self.index}: POD_NETWORK has room for {MAX_SLOTS}")
        if not _SLOT_NAME.fullmatch(self.name):
            raise ValueError(f"cluster slot name {self.name!r}: not a DNS label")

    def port(self, default: int) -> int:
        """This slot's port for a listener the default cluster has on ``default``."""
        return default + self.index * PORT_STRIDE

    @property
    def api_port(self) -> int:
        return self.port(API_PORT)

    @property
    def network(self) -> ipaddress.IPv4Network:
        """The slot's share of the Pod network: its nodes' Pod CIDRs must lie in it."""
        return _slot_network(self.index)

    @property
    def kwok_cidr(self) -> str:
        # Slot 0 keeps the whole /16 it always gave kwok (whose fallback when a node has no
        # podCIDR; ours all have one); another slot must not fall back into slot 0's range.
        return POD_NETWORK if self.index == 0 else str(self.network)

    @property
    def node_ip(self) -> str:
        # The slot's first address, outside its nodes' Pod CIDRs as NODE_IP is for slot 0.
        return NODE_IP if self.index == 0 else str(self.network.network_address + 1)

    @property
    def context(self) -> str:
        return f"dmrollout-{self.name}"

    def nodes(self, base: tuple[FakeNode, ...] = DEFAULT_NODES) -> tuple[FakeNode, ...]:
        """``base`` (laid out for slot 0) moved into this slot: CIDRs shifted by whole /18s
        (100.72.1.0/24 becomes 100.72.65.0/24 in slot 1), names prefixed ``<name>-``. Slot 0
        keeps them as they are: tests and benchmarks name ``kwok-gpu-0``."""
        if self.index == 0:
            return base
        return tuple(
            replace(n, name=f"{self.name}-{n.name}", pod_cidr=self._shift(n.pod_cidr)) for n in base
        )

    def _shift(self, cidr: str) -> str:
        net = ipaddress.IPv4Network(cidr)
        if not net.subnet_of(_slot_network(0)):
            raise ValueError(f"{cidr}: outside slot 0's {_slot_network(0)}, cannot be moved")
        offset = int(self.network.network_address) - int(_slot_network(0).network_address)
        return f"{net.network_address + offset}/{net.prefixlen}"


DEFAULT_SLOT = ClusterSlot()

STORAGE_CLASSES = (
    # The default class: expandable, like most CSI classes. The fake kubelet provisions it.
    {"name": "standard", "default": True, "allowVolumeExpansion": True},
    {"name": "fixed", "default": False, "allowVolumeExpansion": False},
)
PROVISIONER = "dmrollout.dev/local-sim"

# Metadata (who, verb, resource, namespace, name, response code; never a body, so no Secret value)
# for dmrollout's ServiceAccounts, nothing for anyone else (the harness, kwok, the control plane):
# the log stays small and every line is evidence about one component. RequestReceived is left
# out (the same request again); ResponseStarted is kept, so a watch shows while it runs.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "userGroups": [f"system:serviceaccounts:{identities.SYSTEM_NAMESPACE}"],
        },
        {"level": "None"},
    ],
}


def in_private_netns() -> bool:
    return os.environ.get("DMROLLOUT_NETNS") == "1"


class LocalCluster:
    """Start/stop the control plane; ``kubectl`` against it with the generated kubeconfig."""

    def __init__(
        self,
        state_dir: Path,
        nodes: tuple[FakeNode, ...] | None = None,
        slot: ClusterSlot = DEFAULT_SLOT,
    ) -> None:
        self.state_dir = state_dir
        self.slot = slot
        # Benchmarks replace ``nodes`` before start() (more CPU nodes); checked there.
        self.nodes = slot.nodes() if nodes is None else nodes
        self.log_dir = state_dir / "logs"
        self.kubeconfig = state_dir / "kubeconfig"
        # The API server's audit log: every request of dmrollout's ServiceAccounts (only those:
        # see AUDIT_POLICY), the evidence tests/e2e/controller/test_rbac_evidence.py compares
        # the shipped RBAC with.
        self.audit_log = state_dir / "audit" / "audit.log"
        self.processes: list[ManagedProcess] = []
        self._pki: pki.Pki | None = None
        self._tls_ctx: ssl.SSLContext | None = None
        self._tls_for: pki.Pki | None = None
        self.start_seconds: float | None = None

    @property
    def api_port(self) -> int:
        return self.slot.api_port

    @property
    def server(self) -> str:
        """The API server's URL, as the kubeconfig has it."""
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def ports(self) -> dict[str, int]:
        """Every port this cluster's processes listen on, by listener (LISTENERS)."""
        return {name: self.slot.port(port) for name, port in LISTENERS.items()}

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> LocalCluster:
        if not in_private_netns():
            raise RuntimeError(
                "the local cluster runs only inside its private network namespace: "
                "run through hack/in-netns.sh (make test / make demo do)"
            )
        self._check_nodes()
        began = time.monotonic()
        bins = ensure_binaries()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._pki = pki.generate(
            self.state_dir / "pki",
            hosts=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
            ips=["127.0.0.1", "100.96.0.1"],
            ca_name=f"{self.slot.context}-ca",
        )
        self._write_kubeconfig()
        self._start_etcd(bins)
        self._start_apiserver(bins)
        self._start_controller_manager(bins)
        self._start_scheduler(bins)
        self._start_kwok(bins)
        self._create_nodes()
        self._create_storage_classes()
        self._wait_for_default_service_account()
        self.start_seconds = time.monotonic() - began
        return self

    def _check_nodes(self) -> None:
        # Pod IPs outside the namespace's local route would be unreachable, and Pod IPs in
        # another slot's range would be served as that cluster's Pods by the runtime simulator.
        allowed = ipaddress.IPv4Network(self.slot.kwok_cidr)
        for n in self.nodes:
            if not ipaddress.IPv4Network(n.pod_cidr).subnet_of(allowed):
                raise ValueError(f"node {n.name}: podCIDR {n.pod_cidr} outside {allowed}")

    def stop(self) -> None:
        for p in reversed(self.processes):
            p.stop()
        self.processes.clear()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def process(self, name: str) -> ManagedProcess:
        return next(p for p in self.processes if p.name == name)

    # -- the API server alone (chaos: localenv/chaos.py) -------------------------------------
    def stop_apiserver(self) -> None:
        """Stop kube-apiserver only; etcd and every client keep running."""
        self.process("kube-apiserver").stop()

    def start_apiserver(self) -> None:
        """Start kube-apiserver again with the flags it had, on the same port and etcd; return
        once /readyz says ok."""
        p = self.process("kube-apiserver")
        if not p.running():
            p.start()
        wait_until(lambda: self.api_get("/readyz") == "ok", 90, "kube-apiserver /readyz", 0.25, [p])

    # -- clients ---------------------------------------------------------------------------
    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        # A cache of its own: another cluster may have held this host:port before (the
        # discovery cache is keyed by it, and a stale one names resources this one lacks).
        cache = str(self.state_dir / "kube-cache")
        cmd = [python_tool("kubectl"), "--kubeconfig", str(self.kubeconfig), "--cache-dir", cache]
        cmd += args
        result = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise KubectlFailed(result.returncode, cmd, result.stdout, result.stderr)
        return result

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def apply(self, obj: dict[str, Any] | list[dict[str, Any]]) -> None:
        docs = obj if isinstance(obj, list) else [obj]
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def api_get(self, path: str) -> Any:
        """A raw GET with the admin client certificate (readiness checks, and the reads a test
        makes every second or two: a ``kubectl`` process each would cost a tenth of a core)."""
        with urllib.request.urlopen(f"{self.server}{path}", context=self._tls(), timeout=5) as r:
            body = r.read()
        return json.loads(body) if body.startswith(b"{") else body.decode()

    def api_read(self, path: str) -> Any:
        """:meth:`api_get`, or None when the object is not there (404)."""
        try:
            return self.api_get(path)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def _tls(self) -> ssl.SSLContext:
        # Built once per PKI (a restart with a new one builds it again): loading the chain is
        # most of a read's cost.
        pki_now = self._pki
        assert pki_now is not None
        if self._tls_for is not pki_now:
            ctx = ssl.create_default_context(cafile=str(pki_now.ca_cert))
            ctx.load_cert_chain(str(pki_now.admin_cert), str(pki_now.admin_key))
            self._tls_ctx, self._tls_for = ctx, pki_now
        assert self._tls_ctx is not None
        return self._tls_ctx

    def establish_crd(self, path: Path, name: str, timeout: float = 90) -> None:
        """Apply the CRD at ``path`` and wait until ``name`` is Established and its group is
        discovered. ``kubectl wait`` alone exits 1 when discovery is not ready for it yet,
        which a busy host showed right after start-up (a 1,000-wave of ``make bench``)."""
        self.kubectl("apply", "--server-side", "-f", str(path))
        group = name.split(".", 1)[1]

        def established() -> bool:
            crd = self.api_get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = (crd.get("status") or {}).get("conditions") or []
            done = any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
            return done and bool(self.api_get(f"/apis/{group}").get("versions"))

        wait_until(established, timeout, f"CRD {name} established", 0.25)

    def component_kubeconfig(self, account: str) -> Path:
        """A kubeconfig authenticating as dmrollout's ServiceAccount ``account`` (created on
        first use): the identity the controller or the workers have in a cluster."""
        path = self.state_dir / f"kubeconfig-{account}"
        if not path.exists():
            identities.service_account_kubeconfig(self, account, path)
        return path

    # -- components ------------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str]) -> ManagedProcess:
        p = ManagedProcess(name, args, self.log_dir).start()
        self.processes.append(p)
        return p

    def _write_kubeconfig(self) -> None:
        assert self._pki is not None
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": self.slot.context,
                    "cluster": {
                        "server": self.server,
                        "certificate-authority": str(self._pki.ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate": str(self._pki.admin_cert),
                        "client-key": str(self._pki.admin_key),
                    },
                }
            ],
            "contexts": [
                {
                    "name": self.slot.context,
                    "context": {"cluster": self.slot.context, "user": "admin"},
                }
            ],
            "current-context": self.slot.context,
        }
        self.kubeconfig.write_text(yaml.safe_dump(cfg))

    def _start_etcd(self, bins: Path) -> None:
        data = self.state_dir / "etcd"
        shutil.rmtree(data, ignore_errors=True)
        client = self._etcd_url
        peer = f"http://127.0.0.1:{self.slot.port(ETCD_PEER_PORT)}"
        p = self._spawn(
            "etcd",
            [
                str(bins / "etcd"),
                f"--data-dir={data}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                # A throwaway test store: durability of etcd is not what is under test, and
                # fsync on every write dominates API latency on small disks.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        wait_until(
            lambda: urllib.request.urlopen(f"{client}/health", timeout=1).status == 200,
            30,
            "etcd health",
            alive=[p],
        )

    @property
    def _etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.slot.port(ETCD_CLIENT_PORT)}"

    def _start_apiserver(self, bins: Path) -> None:
        assert self._pki is not None
        k = self._pki
        p = self._spawn(
            "kube-apiserver",
            [
                str(bins / "kube-apiserver"),
                f"--etcd-servers={self._etcd_url}",
                f"--secure-port={self.api_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--tls-cert-file={k.serving_cert}",
                f"--tls-private-key-file={k.serving_key}",
                f"--client-ca-file={k.ca_cert}",
                f"--service-cluster-ip-range={SERVICE_NETWORK}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={k.sa_pub}",
                f"--service-account-signing-key-file={k.sa_key}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                # The endpoint reconciler would publish 127.0.0.1 for the kubernetes Service,
                # which EndpointSlice validation refuses (loopback); nothing here needs it.
                "--endpoint-reconciler-type=none",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                f"--cert-dir={self.state_dir / 'apiserver-certs'}",
                f"--audit-policy-file={self._write_audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                # Synchronous writes: an entry is in the file when the client has its answer.
                "--audit-log-mode=blocking",
                "--audit-log-maxsize=200",
                "-v=1",
            ],
        )
        wait_until(lambda: self.api_get("/readyz") == "ok", 90, "kube-apiserver /readyz", 0.25, [p])

    def _write_audit_policy(self) -> Path:
        self.audit_log.parent.mkdir(parents=True, exist_ok=True)
        policy = self.state_dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        return policy

    def _start_controller_manager(self, bins: Path) -> None:
        assert self._pki is not None
        self._spawn(
            "kube-controller-manager",
            [
                str(bins / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.slot.port(CONTROLLER_MANAGER_PORT)}",
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={self._pki.sa_key}",
                f"--root-ca-file={self._pki.ca_cert}",
                # Nodes carry their podCIDR from creation (kwok allocates Pod IPs from it).
                "--allocate-node-cidrs=false",
                "--controllers=*,-node-ipam-controller",
                # Faster reaction in tests: garbage collection and job/deployment syncs.
                "--concurrent-gc-syncs=5",
                "-v=1",
            ],
        )

    def _start_scheduler(self, bins: Path) -> None:
        self._spawn(
            "kube-scheduler",
            [
                str(bins / "kube-scheduler"),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.slot.port(SCHEDULER_PORT)}",
                "--leader-elect=false",
                "-v=1",
            ],
        )

    def _start_kwok(self, bins: Path) -> None:
        config = self.state_dir / "kwok.yaml"
        config.write_text(
            "apiVersion: config.kwok.x-k8s.io/v1alpha1\n"
            "kind: KwokConfiguration\n"
            "options:\n"
            f"  nodeIP: {self.slot.node_ip}\n"
            f"  cidr: {self.slot.kwok_cidr}\n"
            "  manageNodesWithAnnotationSelector: kwok.x-k8s.io/node=fake\n"
            f"  serverAddress: 127.0.0.1:{self.slot.port(KWOK_PORT)}\n"
            # Explicit: with a config file kwok v0.8.0 leaves these at 0 and refuses to start.
            "  podPlayStageParallelism: 4\n"
            "  nodePlayStageParallelism: 4\n"
            "  nodeLeaseParallelism: 4\n"
            "  podsOnNodeSyncParallelism: 2\n"
            "---\n" + kwok_stages.POD_STAGES + "\n---\n" + kwok_stages.NODE_STAGES
        )
        self._spawn(
            "kwok",
            [
                str(bins / "kwok"),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={config}",
                "--node-lease-duration-seconds=40",
                "-v=INFO",
            ],
        )

    def _create_nodes(self) -> None:
        nodes = []
        for n in self.nodes:
            # Fake nodes: room for every serving Pod's requests (seed 000's per-model defaults,
            # ~3.5 Gi each) in the largest fleet benchmark. Pods: 250, the most a /24 Pod CIDR
            # serves (kubelet's --max-pods is often raised to it); the test session shares one
            # cluster among ~2,300 tests and at 110 the explorer, late in a worker's share,
            # found the CPU node full (its prefetch Pods unschedulable: "Too many pods").
            capacity = {"cpu": "4000", "memory": "64Ti", "pods": str(MAX_PODS)}
            if n.gpus:
                capacity["nvidia.com/gpu"] = str(n.gpus)
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": n.name,
                        "annotations": {"kwok.x-k8s.io/node": "fake"},
                        "labels": {
                            "kubernetes.io/hostname": n.name,
                            "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": "amd64",
                            "type": "kwok",
                            **n.labels,
                        },
                    },
                    "spec": {"podCIDR": n.pod_cidr, "podCIDRs": [n.pod_cidr], "taints": n.taints},
                    "status": {"capacity": capacity, "allocatable": capacity},
                }
            )
        self.apply(nodes)
        # The status in a create request is ignored by the API server: set capacity now (kwok's
        # node-initialize stage keeps an allocatable it finds) and once more after Ready.
        self._patch_node_status(nodes)

        def ready() -> bool:
            items = self.kubectl_json("get", "nodes")["items"]
            ok = [
                i
                for i in items
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in i.get("status", {}).get("conditions", [])
                )
            ]
            return len(ok) == len(self.nodes)

        wait_until(ready, 60, "kwok nodes Ready", 0.25, self.processes)
        self._patch_node_status(nodes)

    def _patch_node_status(self, nodes: list[dict[str, Any]]) -> None:
        for node in nodes:
            self.kubectl(
                "patch", "node", node["metadata"]["name"], "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": node["status"]}),
            )  # fmt: skip

    def _create_storage_classes(self) -> None:
        self.apply(
            [
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {
                        "name": sc["name"],
                        "annotations": {
                            "storageclass.kubernetes.io/is-default-class": str(
                                sc["default"]
                            ).lower()
                        },
                    },
                    "provisioner": PROVISIONER,
                    "allowVolumeExpansion": sc["allowVolumeExpansion"],
                    "reclaimPolicy": "Delete",
                    "volumeBindingMode": "Immediate",
                }
                for sc in STORAGE_CLASSES
            ]
        )

    def _wait_for_default_service_account(self) -> None:
        wait_until(
            lambda: self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0,
            60,
            "the default ServiceAccount (controller-manager up)",
            0.25,
            self.processes,
        )


class KubectlFailed(subprocess.CalledProcessError):
    """A kubectl call that failed, with what kubectl said (CalledProcessError shows only the
    command, so a failure on CI could not be told from another)."""

    def __str__(self) -> str:
        said = (self.stderr or "").strip()[-2000:]
        return f"{super().__str__()}\nkubectl said: {said}"


def main() -> None:  # pragma: no cover - manual use: python -m localenv.cluster
    state = Path(tempfile.mkdtemp(prefix="dmrollout-cluster-"))
    with LocalCluster(state) as c:
        print(f"cluster up in {c.start_seconds:.1f}s; KUBECONFIG={c.kubeconfig}", file=sys.stderr)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":  # pragma: no cover
    main()
