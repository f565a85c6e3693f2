#!/bin/sh
# Replays the fuzz target's seed corpus (the target built without libFuzzer),
# through test/run-test.sh: under valgrind's memcheck in make check-valgrind,
# where a bad read or a leak the replay does not show otherwise fails it.
exec "${SHELL:-/bin/sh}" "${srcdir:-.}/test/run-test.sh" "${top_builddir:-.}/test/fuzz_names" \
  "${srcdir:-.}"/test/fuzz-corpus/*
