"""
The learning bench: held-out accuracy per generated token, strategy by strategy.

Importing the package pins the CPU code paths every run takes, before torch loads (here and in
every worker, which inherit the environment): torch's CPU kernels and MKL choose their
instructions by the processor (AVX-512 on one machine, AVX2 on another), which changes float
rounding and, through sampling, whole trajectories. Pinned to AVX2, x86-64 machines run the
same code. A variable already set is left as it is.
"""

import os

#: The environment that pins torch's, MKL's and oneDNN's CPU code paths to AVX2.
REPRODUCIBLE_CPU = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
for _name, _value in REPRODUCIBLE_CPU.items():
    os.environ.setdefault(_name, _value)
