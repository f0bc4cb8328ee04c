#!/usr/bin/env bash
# GPU smoke test: vLLM-backed rollouts + 2 RL steps of qwen2.5-1.5b for GRPO, DAPO and ARPO on one GPU.
#
#   sbatch slurm/gpu_smoke.sh                        # on a cluster (edit the #SBATCH lines to your site)
#   bash slurm/gpu_smoke.sh --model /models/Qwen2.5-1.5B-Instruct   # directly on a GPU machine
#
# Needs: a CUDA GPU, `pip install 'star-lab[gpu]'` (vllm==0.31.0) and a local copy of Qwen2.5-1.5B-Instruct
# ($STAR_MODELS_DIR/Qwen2.5-1.5B-Instruct, --model DIR, or the Hugging Face cache). Without any of them the
# script says what is missing and exits with status 2. Output: one JSON line per algorithm (rollout
# model-tokens/s, step time, counters) and a final JSON summary line.
#SBATCH --job-name=star-gpu-smoke
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --time=00:30:00
#SBATCH --output=gpu_smoke_%j.log
set -euo pipefail

cd "${SLURM_SUBMIT_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
PYTHON="${PYTHON:-python}"
if [[ -x .venv/bin/python && "${PYTHON}" == "python" ]]; then
  PYTHON=.venv/bin/python
fi
export TOKENIZERS_PARALLELISM=false
export VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-WARNING}"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
exec "${PYTHON}" benchmarks/gpu_smoke.py "$@"
