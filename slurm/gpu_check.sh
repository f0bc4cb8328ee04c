#!/usr/bin/env bash
# Device check: 3 GRPO steps of the multi-turn ReAct rollout with a Qwen2.5-1.5B-shaped model (random
# weights, built from its config: no hub) and the real Qwen2.5 tokenizer on one GPU; prints one JSON line
# (every generated token, rollout and generate tokens/s, step time, peak GPU memory) in minutes on an H200.
#
#   bash slurm/gpu_check.sh                    # on a GPU machine, from the repo root
#   bash slurm/gpu_check.sh --tokenizer DIR    # Qwen2.5 tokenizer (default ../shared/data/qwen2.5-tokenizer)
#   bash slurm/gpu_check.sh --cpu --tiny       # the same code on a small model on CPU (the test suite runs it)
#   bash slurm/gpu_check.sh --fetch-wheels     # here, with network: download the wheels a bare machine lacks
#
# A bare GPU machine with torch, transformers, accelerate, peft, tokenizers and safetensors but no TRL: put
# the wheels of what it lacks in .whl/ and they are installed into /tmp/star-site (no index, no dependencies)
# before the check. --fetch-wheels downloads `python slurm/gpu_check.py --wheels` (or only the names in
# WHEELS="a==1 b==2", for a machine that has the rest), then strips their shared libraries and recompresses
# them with LZMA to fit the 64 MiB a device call carries. The repo itself is put on PYTHONPATH, so the
# package needs no install. Stops after GPU_CHECK_TIMEOUT seconds (default 480).
#SBATCH --job-name=star-gpu-check
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --time=00:15:00
#SBATCH --output=gpu_check_%j.log
set -euo pipefail

cd "${SLURM_SUBMIT_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
PYTHON="${PYTHON:-}"
if [[ -z "${PYTHON}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
WHEEL_DIR="${WHEEL_DIR:-.whl}"

if [[ "${1:-}" == "--fetch-wheels" ]]; then
  mkdir -p "${WHEEL_DIR}"
  WHEELS="${WHEELS:-$("${PYTHON}" slurm/gpu_check.py --wheels)}"
  # shellcheck disable=SC2086
  "${PYTHON}" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "${WHEEL_DIR}" ${WHEELS}
  "${PYTHON}" slurm/gpu_check.py --shrink-wheels "${WHEEL_DIR}"
  du -sh "${WHEEL_DIR}"
  exit 0
fi

if ! "${PYTHON}" -c "import trl" >/dev/null 2>&1; then
  if ! compgen -G "${WHEEL_DIR}/*.whl" >/dev/null; then
    echo '{"ok": false, "error": "TRL is not importable and no wheels in '"${WHEEL_DIR}"'/: run bash slurm/gpu_check.sh --fetch-wheels where pip works, and carry that folder"}'
    exit 2
  fi
  SITE="${STAR_SITE:-/tmp/star-site}"
  "${PYTHON}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "${SITE}" \
    "${WHEEL_DIR}"/*.whl
  export PYTHONPATH="${SITE}${PYTHONPATH:+:${PYTHONPATH}}"
fi
export PYTHONPATH="${PWD}${PYTHONPATH:+:${PYTHONPATH}}"
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if command -v nvidia-smi >/dev/null 2>&1 && [[ " $* " != *" --cpu "* ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2 || true
fi
exec timeout "${GPU_CHECK_TIMEOUT:-480}" "${PYTHON}" slurm/gpu_check.py "$@"
