# Call 6: the new GPU test MoeStagesGpu.QuantKernelMatchesTheReferenceBitForBit (the quant
# kernel's scales and bytes against the fp32 reference on groups made to catch a wrong warp
# amax), with the rest of gpu_test_moe_stages, at main 94dd83e + the test.
set -u
{ date -u; nvidia-smi -L; } ; timeout 120 .devbin/gpu_test_moe_stages --gtest_color=no 2>&1 | tail -25
