"""Recipe for the digits CNN test model (torch is imported only here, and only for tests/benchmarks).

The net is small on purpose but covers the layer kinds edgec must handle: a depthwise conv, grouped convs with
g=2 and g=4, BatchNorm (one left standalone after a residual Add, since the exporter folds Conv+BN pairs), ReLU and
ReLU6 (Clip), max pooling, global average pooling and a final Linear (Gemm).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SEED = 0
EPOCHS = 40


def _net():
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.g2 = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, groups=2, bias=False), nn.BatchNorm2d(32), nn.ReLU())
            self.g4 = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, groups=4, bias=False), nn.BatchNorm2d(32))
            self.post = nn.BatchNorm2d(32)  # after the Add: stays a standalone BatchNormalization node

        def forward(self, x):
            return self.post(x + self.g4(self.g2(x))).relu()

    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),  # depthwise
        nn.Conv2d(16, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        Block(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, groups=4), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(64, 10),
    )


def load_split():
    """Deterministic 80/20 split of sklearn's bundled digits, pixels scaled to [0, 1]."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    order = np.random.default_rng(SEED).permutation(len(y))
    n_test = 360
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def train_and_export(model_path: Path, data_path: Path) -> float:
    """Train, check >= 95% held-out accuracy, export ONNX (opset 17) and the held-out .npz; returns accuracy."""
    import torch

    from edgec.errors import EdgecError
    from edgec.files import atomic_path

    torch.manual_seed(SEED)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    xtr, ytr, xte, yte = load_split()
    net = _net()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, EPOCHS)
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    gen = torch.Generator().manual_seed(SEED)
    for _ in range(EPOCHS):
        net.train()
        for idx in torch.randperm(len(yt), generator=gen).split(64):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xt[idx]), yt[idx]).backward()
            opt.step()
        sched.step()
    net.eval()
    with torch.no_grad():
        acc = float((net(torch.from_numpy(xte)).argmax(1).numpy() == yte).mean())
    if acc < 0.95:
        raise EdgecError(f"digits CNN reached only {acc:.3f} held-out accuracy (needs >= 0.95)")
    with atomic_path(model_path, suffix=".onnx") as tmp:
        torch.onnx.export(net, torch.zeros(1, 1, 8, 8), str(tmp), dynamo=False, opset_version=17,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    with atomic_path(data_path, suffix=".npz") as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, input=xte, labels=yte)
    return acc
