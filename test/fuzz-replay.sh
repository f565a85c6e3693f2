#!/bin/sh
# Replays the fuzz target's seed corpus (the target built without libFuzzer).
exec "${top_builddir:-.}/test/fuzz_names" "${srcdir:-.}"/test/fuzz-corpus/*
