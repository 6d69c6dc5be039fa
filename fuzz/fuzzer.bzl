"""kiln_fuzzer: one libFuzzer target and the test that replays its corpus.

`NAME` is a cc_binary: under --config=fuzz (clang, ASan+UBSan, coverage) it links libFuzzer's
main and fuzzes; in every other build it links replay_main, which runs the files it is given.
`NAME_corpus_test` replays every file of corpus/CORPUS_DIR/ (the seeds and every crash found so
far) in the normal build, so a fixed crash stays fixed without clang.
"""

def kiln_fuzzer(name, srcs, corpus_dir, deps = []):
    corpus = native.glob(["corpus/%s/**" % corpus_dir])
    native.cc_binary(
        name = name,
        srcs = srcs,
        deps = deps + select({
            "//:fuzzing": [],
            "//conditions:default": ["//fuzz:replay_main"],
        }),
        linkopts = select({
            "//:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    native.cc_test(
        name = name + "_corpus_test",
        srcs = srcs,
        deps = deps + ["//fuzz:replay_main"],
        data = corpus,
        args = ["fuzz/corpus/" + corpus_dir],
        tags = ["fuzz_corpus"],
    )
