"""Boards: inventory, transports (SSH or local), deploy, bench.

    from edgec.devices import Inventory, open_transport
    from edgec.devices.deploy import deploy
    from edgec.devices.bench import bench

    dev = Inventory().get("local")
    with open_transport(dev) as t:
        report = bench(deploy("model.onnx", dev, t), runs=50)
    print(report["median_ms"])
"""

from edgec.devices.inventory import Device, Inventory, device_from_profile, profile_names
from edgec.devices.transport import RunResult, Transport, open_transport

__all__ = ["Device", "Inventory", "device_from_profile", "profile_names", "RunResult", "Transport",
           "open_transport"]
