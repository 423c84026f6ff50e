"""A real OpenSSH sshd on 127.0.0.1 with throwaway keys, and an isolated edgec config.

The sshd runs for the whole test session on a free port and is stopped by its PID.
Tests get HOME and EDGEC_CONFIG_DIR pointing into tmp_path, so the user's own
~/.ssh and inventory are never read or written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from devkit import SSHD, SshServer, free_port


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    if not os.path.exists(SSHD) or not shutil.which("ssh-keygen"):
        pytest.skip("OpenSSH sshd not installed (apt-get install openssh-server)")
    d = tmp_path_factory.mktemp("sshd")
    _keygen(d / "hostkey")
    _keygen(d / "clientkey")
    shutil.copy(d / "clientkey.pub", d / "authorized_keys")
    os.chmod(d / "authorized_keys", 0o600)
    os.makedirs("/run/sshd", exist_ok=True)
    port = free_port()
    cfg = d / "sshd_config"
    cfg.write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {d}/hostkey
PidFile {d}/sshd.pid
AuthorizedKeysFile {d}/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
MaxStartups 50
MaxSessions 50
Subsystem sftp internal-sftp
""")
    subprocess.run([SSHD, "-t", "-f", str(cfg)], check=True)
    host_pub = " ".join((d / "hostkey.pub").read_text().split()[:2])
    server = SshServer(d, port, d / "clientkey", host_pub, cfg)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory) -> Path:
    """Local builds are content-keyed, so tests can share them (each make takes seconds)."""
    return tmp_path_factory.mktemp("edgec-cache")


@pytest.fixture
def edgec_env(tmp_path, monkeypatch, build_cache):
    """Isolated HOME, config dir and cwd; no ssh-agent; a build cache shared by the session."""
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(build_cache))
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    cfg = tmp_path / "cfg"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("EDGEC_CONFIG_DIR", str(cfg))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


@pytest.fixture
def board(sshd, edgec_env):
    """Inventory entry `board` (profile x86-avx2) on the loopback sshd, host key trusted."""
    from edgec.devices.inventory import Inventory, device_from_profile

    cfg = edgec_env / "cfg"
    cfg.mkdir(exist_ok=True)
    (cfg / "known_hosts").write_text(sshd.known_hosts_line())
    dev = device_from_profile("board", "x86-avx2", host="127.0.0.1", port=sshd.port, user="root",
                              identity_file=str(sshd.client_key), workdir=str(edgec_env / "remote"), timeout=5)
    Inventory().add(dev)
    return dev


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> "Path":
    """A small elementwise model (Mul+Relu, Add, Tanh) that the code generator compiles today."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    scale = numpy_helper.from_array(rng.standard_normal((1, 4, 6, 6)).astype(np.float32), "scale")
    shift = numpy_helper.from_array(rng.standard_normal((1, 4, 6, 6)).astype(np.float32), "shift")
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "scale"], ["a"], name="mul 1"),
         helper.make_node("Relu", ["a"], ["b"], name="relu; 1"),
         helper.make_node("Add", ["b", "shift"], ["c"], name="add $(id)"),
         helper.make_node("Tanh", ["c"], ["y"], name="tanh")],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], [scale, shift])
    path = tmp_path_factory.mktemp("models") / "tiny model.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


@pytest.fixture
def emu_board(sshd, board):
    """An emulated Raspberry Pi 4 over SSH: aarch64 binaries run through qemu-aarch64 -cpu cortex-a72."""
    from edgec.devices.inventory import Inventory, device_from_profile

    if not (shutil.which("qemu-aarch64") and shutil.which("aarch64-linux-gnu-gcc")):
        pytest.skip("needs qemu-user and gcc-aarch64-linux-gnu")
    dev = device_from_profile("emu-pi4", "pi4", host="127.0.0.1", port=sshd.port, user="root",
                              identity_file=str(sshd.client_key), workdir=board.workdir + "-emu", timeout=5,
                              exec_wrapper=["qemu-aarch64", "-cpu", "cortex-a72"])
    Inventory().add(dev)
    return dev


@pytest.fixture(scope="session")
def conv_model(tmp_path_factory) -> "Path":
    """A small CNN: 3x3 conv + ReLU, strided depthwise 3x3 + ReLU, pointwise conv, global average pool."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)

    def w(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [w("W1", (8, 3, 3, 3)), w("B1", (8,)), w("W2", (8, 1, 3, 3)), w("B2", (8,)), w("W3", (16, 8, 1, 1)),
             w("B3", (16,))]
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1], group=8, strides=[2, 2],
                              name="dw2"),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("Conv", ["r2", "W3", "B3"], ["c3"], name="pw3"),
             helper.make_node("GlobalAveragePool", ["c3"], ["y"], name="gap")]
    g = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 17, 15])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 1, 1])], inits)
    path = tmp_path_factory.mktemp("models") / "convnet.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path
