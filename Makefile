# bulkmove: build, test, benchmark, demo. See README.md.
GO ?= go
BIN := bin/bulkmove

.PHONY: build install cross vet lint test test-slurm test-short race fuzz bench bench-cpu bench-cutover bench-scale bench-slowfs bench-speed bench-r2r bench-delta soak demo man clean

# The source revision, for `bulkmove version` and bulkmove_build_info,
# given by -X where the go command does not stamp one itself (a git
# worktree, GOFLAGS=-buildvcs=false); "-dirty" when the checkout has
# changes. Packagers may set VERSION (and REVISION) the same way.
REVISION ?= $(shell r=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null || r=$$r-dirty; echo $$r; })
VERSION ?=
BUILDINFO := github.com/bulkmove/bulkmove/internal/buildinfo
LDFLAGS := $(if $(REVISION),-X $(BUILDINFO).revision=$(REVISION)) $(if $(VERSION),-X $(BUILDINFO).version=$(VERSION))

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/bulkmove

# The binary, the man page and the bash, zsh and fish completions, under
# $(DESTDIR)$(PREFIX).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
install: build
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(MANDIR)/man1' '$(DESTDIR)$(BASHCOMPDIR)' '$(DESTDIR)$(ZSHCOMPDIR)' '$(DESTDIR)$(FISHCOMPDIR)'
	install -m 0755 $(BIN) '$(DESTDIR)$(BINDIR)/bulkmove'
	install -m 0644 docs/bulkmove.1 '$(DESTDIR)$(MANDIR)/man1/bulkmove.1'
	$(BIN) completion bash > '$(DESTDIR)$(BASHCOMPDIR)/bulkmove'
	$(BIN) completion zsh > '$(DESTDIR)$(ZSHCOMPDIR)/_bulkmove'
	$(BIN) completion fish > '$(DESTDIR)$(FISHCOMPDIR)/bulkmove.fish'

# deploy/k8stest is a module of its own (the Kubernetes libraries stay out
# of bulkmove's go.mod): ./... leaves it out, so it is named here.
vet:
	$(GO) vet ./...
	cd deploy/k8stest && $(GO) vet ./...

# vet, and every Go file formatted as gofmt writes it.
lint: vet
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt -w these files:"; echo "$$unformatted"; exit 1; fi

# The test suite CI runs: unit tests, CLI scripts, the real-sshd tests
# (skipped with a message when sshd is missing outside CI), and the race
# detector on the packages with worker pools. -timeout: the CLI package's
# real sshd and tmux end-to-end tests run for minutes on two cores, near go
# test's default 10.
test: lint cross
	$(GO) test -count=1 -timeout 25m ./...
	cd deploy/k8stest && $(GO) test -count=1 ./...
	$(MAKE) race

# The sending side on the other systems it runs on: every package builds
# (the receiving side refuses there, exit 4), and the sending packages
# and their portable tests pass vet.
CROSS ?= darwin/arm64 freebsd/amd64
CROSS_VET := ./sharder/... ./send/... ./transport/... ./filter/... ./wire/... ./model/... ./internal/dirat/... ./internal/holes/... ./internal/xattrs/... ./internal/buildinfo/...
cross:
	@set -e; for p in $(CROSS); do \
		echo "cross: $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build ./...; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet $(CROSS_VET); \
	done

# The packages with worker pools, under the race detector, on a memory
# filesystem where there is one with room (/dev/shm, 2 GiB free): the plain
# run above keeps its files in TMPDIR (a disk, usually), so both ways a
# small file's calls are made (internal/dirat) are tested. Like /tmp, it is
# 1777: the tests' unprivileged "attacker" users must reach their files.
race:
	@if [ "$$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $$4 }')" -gt 2097152 ] 2>/dev/null; then \
		tmp=$$(mktemp -d /dev/shm/bulkmove-race.XXXXXX); else tmp=$$(mktemp -d); fi; \
	chmod 1777 "$$tmp"; trap 'rm -rf "$$tmp"' EXIT; echo "race: TMPDIR=$$tmp"; \
	TMPDIR=$$tmp $(GO) test -count=1 -timeout 25m -race ./sharder/... ./send/... ./receive/... ./wire/... ./transport/... ./journal/... ./internal/ratelimit/... ./internal/hashidx/... ./internal/spill/...

# The Slurm job array of deploy/slurm on a one-node cluster the test starts
# (root; Debian's munge, slurmctld, slurmd and slurm-client): an array of
# 4, its final pass and verify, a failed task rerun alone, scancel of a
# running task. About two minutes; .ci/run runs it after `make test`. See
# deploy/README.md.
test-slurm:
	BULKMOVE_SLURM=1 $(GO) test -count=1 -run '^TestSlurmCluster$$' -v ./deploy/

# The fast tests: -short skips the large trees, the floods and the timed
# runs.
test-short:
	$(GO) test -count=1 -short ./...

