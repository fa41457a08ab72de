# farm: the same commands for people and CI.
#   make demo   installs what is missing, starts virtual phones, runs the LSTM-under-GPU-load study,
#               writes the report and prints where it is
#   make test   installs what is missing and runs the whole test suite (unit, integration, e2e)
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
FARM := $(VENV)/bin/farm
ABI ?= $(shell uname -m)
APT_PACKAGES := adb pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo bubblewrap openssh-server \
                iproute2 gcc make libclblast-dev postgresql
# Cross compilers for the ARM device agents (static, no NDK); qemu-user and file to test them here.
APT_PACKAGES += gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf qemu-user-static file
# The virtual phones' userland (mksh, toybox, one-true-awk, a few busybox applets), their seccomp
# helper, and aapt for devlib (a third-party client the tests run against them).
APT_PACKAGES += mksh toybox busybox original-awk libseccomp-dev aapt
# llama.cpp's llama-bench (kernels/llama): cmake, and the ARM64 C++ cross compiler for its static build.
APT_PACKAGES += cmake g++-aarch64-linux-gnu
# A real headless browser to check reports as a reader sees them (figures drawn, PDF print).
APT_PACKAGES += chromium
STAMP := $(VENV)/.farm-setup-stamp

.PHONY: help setup system-packages venv kernels agents llama native test test-unit lint bench demo clean

help:
	@echo "make demo    start virtual phones, run experiments/lstm_gpu_load.yaml (quick), write the report"
	@echo "            (ADB_PORT=N: its private adb server's port, default 5137)"
	@echo "make test    run all tests (installs what is missing first)"
	@echo "make setup   install Debian packages, create .venv, build kernels/ and device_agents/"
	@echo "make lint    ruff + mypy"
	@echo "make bench   benchmarks (printed as tables, saved under results/bench/)"
	@echo "make kernels build the benchmark programs and device agents for this ABI ($(ABI)),"
	@echo "            and the agents for arm64-v8a / armeabi-v7a too (Debian cross gcc, no NDK)"
	@echo "make llama   llama.cpp's llama-bench from PyPI's llama-cpp-python sdist and tiny GGUF models"
	@echo "            (kernels/llama; part of make kernels)"
	@echo "make clean   remove builds, the venv and results"

# Installs only the Debian packages that are missing; needs root (or sudo) only when something is.
system-packages:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(STAMP): pyproject.toml vphone/pyproject.toml
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ./vphone -e '.[dev,clients]'
	@touch $(STAMP)

venv: $(STAMP)

setup: system-packages venv kernels native

# The virtual phone's helpers (confined entry into a phone, the Android tools' client); the
# simulator is its own distribution in vphone/ (vphone/README.md).
native:
	$(MAKE) -C vphone/src/vphone/native

# The device agents and the example external programs (kernels/examples) are plain C: without an
# ABI on the command line they are also cross-built for arm64-v8a and armeabi-v7a with Debian's
# cross gcc (static, no NDK; see device_agents/README.md).
kernels agents:
	$(MAKE) -C kernels ABI=$(ABI)
	$(MAKE) -C device_agents $(if $(filter command line,$(origin ABI)),ABI=$(ABI))
	$(MAKE) -C kernels/examples $(if $(filter command line,$(origin ABI)),ABI=$(ABI))
	$(MAKE) -C kernels/llama $(if $(filter command line,$(origin ABI)),ABI=$(ABI))

# llama.cpp's llama-bench and llama-quantize (host, arm64, host OpenCL) and the generated GGUF
# models; each output is a file target, so a second run builds nothing (kernels/llama/README.md).
llama:
	$(MAKE) -C kernels/llama $(if $(filter command line,$(origin ABI)),ABI=$(ABI))

# Tests wait on phones, runs and timeouts as much as they compute (alone, one file at a time, the
# integration and e2e files take 2079 s for 2113 CPU-seconds on this 2-core machine, some half
# asleep), so three workers (a file each, keeping module fixtures) cut the wall time on 2 cores
# (parallel pass: two workers 1062-1152 s, three 889-986 s; four 975 s, with tests starved past
# their timeouts). Files go out in collection order (--no-loadscope-reorder: e2e first, whose long
# single tests would otherwise start last, as the files with the fewest tests, and end the run
# alone). Tests marked `serial` measure speed or heartbeats against the host's cores and run alone
# afterwards. Both passes always run. The serial pass collects only the files that mark a test
# serial (collecting all of tests/ again costs half a minute of imports); tests/conftest.py refuses
# a serial test whose file does not say so literally.
TEST_WORKERS ?= 3
# A failed integration or e2e test runs once more, and the summary names it with its first
# failure (tests/conftest.py says why); TEST_RERUNS=0 shows every failure at once.
TEST_RERUNS ?= 1
SERIAL_TEST_FILES = $(shell grep -rlE --include='test_*.py' 'pytest\.mark\.serial' tests vphone/tests | sort)
test: setup
	@status=0; export FARM_TEST_RERUNS=$(TEST_RERUNS); \
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not serial" --durations=40 tests vphone/tests || status=$$?; \
	$(PY) -m pytest -q -m serial --durations=5 $(SERIAL_TEST_FILES) || status=$$?; \
	exit $$status

test-unit: venv
	$(PY) -m pytest -q tests/unit vphone/tests/unit

lint: venv
	$(VENV)/bin/ruff check farm tests vphone
	$(VENV)/bin/ruff format --check farm tests vphone
	$(VENV)/bin/mypy

bench: setup
	@mkdir -p results/bench
	@set -e; for f in tests/bench/bench_*.py; do echo "== $$f"; $(PY) $$f; done

# ADB_PORT: the demo's private adb server (make demo ADB_PORT=5240 beside another one)
ADB_PORT ?= 5137
demo: setup
	$(PY) -m farm.demo --adb-port $(ADB_PORT)

clean:
	-$(MAKE) -C kernels clean
	-$(MAKE) -C device_agents clean
	-$(MAKE) -C kernels/examples clean
	-$(MAKE) -C kernels/llama clean
	-$(MAKE) -C vphone/src/vphone/native clean
	rm -rf $(VENV) results .pytest_cache .mypy_cache .ruff_cache *.egg-info
