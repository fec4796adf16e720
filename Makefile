# bulkmove: build, test, benchmark, demo. See README.md.
GO ?= go
BIN := bin/bulkmove

.PHONY: build test test-short race fuzz bench bench-cutover bench-scale bench-slowfs bench-speed soak demo vet clean

build:
	$(GO) build -o $(BIN) ./cmd/bulkmove

vet:
	$(GO) vet ./...

# The test suite CI runs: unit tests, CLI scripts, the real-sshd tests
# (skipped with a message when sshd is missing outside CI), and the race
# detector on the packages with worker pools.
test: vet
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race ./sharder/... ./stream/... ./journal/... ./internal/ratelimit/... ./internal/hashidx/... ./internal/spill/...

# A short fuzz of the extractor, the frame decoders and the escaping of
# names for terminals.
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzReceive -fuzztime=60s ./stream/extract
	$(GO) test -run='^$$' -fuzz=FuzzDecodeManifest -fuzztime=30s ./stream/wire
	$(GO) test -run='^$$' -fuzz=FuzzReadFrame -fuzztime=20s ./stream/wire
	$(GO) test -run='^$$' -fuzz=FuzzEscape -fuzztime=20s ./internal/termsafe

# Benchmarks against cp, tar and rsync on a tmpfs (needs root). See bench/run.sh;
# then trees on a slow filesystem (bench-slowfs), then issue 7's speed table
# over the rig (bench-speed).
bench: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/run.sh
	BULKMOVE=$(CURDIR)/$(BIN) bench/slowfs.sh
	BULKMOVE=$(CURDIR)/$(BIN) bench/speed.sh
	BULKMOVE=$(CURDIR)/$(BIN) bench/cutover.sh
	BULKMOVE=$(CURDIR)/$(BIN) bench/scale.sh

# Trees on a filesystem with 1 ms per metadata operation (the rig's slowfs,
# standing in for NFS or Lustre), source then destination, locally and over
# the rig's direct SSH link: bulkmove against one tar and 32 hand-split tars.
# See bench/slowfs.sh.
bench-slowfs: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/slowfs.sh

# Issue 7's speed table over the rig (root; it restarts the rig as each regime
# needs and restores it uncapped): small and large files on the direct link,
# a 200 Mbit/s link, a 100 ms path, a huge file among small ones; bulkmove
# over SSH and TLS against tar | ssh, tar | nc, tar | zstd | ssh, rsync,
# 6 × tar | ssh, fpsync and an mscp-style split, with ratios and PASS/FAIL
# against the issue's targets. SPEED_SCALE=small tries it in seconds; see
# bench/speed.sh.
bench-speed: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/speed.sh

# Peak RSS of the sender and of the agents on a tree of 10 million empty
# files (SCALE_N; root: it mounts a tmpfs with enough inodes, about 12 GiB
# of RAM for the two trees). See bench/scale.sh.
bench-scale: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/scale.sh

# 20 pushes over a real sshd through a fault proxy, faults injected at
# random (seeded) points, each resumed until it succeeds, then compared.
soak: build
	BULKMOVE_SOAK_RUNS=20 $(GO) test -count=1 -run TestSoak -v ./cmd/bulkmove

# Incremental passes and verify against rsync over the rig's direct link
# (the rig must be up). See bench/cutover.sh.
bench-cutover: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/cutover.sh

# Generate a sample tree of 100,000 small files and a mixed tree, move them
# with 4 streams, and check the copies.
DEMO ?= $(shell [ -d /dev/shm ] && echo /dev/shm/bulkmove-demo || echo /tmp/bulkmove-demo)
demo: build
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(GO) run ./bench/gentree -kind small -n 100000 -o $(DEMO)/small
	$(GO) run ./bench/gentree -kind mixed -n 20000 -o $(DEMO)/mixed
	$(BIN) -j 4 $(DEMO)/small $(DEMO)/small-copy
	$(BIN) -j 4 $(DEMO)/mixed $(DEMO)/mixed-copy
	$(GO) run ./bench/treecmp $(DEMO)/small $(DEMO)/small-copy
	$(GO) run ./bench/treecmp $(DEMO)/mixed $(DEMO)/mixed-copy
	@echo "demo: both copies are identical to their sources"

clean:
	rm -rf bin
