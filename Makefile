# xdpio — make targets a newcomer needs. Everything installs what it uses.
SHELL := /bin/bash
GO ?= go
# The Debian packages the tests and tools call: the outside oracles
# (iperf3, tcpdump, tshark, ethtool, ip, xdp-tools, bpftool, nft, and
# Prometheus with promtool for contrib/prometheus), the kernel's netlink
# specs (linux-source-6.12, python3-yaml) and rsvg-convert (librsvg2-bin),
# which draws the demo's chart in its test. The demo needs none of them:
# it builds its veth pair and namespaces over netlink and runs no outside
# program (TestDemoStartupLoss runs it with an empty PATH), so make demo
# installs nothing but what go run fetches.
DEB_PKGS := iproute2 iputils-ping ethtool iperf3 tcpdump tshark strace procps python3-yaml linux-source-6.12 xdp-tools bpftool nftables librsvg2-bin prometheus
# The separate modules under contrib/ (adapters for wireguard-go and
# quic-go, Prometheus collectors, so that the core module does not pull
# their dependencies).
CONTRIB := $(sort $(dir $(wildcard contrib/*/go.mod)))

# Every package builds on these systems too (AF_XDP itself is Linux's: the
# rest return ErrNotSupported there).
CROSS := linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64 freebsd/amd64 freebsd/arm64

# staticcheck, at the version the project pins (from the Go module proxy).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Packages with goroutines that share state: run them under the race detector.
RACE_PKGS := ./xsk/... ./xdpnet/... ./netstack/... ./internal/... ./rss/... ./coalesce/... ./nic/... ./examples/... ./cmd/xdpio/...
# bench is left out: its iperf3 interop tests send at fixed rates into iperf3,
# which reads one datagram at a time from a 208 KiB buffer; the race
# detector slows the paced sender into bursts that overflow it. Its engine
# and data planes still run under the detector through cmd/xdpio's tests,
# which serve and dial in the same process.
# cmd/xskbench is left out too: it is a benchmark, whose smoke test runs
# every backend at full speed, which the detector only slows.

.PHONY: all deps build cross vet check test test-race bench seeds demo demo-claim demo-rxdrop lab fmt

all: build

# deps installs the Debian packages the tests and tools call (root, apt) and
# downloads the Go modules. Safe to re-run.
deps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	$(GO) mod download
	@for m in $(CONTRIB); do (cd $$m && $(GO) mod download) || exit 1; done

build:
	$(GO) build ./...

cross:
	@for p in $(CROSS); do echo "go build ($$p)"; GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build ./... || exit 1; done

vet: cross
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@for m in $(CONTRIB); do echo "go vet, staticcheck ($$m)"; (cd $$m && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...) || exit 1; done

# check is the static part: the cross-builds, go vet and staticcheck, of
# the core module and of contrib's. CI runs it next to make test.
check: deps vet

# test runs every test once, the real-kernel ones included (as root), and
# lists every skipped test with its reason (test/gotest; also in
# test-skips.txt): about 10 minutes on a quiet 2-core machine (make check
# and make test-race are apart). Packages run one at a time (-p 1): the
# real-kernel tests send UDP at fixed rates into iperf3 and AF_XDP
# receivers, which must not lose a datagram because another package's
# test binary took both cores.
test: deps
	$(GO) run ./test/gotest -skips test-skips.txt -p 1 -count=1 -timeout 15m ./...
	@for m in $(CONTRIB); do echo "go test ($$m)"; (cd $$m && $(GO) test -p 1 -count=1 -timeout 5m ./...) || exit 1; done

# test-race runs the tests of the packages with goroutines that share
# state, and contrib's, under the race detector: about 7 minutes, most of
# it building the instrumented binaries. CI runs it after make test.
# RACE_SKIP are two tests that compare UDP at fixed rates with iperf3's own
# counts, 16 and 10 runs of iperf3: under the detector they only take
# longer, and the engine paths they take run under it in the other bench
# tests.
RACE_SKIP := ^(TestBenchReceivedUnderLoss|TestBenchJSONLikeIperf3)$$
test-race: deps
	$(GO) test -p 1 -count=1 -race -timeout 10m -skip '$(RACE_SKIP)' $(RACE_PKGS)
	@for m in $(CONTRIB); do echo "go test -race ($$m)"; (cd $$m && $(GO) test -p 1 -count=1 -race -timeout 5m ./...) || exit 1; done

# demo is the main job: `xdpio bench demo` builds its own veth pair in two
# namespaces, runs the iperf3-style UDP test with each data plane at both
# ends, prints the side-by-side table and writes the chart to demo.svg. It
# installs nothing (see DEB_PKGS): go run fetches the modules it builds.
demo:
	$(GO) run ./cmd/xdpio bench demo --plot demo.svg
	@echo "chart: demo.svg"

# demo-claim runs the demo DEMO_RUNS times and rewrites README.md's claim
# (between its demo-claim markers) with the median and range of what
# they measured, printing the sentence before and after. Run it on a
# quiet machine: each run takes about 10 s at full speed on both cores.
DEMO_RUNS ?= 5
demo-claim:
	$(GO) run ./test/democlaim -runs $(DEMO_RUNS) -readme README.md

# demo-rxdrop runs examples/rxdrop on a veth pair in two namespaces it
# creates, fed by an XDP live-frames generator, and accounts for every frame
# sent. The example uses public packages only; its demo is a test harness,
# which may use the module's internal test network and generator.
# DEMO_ARGS are rxdrop's flags (no -i, no -port) and -demo-queues N.
DEMO_ARGS ?= -t 5s
demo-rxdrop:
	$(GO) test -count=1 -v -run '^TestDemo$$' ./examples/rxdrop -args -demo -demo.args='$(DEMO_ARGS)'

bench: deps
	$(GO) run ./cmd/xskbench

# seeds reproduces the four seed patches' experiments (software TSO, RX
# checksum offload, coalescing, RSS) with the real iperf3 against
# `xdpio bench server` on a veth pair of its own, the kernel's TCP and
# gVisor's own AF_XDP endpoint in the same interleaved rounds, and prints
# the table with each variant's median and range and the ratios (test/seeds).
# Root, on a quiet machine: about 10 minutes with the defaults.
SEEDS_ARGS ?= -rounds 5 -t 5 -profile
seeds: deps
	$(GO) run ./test/seeds $(SEEDS_ARGS)

# lab boots a Debian kernel under qemu with netdevsim and a virtio-net RSS NIC
# and runs the lab-tagged tests inside it (test/lab/README.md). Root; installs
# what it needs with apt and caches its kernel build in /var/cache/xdpio-lab.
lab:
	test/lab/run

fmt:
	gofmt -l -w .