# Every fuzz target of the repository (each func Fuzz* in a _test.go),
# FUZZTIME each: a new target is fuzzed without being listed here.
FUZZTIME ?= 20s
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "fuzz $$t in $$(dirname $$f) for $(FUZZTIME)"; \
			$(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) ./$$(dirname $$f); \
		done; \
	done

# Benchmarks against cp, tar and rsync on a tmpfs (needs root). See bench/run.sh;
# then trees on a slow filesystem (bench-slowfs), the speed table over the
# rig (bench-speed), incremental passes (bench-cutover) and a tree of
# millions of files (bench-scale), remote to remote (bench-r2r) and changed
# large files (bench-delta).
bench: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/run.sh
	BULKMOVE=$(CURDIR)/$(BIN) bench/slowfs.sh
	BULKMOVE=$(CURDIR)/$(BIN) bench/speed.sh
	BULKMOVE=$(CURDIR)/$(BIN) bench/cutover.sh
	BULKMOVE=$(CURDIR)/$(BIN) bench/scale.sh
	BULKMOVE=$(CURDIR)/$(BIN) bench/r2r.sh
	BULKMOVE=$(CURDIR)/$(BIN) bench/delta.sh

# Trees on a filesystem with 1 ms per metadata operation (the rig's slowfs,
# standing in for NFS or Lustre), source then destination, locally and over
# the rig's direct SSH link: bulkmove against one tar and 32 hand-split tars.
# Remote to remote from a control host: three network namespaces of its
# own, each with an sshd; the control host's traffic and the time against
# a push run on box1 (needs root). See bench/r2r.sh.
bench-r2r: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/r2r.sh

# Changed large files (root): two network namespaces of its own, box2 with
# an sshd; 1 GiB of random bytes, 1% changed in 16 runs at random offsets,
# over a 200 Mbit/s link: bulkmove's delta against its resend
# (--whole-file), rsync -a --inplace, rsync -a and raw TCP (nc); the same
# file grown by 10 MiB; 8 images of 256 MiB, 1% changed, uncapped, against
# rsync -a. Bytes on the wire (the kernel's count), wall time, CPU-s,
# medians of an interleaved run, PASS/FAIL against the targets. Knobs:
# DELTA_RUNS (5), DELTA_PARTS (big grow images), DELTA_SIZE (1GiB),
# DELTA_RATE (200mbit), DELTA_IMAGES (8), DELTA_IMAGE_SIZE (256MiB),
# DELTA_DIR (/mnt/x, a tmpfs), DELTA_OUT (/tmp/bench-delta: report.md,
# runs.tsv, logs), DELTA_BM_FLAGS (more bulkmove flags, e.g. --split-size
# 2GiB). See bench/delta.sh.
bench-delta: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/delta.sh

# See bench/slowfs.sh.
bench-slowfs: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/slowfs.sh

# The speed table over the rig (root; it restarts the rig as each regime
# needs and restores it uncapped): small and large files on the direct link,
# a 200 Mbit/s link over three trees (mixed, half random and half text,
# random), a 100 ms path (measured first with 8 raw TCP streams, the
# ceiling bulkmove is judged against), a huge file among small ones;
# bulkmove over SSH and TLS against tar | ssh, tar | nc, tar | zstd | ssh,
# rsync, 6 × tar | ssh, fpsync and an mscp-style split, with each row's
# whole-machine CPU-s, ratios and PASS/FAIL against the targets.
# SPEED_SCALE=small tries it in seconds; see bench/speed.sh.
bench-speed: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/speed.sh

# CPU-seconds per file between two hosts of its own (root; network
# namespaces, box2 with an sshd of its own): 100,000 × 1 KiB, bulkmove over SSH, TLS and TCP
# (--no-verify-transfer) against tar | ssh, tar | nc and rsync -a in one
# interleaved run; medians of wall s and whole-machine busy CPU-s
# (/proc/stat), ratios and PASS/FAIL against the CPU targets, the
# per-process split (process accounting, package acct) and a pprof profile
# of each end of one bulkmove run (`go tool pprof -top` beside it). Knobs:
# CPU_N (100000 files), CPU_RUNS (5 rounds), CPU_METHODS, CPU_WARMUP (1),
# CPU_DIR (/mnt/x/bench, a tmpfs), CPU_OUT
# (/tmp/bench-cpu: report.md, runs.tsv, profiles, logs), CPU_PROFILE (1).
# CPU_MILLION=1: instead, 1,000 dirs × 1,000 files of 100 bytes over SSH,
# CPU_MILLION_RUNS (10) runs of bulkmove interleaved with tar | ssh: median,
# slowest and slowest ÷ median (target ≤ 1.25), the slow runs' -v logs kept.
# See bench/cpu.sh.
bench-cpu: build
	BULKMOVE=$(CURDIR)/$(BIN) bench/cpu.sh

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

# docs/bulkmove.1 and docs/flags.md from the flag definitions (TestManPage
# and TestFlagsDoc fail when they are stale).
man:
	$(GO) test ./cmd/bulkmove -run '^(TestManPage|TestFlagsDoc)$$' -count=1 -update-man

clean:
	rm -rf bin
