#!/usr/bin/env bash
# Train readtwice on a Cloud TPU VM (docs/tpu.md, "Training on Cloud TPU and Vertex AI").
#
#   export PROJECT=my-project ZONE=europe-west4-a TPU_NAME=readtwice-v3 BUCKET=my-bucket
#   deploy/trainer/tpu_vm.sh create            # the TPU VM (v3-8, runtime tpu-ubuntu2204-base)
#   deploy/trainer/tpu_vm.sh setup             # copy HEAD there, install it with the trainer extra
#   deploy/trainer/tpu_vm.sh pretrain [FLAG ...]        # python -m model.pretrain, in background
#   deploy/trainer/tpu_vm.sh run MODULE [FLAG ...]      # any python -m MODULE, in background
#   deploy/trainer/tpu_vm.sh logs [MODULE]     # follow the newest log (default model.pretrain)
#   deploy/trainer/tpu_vm.sh status            # training processes running on the VM
#   deploy/trainer/tpu_vm.sh ssh               # a shell on the VM
#   deploy/trainer/tpu_vm.sh delete            # delete the TPU VM (billing stops)
#   deploy/trainer/tpu_vm.sh pretrain-args     # print the default pretraining flags, one a line
#
# ACCELERATOR_TYPE (default v3-8) and RUNTIME_VERSION (default tpu-ubuntu2204-base) override
# the machine.  The runtime is the plain Ubuntu 22.04 TPU image, not a tpu-vm-tf-* one: those
# carry their own, older TensorFlow, while `setup` installs ours into a Python 3.11 virtualenv
# (~/readtwice-venv): the pinned trainer extra with TensorFlow swapped for tensorflow-tpu 2.20.0
# + libtpu 0.0.14 (deploy/trainer/install.sh tpu), which drive the TPU through PJRT.
# Training runs under nohup, so it survives the ssh session; its log is
# ~/readtwice-logs/<module>-<time>.log on the VM.  Outputs go to gs:// (--model_dir): the VM can
# be deleted when the job is done, and re-running the same command resumes it.
set -euo pipefail

ACCELERATOR_TYPE=${ACCELERATOR_TYPE:-v3-8}
RUNTIME_VERSION=${RUNTIME_VERSION:-tpu-ubuntu2204-base}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV='~/readtwice-venv'

die() { echo "error: $*" >&2; exit 2; }
need() {
  local name
  for name in "$@"; do
    [[ -n ${!name:-} ]] || die "set $name (docs/tpu.md, \"Training on Cloud TPU and Vertex AI\")"
  done
}
LOC=()
locate() {  # checks PROJECT ZONE TPU_NAME and sets LOC, the flags that name the TPU VM's place
  need PROJECT ZONE TPU_NAME
  LOC=(--project="$PROJECT" --zone="$ZONE")
}
remote() {  # remote COMMAND: run a shell command on the TPU VM (worker 0)
  gcloud compute tpus tpu-vm ssh "$TPU_NAME" "${LOC[@]}" --command="$1"
}

# The pretraining flags `pretrain` passes (before any given on its command line; for a flag
# given twice the last one wins, except --records_dir, which accumulates).  The same run as
# deploy/trainer/vertex/pretrain_tpu_v3.yaml.
pretrain_args() {
  need BUCKET
  local b="gs://$BUCKET/readtwice"
  printf '%s\n' \
    "--records_dir=$b/records/wikipedia" \
    "--records_dir=$b/records/books" \
    "--model_dir=$b/pretrain/readtwice_e" \
    "--preset=readtwice_e" \
    "--init_roberta=$b/roberta-base" \
    "--strategy=tpu" \
    "--tpu=local" \
    "--steps=200000" \
    "--steps_per_loop=100" \
    "--optimizer=lamb" \
    "--learning_rate=1e-4" \
    "--warmup_fraction=0.05" \
    "--weight_decay=0.01" \
    "--clipnorm=1.0" \
    "--mention_mask_rate=0.25" \
    "--token_mask_rate=0.15" \
    "--max_span_words=3" \
    "--checkpoint_every=5000" \
    "--max_checkpoints=5" \
    "--seed=0"
}

# run MODULE [FLAG ...]: start `python -m MODULE FLAG ...` on the VM under nohup.
run_module() {
  local module=${1:?usage: $0 run MODULE [FLAG ...]}
  shift
  [[ $module =~ ^[A-Za-z_][A-Za-z0-9_.]*$ ]] || die "not a module name: $module"
  local quoted=""
  (( $# )) && printf -v quoted ' %q' "$@"
  remote "set -e
mkdir -p ~/readtwice-logs
log=~/readtwice-logs/$module-\$(date +%Y%m%d-%H%M%S).log
ln -sfn \"\$log\" ~/readtwice-logs/$module.log
export NEXT_PLUGGABLE_DEVICE_USE_C_API=true
export TF_PLUGGABLE_DEVICE_LIBRARY_PATH=\$($VENV/bin/python -c \
    'import libtpu; print(libtpu.get_library_path())')
export TPU_LIBRARY_PATH=\$TF_PLUGGABLE_DEVICE_LIBRARY_PATH
cd ~
nohup $VENV/bin/python -m $module$quoted > \"\$log\" 2>&1 < /dev/null &
echo \"started python -m $module (pid \$!); log: \$log\""
}

cmd=${1:-}
(( $# )) && shift
case "$cmd" in
  create|setup|pretrain|run|logs|status|ssh|delete) locate ;;
esac
case "$cmd" in
  create)
    gcloud compute tpus tpu-vm create "$TPU_NAME" "${LOC[@]}" \
        --accelerator-type="$ACCELERATOR_TYPE" --version="$RUNTIME_VERSION"
    ;;
  setup)
    git -C "$ROOT" diff --quiet HEAD -- \
        || echo "warning: uncommitted changes are not copied (setup ships HEAD)" >&2
    revision=$(git -C "$ROOT" rev-parse HEAD)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    git -C "$ROOT" archive --format=tar.gz -o "$tmp/readtwice.tar.gz" HEAD
    gcloud compute tpus tpu-vm scp "$tmp/readtwice.tar.gz" "$TPU_NAME:readtwice.tar.gz" "${LOC[@]}"
    remote "set -euo pipefail
sudo apt-get update -q
sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3.11 python3.11-venv \
    default-jre-headless
rm -rf ~/readtwice && mkdir ~/readtwice && tar -xzf ~/readtwice.tar.gz -C ~/readtwice
echo $revision > ~/readtwice/pipelines/REVISION
[[ -x $VENV/bin/python ]] || python3.11 -m venv $VENV
PYTHON=$VENV/bin/python bash ~/readtwice/deploy/trainer/install.sh tpu"
    ;;
  pretrain)
    need BUCKET
    mapfile -t defaults < <(pretrain_args)
    run_module model.pretrain "${defaults[@]}" "$@"
    ;;
  pretrain-args)
    pretrain_args
    ;;
  run)
    run_module "$@"
    ;;
  logs)
    remote "tail -n 100 -F ~/readtwice-logs/${1:-model.pretrain}.log"
    ;;
  status)
    remote "pgrep -af 'python -m model[.]' || echo 'no training process running'"
    ;;
  ssh)
    gcloud compute tpus tpu-vm ssh "$TPU_NAME" "${LOC[@]}"
    ;;
  delete)
    gcloud compute tpus tpu-vm delete "$TPU_NAME" "${LOC[@]}" --quiet
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
