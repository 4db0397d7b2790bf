# Tests of the core (variants, generation, compilation, cache) and of the command.
ft_unit_test(test_core test_core.c)
# flashtune plan --sample: the sample's size, coverage, spread and determinism (no compiling).
ft_unit_test(test_plan_sample test_plan_sample.c)
# The timing (warm-up, heat, races) against a made-up driver whose clock slows under load.
ft_unit_test(test_timing test_timing.c)
# The launch of a plan's steps (memsets, kernels, their arguments) against a made-up driver.
ft_unit_test(test_launch test_launch.c)

# The command, on good and bad input: every failure is a clear message and a non-zero exit
# (cli_expect.sh also fails on a crash).
ft_cli_test(plan_subset ok "summary \\(sm_90\\): 24 variants: 20 compiled .*, 4 pruned"
  plan specs/flash_fwd.lua --only "d=64,bm=64,bn=64,warps=4,dtype=f16" --no-cache -j 2)
ft_cli_test(plan_json ok "\\{\"kind\": \"summary\", \"variants\": 8, \"compiled\": 4, \"pruned\": 4"
  plan specs/flash_fwd.lua --only "d=32,bm=64,bn=32,warps=4,stages=1,causal=0" --json --no-cache -q)
# JSON lines, streamed: the plan's line first, a pruned variant's before any compiled one's
ft_cli_test(plan_json_lines ok "^\\{\"kind\": \"plan\", \"spec\": \"specs/flash_fwd.lua\".*\"variants\": 8\\}"
  plan specs/flash_fwd.lua --only "d=32,bm=64,bn=32,warps=4,stages=1,causal=0" --json --no-cache -q)
# One way to choose a GPU: --device N|NAME (and all for tune); --gpu, import's earlier spelling
ft_cli_test(device_name_unknown fail "(--device NoSuchGPU names a GPU, but there is none here|no GPU's name contains 'NoSuchGPU')"
  run --device NoSuchGPU --variant "d=64" --shape "b=1,hq=1,sq=1,d=64")
ft_cli_test(device_all_not_tune fail "--device all shares work among GPUs, which only tune does"
  verify --device all)
ft_cli_test(device_empty fail "--device takes a GPU ordinal, part of a GPU's name or all, not ''"
  tune --device=)
ft_cli_test(import_gpu_spelling fail "--gpu is now --device"
  import --gpu 0 tests/no_such.ftpack)
# gen without SPEC: the built-in flash_fwd, as plan (README's `flashtune gen [SPEC]`)
ft_cli_test(gen_default_spec ok "template  flash_fwd_sm80"
  gen --variant d=64,bm=64,bn=64,warps=4,stages=1,causal=0,dtype=f16,qreg=0,overlap=0)
