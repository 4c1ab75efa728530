#!/usr/bin/env bash
# Crossover's doctor on every GPU node of a Slurm cluster: one array task per node, each leaving its bundle in
# bundles/. Submit from a Crossover checkout whose .venv exists on a filesystem every node mounts:
#     sbatch --array=0-7 docs/doctor-slurm.sh      (one task per node; 8 nodes here)
# then, on any machine with Crossover:  python -m core import bundles/*.tar.gz
#SBATCH --job-name=crossover-doctor
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --exclusive
#SBATCH --gres=gpu:1
#SBATCH --time=00:20:00
#SBATCH --output=bundles/doctor-%A-%a.log
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
mkdir -p bundles
. .venv/bin/activate
# Each node's results stay in a folder of its own (a shared results folder works too: every machine writes
# under its own id), and the budget leaves the job's time limit five minutes to spare.
export CROSSOVER_RESULTS_DIR="$PWD/bundles/results-${SLURM_ARRAY_JOB_ID:-0}-${SLURM_ARRAY_TASK_ID:-0}"
python -m core doctor --budget 15m -o "bundles/doctor-$(hostname)-${SLURM_ARRAY_TASK_ID:-0}.tar.gz"
