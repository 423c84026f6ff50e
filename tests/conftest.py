"""Shared fixtures: the real models every test suite uses (fetched or trained once, then cached)."""

from __future__ import annotations

import pytest

from edgec import zoo


@pytest.fixture(scope="session")
def ppocr_cls():
    return zoo.ppocr_cls()


@pytest.fixture(scope="session")
def digits_cnn():
    pytest.importorskip("torch", reason="the digits CNN is trained with torch==2.13.0 (pip install -e '.[test]')")
    return zoo.digits_cnn()


@pytest.fixture(scope="session")
def onnx_light():
    return zoo.onnx_light
