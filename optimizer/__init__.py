"""The optimizer: a pipeline of named passes (fuse -> prune -> quantize) over ONNX, checked with onnxruntime.

Library entry points (the `edgec optimize` / `edgec eval` commands are thin layers over these):

    from edgec.optimizer import load_config, optimize, evaluate, load_dataset
    cfg = load_config("edgec.yaml", {"quantize": "int8", "calib": "calib.npz"})
    report = optimize("model.onnx", "model.int8.onnx", cfg)
"""

from edgec.optimizer.config import OptimizeConfig, load_config
from edgec.optimizer.data import Dataset, load_dataset
from edgec.optimizer.evaluate import evaluate
from edgec.optimizer.pipeline import optimize

__all__ = ["Dataset", "OptimizeConfig", "evaluate", "load_config", "load_dataset", "optimize"]
