# PRISM explorer: the two commands of the README.
#   make demo   installs what is missing, builds, runs the quickstart sweep under mpirun -n 3
#               and prints its report, then writes its page results/quickstart.html
#   make test   installs what is missing, builds, runs every test (unit, MPI with 1-3 ranks,
#               CLI, Python post-processing)
# Other targets: build, bench, format, format-check, clean.

BUILD      ?= build
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
RANKS      ?= 3
CMAKE_ARGS ?=
PRISM      := $(BUILD)/explorer/prism

DEBIAN_PACKAGES := cmake g++ make pkg-config mpich libmpich-dev libhdf5-dev hdf5-tools \
	libboost-serialization-dev libeigen3-dev libtomlplusplus-dev libgtest-dev libbenchmark-dev \
	libcli11-dev libfmt-dev librandom123-dev libsimdjson-dev nlohmann-json3-dev python3-h5py \
	python3-matplotlib python3-numpy python3-pandas python3-plotly chromium clang-format

.PHONY: deps build demo test bench format format-check clean

deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	    dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	    $$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y $$missing; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	mkdir -p results
	mpirun -n $(RANKS) $(PRISM) sweep configs/quickstart.toml -o results/quickstart.h5 --overwrite
	$(PRISM) report results/quickstart.h5 --top 10
	$(PRISM) report results/quickstart.h5 --html results/quickstart.html
	@echo "the study's page: $(CURDIR)/results/quickstart.html (open it in a browser; it works offline)"

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	bash bench/sweep_timer.sh $(PRISM)

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.cpp' '*.hpp')

clean:
	rm -rf $(BUILD)
