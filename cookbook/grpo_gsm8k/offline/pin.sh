# The CPU code paths of the demo, sourced by cookbook/run_demo.sh (tests/cookbook/conftest.py
# reads the same line): torch's kernels and MKL take their AVX2 paths and every process uses one
# thread, so the figures docs/cookbook.md shows are the same on every x86-64 CPU with AVX2.
export ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1
