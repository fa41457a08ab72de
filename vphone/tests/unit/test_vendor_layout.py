"""The phone's /vendor tree holds every OpenCL library its profile ships, each as its loader needs:
a dlsym library stands for the host's ICD loader, the Pixel wrapper is the wrapper with an ICD
copy behind it. The host files are stand-ins here (no native build, no ocl-icd needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vphone.layout import PIXEL_WRAPPER_IMPL, StateLayout, prepare_vendor
from vphone.profiles import load_profile
from vphone.testing.hypothetical import wrapper_only_pixel

WRAPPER_BYTES = b"the pixel wrapper"
ICD_BYTES = b"the host's ICD loader"


@pytest.fixture
def host_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    host = tmp_path / "host"
    host.mkdir()
    (host / "libOpenCL-pixel.so").write_bytes(WRAPPER_BYTES)
    (host / "libOpenCL.so.1").write_bytes(ICD_BYTES)
    monkeypatch.setattr("vphone.layout.native_binary", lambda name: host / name)
    monkeypatch.setattr("vphone.layout.host_libopencl", lambda: str(host / "libOpenCL.so.1"))
    return host


def test_a_pixel7_has_libopencl_so_and_the_wrapper_in_vendor_lib64(host_files: Path, tmp_path: Path) -> None:
    lay = StateLayout(tmp_path / "phone")
    prepare_vendor(load_profile("pixel7"), lay)
    lib64 = lay.vendor / "lib64"
    assert (lib64 / "libOpenCL.so").is_symlink()
    assert (lib64 / "libOpenCL.so").read_bytes() == ICD_BYTES
    assert not (lib64 / "libOpenCL-pixel.so").is_symlink()
    assert (lib64 / "libOpenCL-pixel.so").read_bytes() == WRAPPER_BYTES
    assert (lay.vendor / PIXEL_WRAPPER_IMPL.removeprefix("/vendor/")).read_bytes() == ICD_BYTES


def test_a_wrapper_only_device_has_no_libopencl_so(host_files: Path, tmp_path: Path) -> None:
    lay = StateLayout(tmp_path / "phone")
    prepare_vendor(load_profile(str(wrapper_only_pixel(tmp_path))), lay)
    lib64 = lay.vendor / "lib64"
    assert sorted(p.name for p in lib64.iterdir()) == ["libOpenCL-pixel.so", "vphone"]
    assert (lib64 / "libOpenCL-pixel.so").read_bytes() == WRAPPER_BYTES


def test_a_phone_without_opencl_has_an_empty_vendor_lib64(host_files: Path, tmp_path: Path) -> None:
    lay = StateLayout(tmp_path / "phone")
    prepare_vendor(load_profile("no-opencl"), lay)
    assert list((lay.vendor / "lib64").iterdir()) == []
