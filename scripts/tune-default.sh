#!/usr/bin/env bash
# The main job: tune moetune's kernel for the embedded default model (qwen3.5-122b-a10b-fp8 at
# TP4) on this machine's GPU, writing the config tables, their sidecars and a report to
# $MOETUNE_OUT (default: ./tuned). Extra arguments go to `moetune tune` (e.g. --budget 5m).
#
# Where no GPU is usable (`moetune tune` exits 3), the GPU part is skipped: the script prints
# the plan (`tune --dry-run`), the shapes and the roofline instead (of the model and --gpu given
# among the extra arguments, else the default model on the H200 spec), says so, and exits 0;
# with --json only the plan, as JSON.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${MOETUNE_BIN:-$root/build/src/cli/moetune}"
out="${MOETUNE_OUT:-$PWD/tuned}"

if [ ! -x "$bin" ]; then
  echo "tune-default: $bin not found; build first: cmake -S . -B build && cmake --build build -j" >&2
  exit 1
fi

"$bin" tune --out "$out" "$@"
rc=$?
if [ "$rc" -ne 3 ]; then
  exit "$rc"
fi

# With --json, stdout stays one JSON document: the dry run's plan alone (notes on stderr).
json=0
for a in "$@"; do case "$a" in --json | --json=true | --json=1) json=1 ;; esac; done
if [ "$json" -eq 1 ]; then
  echo "tune-default: no usable GPU: nothing tuned; printing the plan (tune --dry-run --json)." >&2
  "$bin" tune --dry-run --out "$out" "$@" || exit $?
  exit 0
fi

# The model and GPU among the extra arguments (--model x, --tp=4, --gpu H100, ...) apply to the
# shapes and roofline too; tune's own options (--budget, --batch) are not theirs.
model_args=()
gpu_args=(--gpu "NVIDIA H200")
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  a=${args[i]}
  case "$a" in
    --model=* | --tp=* | --ep=* | --dtype=* | --experts=* | --topk=* | --intermediate=* | \
      --hidden=* | --block-shape=*) model_args+=("$a") ;;
    --model | --tp | --ep | --dtype | --experts | --topk | --intermediate | --hidden | --block-shape)
      model_args+=("$a" "${args[i + 1]-}")
      i=$((i + 1)) ;;
    --gpu=*) gpu_args=("$a") ;;
    --gpu)
      gpu_args=(--gpu "${args[i + 1]-}")
      i=$((i + 1)) ;;
  esac
done

echo "tune-default: no usable GPU: the GPU part (measuring, writing tuned tables) was SKIPPED." >&2
echo "tune-default: showing the tuning plan, the shapes and the roofline instead." >&2
echo
echo "== moetune tune --dry-run"
"$bin" tune --dry-run --out "$out" "$@" || exit $?
echo
# The dry run above already said which GPU spec stands in for the missing GPU.
echo "== moetune shapes ${gpu_args[*]} ${model_args[*]}"
"$bin" shapes "${gpu_args[@]}" "${model_args[@]}" || exit $?
echo
echo "== moetune roofline ${gpu_args[*]} ${model_args[*]}"
"$bin" roofline "${gpu_args[@]}" "${model_args[@]}" || exit $?
echo
echo "tune-default: done WITHOUT tuning (no GPU here; nothing was written to $out)." >&2
echo "tune-default: run this script on a machine with an NVIDIA GPU to tune." >&2
exit 0
