# The two entry points of the README. Everything else is CMake.
#   make demo   set up, build, compile the example model for sm_90 and run it
#   make test   set up, build, run every test (plus the sanitizer + fuzz build)
JOBS ?= $(shell nproc)
BUILD ?= build
SANBUILD ?= build-san
PY := $(CURDIR)/.venv/bin/python
CMAKE_FLAGS := -DPython3_EXECUTABLE=$(PY)

.PHONY: setup build build-san demo test test-main test-san clean
setup:
	@tools/setup.sh

build: setup
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-san: setup
	@CC=clang-22 CXX=clang++-22 cmake -S . -B $(SANBUILD) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Debug \
	  -DDRK_ASAN=ON -DDRK_UBSAN=ON -DDRK_FUZZ=ON >/dev/null
	@cmake --build $(SANBUILD) -j $(JOBS)

demo: build
	@tools/demo.sh $(BUILD)

test-main: build
	@cd $(BUILD) && DRK_CACHE_DIR=$(CURDIR)/$(BUILD)/kcache ctest --output-on-failure -j $(JOBS)

test-san: build-san
	@cd $(SANBUILD) && DRK_CACHE_DIR=$(CURDIR)/$(SANBUILD)/kcache ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -LE slow

test: test-main test-san

clean:
	rm -rf $(BUILD) $(SANBUILD)
