# Provenant: every target first runs scripts/setup (Debian packages and .venv),
# which is quick once done, so each target works from a fresh clone.
#
#   make test          build, all tests, doc tests, the book
#   make demo          run and replay the reference recipes on the default store
#   make bench-verify  prov verify vs b3sum over a 2.2 GB store
#   make bench-train   a training step in tch vs transformers' ApertusForCausalLM, and checkpoint cost
#   make bench-serve   the workbench's pages of the main job under 50 concurrent clients vs a static server
#   make book          build the book into book/build
#   make clippy        lints, warnings as errors

# Tests that need the real shared data read it from here.
PROV_SHARED_DATA ?= $(abspath ../shared/data)
export PROV_SHARED_DATA

# Python tools (mdbook, pyarrow, torch) come from the project's .venv.
export PATH := $(CURDIR)/.venv/bin:$(PATH)

CARGO ?= cargo

.PHONY: all setup test demo bench-verify bench-memory bench-train bench-serve book clippy release

all: test

setup:
	scripts/setup

# Binaries and test targets in one build. Built alone, the binaries lack the features that
# the dev-dependencies add (to getrandom, for one), and the test build then compiled
# parquet, arrow, tokenizers, resvg and every prov crate a second time: about 300 s of a
# CI run.
# Tests run in one slot more than there are cores: the Slurm end-to-end test spends most of
# its 400 s waiting on the scheduler (a 2-core machine is 80-95% idle while it runs alone),
# and the extra slot lets the other tests use that time.
test: setup
	$(CARGO) fmt --all --check
	$(CARGO) build --workspace --bins --tests --locked
	if $(CARGO) nextest --version >/dev/null 2>&1; then \
		$(CARGO) nextest run --workspace --locked --no-fail-fast --test-threads $$(( $$(nproc) + 1 )); \
	else \
		$(CARGO) test --workspace --locked --no-fail-fast; \
	fi
	$(CARGO) test --doc --workspace --locked
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	if [ -f book/book.toml ]; then .venv/bin/mdbook build book; fi

release: setup
	$(CARGO) build --release --locked -p prov-cli

demo: release
	scripts/demo

bench-verify: release
	scripts/bench-verify

bench-memory: release
	scripts/bench-memory

bench-serve: release
	scripts/bench-serve

bench-train: release
	$(CARGO) build --release --locked -p prov-worker --example bench_step
	BENCH_EXAMPLE=target/release/examples/bench_step scripts/bench-train

book: setup
	.venv/bin/mdbook build book

clippy: setup
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