ft_cli_test(gen_two_specs fail "expected at most one spec, got 'a' and 'b'" gen a b --variant x)
# the plan table's columns line up for variants longer than its default width
add_test(NAME plan_columns COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plan_columns.sh $<TARGET_FILE:flashtune>
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(plan_columns PROPERTIES LABELS cli TIMEOUT 300 ENVIRONMENT "${FT_TEST_ENV}")
# the element type's other spellings: in filters and variants, and --dtype
ft_cli_test(plan_dtype_alias ok "d=64,bm=64,bn=64,warps=4,stages=1,causal=0,dtype=bf16,qreg=0,overlap=0 +compiled"
  plan specs/flash_fwd.lua --only "d=64,bm=64,bn=64,warps=4,stages=1,causal=0,dtype=bfloat16,qreg=0,overlap=0" -j 2)
ft_cli_test(run_dtype_bad fail "--dtype takes f16 \\(fp16, float16, half\\) or bf16 \\(bfloat16\\), not 'fp32'"
  run --variant d=64 --shape 1,1,64,64 --dtype fp32)
ft_cli_test(run_heat_bad fail "--heat takes an integer from 0 to 60000, not '-5'"
  run --variant d=64 --shape 1,1,64,64 --heat -5)
ft_cli_test(run_budget_bad fail "--budget takes an integer from 1 to 60000, not '0'"
  run --variant d=64 --shape 1,1,64,64 --budget 0)
ft_cli_test(query_dtype_alias fail "cannot open tuning database /nonexistent/t.db"
  query --dtype fp16 --db /nonexistent/t.db)
# JSON lines; no database yet is no failure (a fresh machine)
ft_cli_test(devices_json ok "\\{\"kind\": \"driver\", .*\"gpus\": [0-9]+"
  devices --json --db /nonexistent/flashtune.db)
ft_cli_test(devices_json_no_db ok "\\{\"kind\": \"database\", \"path\": \"/nonexistent/flashtune.db\", \"exists\": false\\}"
  devices --json --db /nonexistent/flashtune.db)
ft_cli_test(plan_sm86_prunes ok "shared memory 1.* B > 101376 B per block on sm_86"
  plan specs/flash_fwd.lua --arch sm_86 --only "d=256,bm=64,warps=4,causal=0,dtype=f16,qreg=0,overlap=0" --no-cache -j 2)
# --sample: 5 of the 20 kept variants, with every value the 20 have; the same sample twice
ft_cli_test(plan_sample ok "sample: 5 of 20 kept variants \\(seed 0\\), with every one of the 14 parameter values"
  plan specs/flash_fwd.lua --only "d=64,bm=64,bn=64,warps=4,dtype=f16" --sample 5 -j 2)
ft_cli_test(plan_sample_zero fail "--sample takes an integer from 1 to 8000000, not '0'"
  plan specs/flash_fwd.lua --sample 0)
ft_cli_test(plan_seed_bad fail "--seed takes an integer from 0 to 2147483647, not 'x'"
  plan specs/flash_fwd.lua --sample 3 --seed x)
ft_cli_test(plan_unknown_arch fail "unknown architecture 'sm_70'" plan specs/flash_fwd.lua --arch sm_70)
ft_cli_test(plan_prunes_all fail "all 2 variants of tests/specs/prunes_all.lua are pruned for sm_90"
  plan tests/specs/prunes_all.lua)
ft_cli_test(plan_syntax_error fail "tests/specs/syntax_error.lua:3: unexpected symbol near '='"
  plan tests/specs/syntax_error.lua)
ft_cli_test(plan_runtime_error fail "tests/specs/runtime_error.lua:3: attempt to index a nil value"
  plan tests/specs/runtime_error.lua)
ft_cli_test(plan_missing_field fail "tests/specs/missing_params.lua: field 'params' is missing"
  plan tests/specs/missing_params.lua)
ft_cli_test(plan_mistyped_field fail "tests/specs/params_not_table.lua: field 'params' must be a list"
  plan tests/specs/params_not_table.lua)
# The sandbox ends the loop where it is, by the instruction budget or (under ASan on a slow
# machine) by the CPU time limit that comes first.
ft_cli_test(plan_endless_loop fail "tests/specs/endless_loop.lua:3: (instruction budget of [0-9]+|CPU time limit of [0-9]+ s) exceeded"
  plan tests/specs/endless_loop.lua)
ft_cli_test(plan_memory_bomb fail "tests/specs/memory_bomb.lua:3: memory cap of 64 MiB exceeded"
  plan tests/specs/memory_bomb.lua)
ft_cli_test(plan_os_execute fail "tests/specs/os_execute.lua:2: attempt to index a nil value \\(global 'os'\\)"
  plan tests/specs/os_execute.lua)
ft_cli_test(plan_missing_file fail "cannot open tests/specs/no_such_spec.lua"
  plan tests/specs/no_such_spec.lua)
ft_cli_test(gen_unknown_param fail "unknown parameter 'tile' in variant"
  gen specs/flash_fwd.lua --variant "d=128,bm=128,bn=64,warps=4,stages=2,causal=1,dtype=f16,qreg=0,overlap=0,tile=2")
ft_cli_test(gen_bad_value fail "'100' is not a value of parameter 'bm' \\(spec flash_fwd allows: 64, 128\\)"
  gen specs/flash_fwd.lua --variant "d=128,bm=100,bn=64,warps=4,stages=2,causal=1,dtype=f16,qreg=0,overlap=0")
# An open parameter (d of the forward specs) takes a value it does not list: plan compiles it,
# the constraints prune what the templates lack
ft_cli_test(plan_open_head_dim ok "d=112,bm=128,bn=64,warps=4,stages=2,causal=1,dtype=f16,qreg=0,overlap=0 +compiled"
  plan specs/flash_fwd.lua --arch sm_80 --only "d=112,bm=128,bn=64,warps=4,stages=2,causal=1,dtype=f16,qreg=0,overlap=0" -j 2)
ft_cli_test(plan_open_head_dim_pruned fail "all 1 variants of .* are pruned"
  plan specs/flash_fwd.lua --arch sm_80 --only "d=100,bm=128,bn=64,warps=4,stages=2,causal=1,dtype=f16,qreg=0,overlap=0" -j 2)
ft_cli_test(gen_source ok "FT_DEFINE_KERNEL\\(ft_flash_fwd_sm80_d128_bm128_bn64_warps4_stages2_causal1_dtypef16_qreg0_overlap0\\)"
  gen specs/flash_fwd.lua --variant "d=128,bm=128,bn=64,warps=4,stages=2,causal=1,dtype=f16,qreg=0,overlap=0")
# The Hopper family: a plan refuses a GPU other than compute capability 9.0, builds for sm_90a
# on sm_90, and its d=64 f16 subset (P in registers) compiles with NVRTC.
ft_cli_test(plan_sm90_on_sm80 fail "flash_fwd_sm90 runs only on compute capability 9\\.0, not sm_80"
  plan flash_fwd_sm90 --arch sm_80)
ft_cli_test(plan_sm90_on_sm89 fail "flash_fwd_sm90 runs only on compute capability 9\\.0, not sm_89"
  plan flash_fwd_sm90 --arch sm_89)
ft_cli_test(plan_sm90_subset ok "summary \\(sm_90a\\): 864 variants: [1-9][0-9]* compiled .*, 0 compile errors, 0 over limits"
  plan flash_fwd_sm90 --arch sm_90 --only "d=64,dtype=f16,causal=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=0" -q -j 2)
ft_cli_test(gen_sm90_source ok "void ft_wgmma_o\\(float \\(&d\\)\\[96\\]"
  gen specs/flash_fwd_sm90.lua --arch sm_90a --variant "d=192,bm=64,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1")
# --cubin compiles through the runtime's NVRTC path for the family's target (sm_90a, not sm_90)
ft_cli_test(gen_sm90_cubin ok "Compiling entry function 'ft_flash_fwd_sm90_d64_[a-z0-9_]*' for 'sm_90a'"
  gen specs/flash_fwd_sm90.lua --variant "d=64,bm=128,bn=128,stages=2,causal=1,dtype=f16,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1"
  -o /dev/null --cubin ${CMAKE_CURRENT_BINARY_DIR}/gen_sm90.cubin)
ft_cli_test(no_command fail "usage: flashtune COMMAND")
ft_cli_test(help_exit_status ok "exit status: 0 done, 1 failed \\(the reason on stderr\\), 2 usage error, 130 interrupted" --help)
ft_cli_test(unknown_command fail "unknown command 'frobnicate'" frobnicate)

add_test(NAME cli_cache COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli_cache.sh $<TARGET_FILE:flashtune>
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_cache PROPERTIES LABELS cli TIMEOUT 600)

find_program(FT_NVCC nvcc HINTS ${CUDAToolkit_BIN_DIR})
if(FT_NVCC)
  add_test(NAME cli_gen_nvcc COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gen_nvcc.sh $<TARGET_FILE:flashtune> ${FT_NVCC}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(cli_gen_nvcc PROPERTIES LABELS cli TIMEOUT 600)
endif()

if(FT_NVCC)
  # sm_90a code from the generator: nvcc compiles it, ptxas spills nothing where none is
  # expected, the PTX/SASS has wgmma (HGMMA) and TMA loads (UTMALDG). The SASS checks need
  # cuobjdump or nvdisasm; without them the script says it left them out.
  # scripts/setup.sh fetches them into FT_TOOLS_DIR when the toolkit lacks them.
  if(DEFINED ENV{FT_TOOLS_DIR})
    set(ft_tools $ENV{FT_TOOLS_DIR})
  else()
    set(ft_tools $ENV{HOME}/.cache/flashtune/tools)
  endif()
  find_program(FT_CUOBJDUMP cuobjdump HINTS ${CUDAToolkit_BIN_DIR} ${ft_tools}/nvidia/cu13/bin)
  find_program(FT_NVDISASM nvdisasm HINTS ${CUDAToolkit_BIN_DIR} ${ft_tools}/nvidia/cu13/bin)
  set(FT_SASS_ENV)
  if(FT_CUOBJDUMP)
    list(APPEND FT_SASS_ENV "CUOBJDUMP=${FT_CUOBJDUMP}")
  endif()
  if(FT_NVDISASM)
    list(APPEND FT_SASS_ENV "NVDISASM=${FT_NVDISASM}")
  endif()
  add_test(NAME cli_gen_nvcc_sm90 COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gen_nvcc_sm90.sh $<TARGET_FILE:flashtune> ${FT_NVCC}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(cli_gen_nvcc_sm90 PROPERTIES LABELS cli TIMEOUT 600 ENVIRONMENT "${FT_SASS_ENV}")
  # FT_DESC64 and FT_QW (code changes of the sm_90a templates, off unless defined): defaults
  # compile with them, without spills, with the same HGMMA and fewer instructions a trip of
  # their loops (FT_DESC64) or before a trip's first HGMMA (FT_QW).
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    add_test(NAME cli_sass_macros COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/sass_macros.sh $<TARGET_FILE:flashtune> ${FT_NVCC}
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(cli_sass_macros PROPERTIES LABELS cli TIMEOUT 600 ENVIRONMENT "${FT_SASS_ENV}")
  endif()
endif()

# The built-in spaces through NVRTC, every target: nothing fails to compile, nothing exceeds a
# limit. Label full (also slow): every kept variant, 38 minutes on two cores for the forward's
# before head dims 80 and 160 joined the lists (about 53 by the kept counts, not measured) and
# 19 for the backward's before they joined its list (about 25 by the kept counts, not measured;
# FT_TEST_LABELS='-L full' sh scripts/test.sh). Label slow: a sample of each space's kept
# variants (flashtune plan --sample: every value of every parameter, spread over the space;
# pruning still runs on all), about 6 minutes for the forward's (an eighth of each) and 2.5 for
# the backward's (150 of each target's); the kept counts are now 1912 (sm_80), 1460 (sm_86,
# sm_89), 2108 (sm_90) and 24780 (flash_fwd_sm90 on sm_90a; 33304 before pack=1 was pruned, 41752 before it was kept to balance=0, 24780 before pack too, 22940 before ctas, 21228 before ostore with one Q buffer, 6304 before ostore, early_rescale, overlap=2 and
# three-warpgroup ping-pong,
# 4732 before balance=2: 266 of them sampled, an eighth of the 2352 before psmem, pexp,
# skip_rescale and bn 112/144); the backward's 1616 (sm_80) and 1840
# (sm_90; 1232 and 1408 before 80 and 160 were listed), the Hopper backward's 4228 (sm_90a; 2380 before gqa=atomic, 1918 before qrot, 1478 before dq_late, 1142 before bm=80, 1008 before early_dv=3, 574 before s_ahead). Each
# entry: spec, target, sample size, test name.
set(ft_spaces
  "specs/flash_fwd.lua sm_80 236 sm_80" "specs/flash_fwd.lua sm_86 183 sm_86" "specs/flash_fwd.lua sm_89 183 sm_89"
  "specs/flash_fwd.lua sm_90 260 sm_90"
  # the Hopper space: the template's static_assert checks the spec's smem formula against its layout
  "specs/flash_fwd_sm90.lua sm_90a 266 sm_90a"
  # the backward's, likewise
  "specs/flash_bwd.lua sm_80 150 bwd_sm_80" "specs/flash_bwd.lua sm_90 150 bwd_sm_90"
  # the Hopper backward's: 24 of its 2380 kept variants (5 of them bm=80, 7 dq_late=1, 6 qrot=1)
  "specs/flash_bwd_sm90.lua sm_90a 24 bwd_sm90a"
  # the short-query forward's: 32 of its 1120 (sm_80) and 1312 (sm_90) kept variants
  "specs/flash_decode.lua sm_80 32 decode_sm_80" "specs/flash_decode.lua sm_90 32 decode_sm_90")
foreach(space ${ft_spaces})
  separate_arguments(space)
  list(GET space 0 spec)
  list(GET space 1 arch)
  list(GET space 2 sample)
  list(GET space 3 name)
  add_test(NAME sample_space_${name}
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plan_space.sh $<TARGET_FILE:flashtune> ${spec} ${arch} ${sample}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(sample_space_${name} PROPERTIES LABELS slow TIMEOUT 1800
    ENVIRONMENT "${FT_TEST_ENV}" RUN_SERIAL TRUE)
  add_test(NAME full_space_${name}
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plan_space.sh $<TARGET_FILE:flashtune> ${spec} ${arch}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(full_space_${name} PROPERTIES LABELS "slow;full" TIMEOUT 3600
    ENVIRONMENT "${FT_TEST_ENV}" RUN_SERIAL TRUE)
endforeach()
ft_unit_test(test_check test_check.c)

# The library's diagnostic lines: a handler's, or stderr's (FLASHTUNE_DEBUG).
ft_unit_test(test_log test_log.c)

# The runtime's built-in default kernels: each kept by its spec and compiled (sm_90 targets, bf16)
# for every call it serves, the Hopper ones' SASS read (with cuobjdump: FT_SASS_ENV), and on
# sm_80 some entry kept for each; NVRTC, about a minute on two cores (label slow).
ft_unit_test(test_defaults test_defaults.c)
set(ft_defaults_env ${FT_TEST_ENV} ${FT_SASS_ENV})
set_tests_properties(test_defaults PROPERTIES LABELS slow TIMEOUT 1200 ENVIRONMENT "${ft_defaults_env}")

# The tuner with a stand-in worker (no GPU): recording, resuming, faults, hangs, crashes,
# concurrent tuners on one database, query output.
add_executable(fake_worker fake_worker.c)
add_test(NAME tune_fake COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tune_fake.sh $<TARGET_FILE:flashtune>
  $<TARGET_FILE:fake_worker> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(tune_fake PROPERTIES LABELS cli TIMEOUT 900
  ENVIRONMENT "FLASHTUNE_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")

# Misses (no GPU): query --misses and tune --misses with the stand-in worker.
add_test(NAME tune_misses COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tune_misses.sh $<TARGET_FILE:flashtune>
  $<TARGET_FILE:fake_worker> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(tune_misses PROPERTIES LABELS cli TIMEOUT 900
  ENVIRONMENT "FLASHTUNE_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")

# The Hopper family (flash_fwd_sm90, sm_90a): built-in specs and their names, target and
# capabilities, the generated wgmma wrappers, pruning, a sample compiled with NVRTC.
ft_unit_test(test_sm90 test_sm90.c)

# The built-in specs in the tuner with the stand-in worker: flash_fwd_sm90 only on compute
# capability 9.0; a filter of one family's parameters tunes that family alone.
add_test(NAME tune_fake_sm90 COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tune_fake_sm90.sh $<TARGET_FILE:flashtune>
  $<TARGET_FILE:fake_worker> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(tune_fake_sm90 PROPERTIES LABELS cli TIMEOUT 600
  ENVIRONMENT "FLASHTUNE_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")

# bench/report.py's parts that need neither a GPU nor PyTorch (parsers, tables, merging). Not in
# a sanitizer build: Python cannot load its instrumented library (and the script has no C of its own).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND AND NOT FT_SANITIZE)
  add_test(NAME report_selftest COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/bench/report.py --selftest
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # Its bucket keys come from the library (flashtune.key): this build's, not whichever the checkout has.
  set_tests_properties(report_selftest PROPERTIES LABELS unit TIMEOUT 300
    ENVIRONMENT "FLASHTUNE_LIB=$<TARGET_FILE:flashtune_shared>")
  # A bench script's --selftest: its parts that need no GPU, on made-up input whose answers are known.
  function(ft_bench_selftest name script)
    add_test(NAME ${name}_selftest COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/bench/${script} --selftest
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${name}_selftest PROPERTIES LABELS unit TIMEOUT 60)
  endfunction()
  ft_bench_selftest(ablation ablation.py)          # its tables from made-up measurements
  ft_bench_selftest(clock_match clock_match.py)    # races, clock samples and measurement windows matched
  ft_bench_selftest(tune_quality tune_quality.py)  # the default's variant read, its ratio to the winner
  ft_bench_selftest(sass_hazards sass_hazards.py)  # wgmma accumulators touched in flight, on a made-up listing
  ft_bench_selftest(sustain sustain.py)            # nvidia-smi's samples read and set in their windows
  ft_bench_selftest(knob_ab knob_ab.py)            # twins of a base, their shapes and the printed ratios
  # bench/op_overhead.py's argument checks, and a short run where PyTorch and a GPU are (else it
  # says "skipped", which this test shows).
  add_test(NAME op_overhead_args COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/op_overhead_args.sh ${Python3_EXECUTABLE}
    ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test-op-overhead WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(op_overhead_args PROPERTIES LABELS unit TIMEOUT 300
    ENVIRONMENT "FLASHTUNE_LIB=$<TARGET_FILE:flashtune_shared>;FLASHTUNE_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
endif()

# The file layer: what it refuses to read or replace (directories, FIFOs, devices, huge files,
# planted links), and that failures leave the path as it was.
ft_unit_test(test_fs test_fs.c)

# Template expansion: the shared device headers go into each generated source once, and the
# family hash covers them.
ft_unit_test(test_template test_template.c)

# The operation layer: keys, the forward operation's key, FLOPs and launch plans.
ft_unit_test(test_ops test_ops.c)

# The public API's versioned arguments: flashtune 0.1's ft_attention_args (no version field) is
# read as it was, version 2 as it is, anything else refused.
ft_unit_test(test_args test_args.c ${CMAKE_SOURCE_DIR}/runtime/args.c)

# The backward without a GPU: its family and generated source, and the fp64 CPU reference
# against central differences of the forward.
ft_unit_test(test_bwd test_bwd.c)
# the FMA-pipe exponential the forward's pexp knob uses, its very source against exp2
ft_unit_test(test_exp2 test_exp2.c)
ft_unit_test(test_sched test_sched.c)
add_test(NAME bwd_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/bwd_cli.sh $<TARGET_FILE:flashtune>
  $<TARGET_FILE:fake_worker> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(bwd_cli PROPERTIES LABELS cli TIMEOUT 600 ENVIRONMENT "${FT_TEST_ENV}")
# NVRTC is loaded when the first kernel compiles: where it cannot be, every variant says why
ft_cli_test(nvrtc_missing fail "NVRTC \\(libnvrtc\\.so\\.[0-9]+\\) cannot be loaded: \\$FLASHTUNE_NVRTC /nonexistent/libnvrtc\\.so"
  plan specs/flash_fwd.lua --only "d=32,bm=64,bn=32,warps=4,stages=1,causal=0,dtype=f16,qreg=0,overlap=0" --no-cache -q)
set_tests_properties(cli_nvrtc_missing PROPERTIES ENVIRONMENT "${FT_TEST_ENV};FLASHTUNE_NVRTC=/nonexistent/libnvrtc.so")
