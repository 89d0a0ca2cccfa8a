# ctest driver for a bounded libFuzzer run: writes a fresh seed corpus, fuzzes for MAX_TIME seconds,
# fails if the fuzzer finds a crash, a leak or a sanitizer error (non-zero exit).
# cmake -DSEED_GEN=exe [-DSEED_KIND=arg] -DFUZZER=exe -DDICT=file -DWORK_DIR=dir -DMAX_TIME=s
#       -P run_fuzzer.cmake   (the generator runs as `exe [arg] <dir>`)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/corpus)
execute_process(COMMAND ${SEED_GEN} ${SEED_KIND} ${WORK_DIR}/seeds RESULT_VARIABLE seed_rc)
if(NOT seed_rc EQUAL 0)
  message(FATAL_ERROR "seed corpus generator failed: ${seed_rc}")
endif()
execute_process(
  COMMAND ${FUZZER} -max_total_time=${MAX_TIME} -runs=5000000 -timeout=10 -rss_limit_mb=2048
          -max_len=4096 -dict=${DICT} -artifact_prefix=${WORK_DIR}/ -print_final_stats=1
          ${WORK_DIR}/corpus ${WORK_DIR}/seeds
  RESULT_VARIABLE fuzz_rc)
if(NOT fuzz_rc EQUAL 0)
  message(FATAL_ERROR "fuzzer exited with ${fuzz_rc}; the crashing input is in ${WORK_DIR}")
endif()
