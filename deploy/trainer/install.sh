#!/usr/bin/env bash
# Installs readtwice with its `trainer` and `cpu` extras at the versions pinned in
# requirements.txt, then replaces the CPU TensorFlow build with the one for the accelerator:
#
#   bash deploy/trainer/install.sh cpu|gpu|tpu    (PYTHON=/path/to/python picks the interpreter)
#
#   cpu  tensorflow-cpu (as pinned in requirements.txt)
#   gpu  tensorflow[and-cuda] at the same version (CUDA/cuDNN/NCCL come as nvidia-* wheels;
#        the host needs only the NVIDIA driver, which Vertex AI and GPU VMs provide)
#   tpu  tensorflow-tpu 2.20.0 + libtpu 0.0.14 + tensorboard 2.20.0: PyPI has no tensorflow-tpu
#        2.21 (2.20.0 is the newest TPU build), and tensorflow-tpu 2.20.0 requires
#        tensorboard~=2.20.0 and libtpu~=0.0.14 (pinned here to that floor rather than
#        whichever libtpu 0.0.x is newest when the image is built).  Keras stays at the pinned
#        3.15.1 (tensorflow-tpu 2.20.0 requires keras>=3.10).  Also links /lib/libtpu.so when
#        run as root (Vertex AI expects libtpu.so there in custom TPU containers).
#
# The swap happens in one run, so a Docker layer never keeps the CPU build.  Ends with
# `pip check`.  Used by deploy/trainer/Dockerfile and deploy/trainer/tpu_vm.sh.
set -euo pipefail

accelerator=${1:-}
case "$accelerator" in
  cpu|gpu|tpu) ;;
  *) echo "usage: $0 cpu|gpu|tpu" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=${PYTHON:-python3}
pip=("$python" -m pip --disable-pip-version-check)

TPU_TENSORFLOW=2.20.0
TPU_LIBTPU=0.0.14
TPU_TENSORBOARD=2.20.0

# requirements.txt as constraints (pip refuses extras in a constraints file).
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
sed -e 's/\[[^]]*\]//' "$root/requirements.txt" > "$constraints"
tf_version=$(sed -n 's/^tensorflow-cpu==\([0-9.]*\).*/\1/p' "$root/requirements.txt")
if [[ -z "$tf_version" ]]; then
  echo "error: no tensorflow-cpu==X pin in $root/requirements.txt" >&2
  exit 1
fi

"${pip[@]}" install --no-cache-dir --upgrade pip
"${pip[@]}" install --no-cache-dir -c "$constraints" "$root[trainer,cpu]"

case "$accelerator" in
  gpu)
    "${pip[@]}" uninstall -y tensorflow-cpu
    "${pip[@]}" install --no-cache-dir "tensorflow[and-cuda]==$tf_version"
    ;;
  tpu)
    "${pip[@]}" uninstall -y tensorflow-cpu tensorboard
    "${pip[@]}" install --no-cache-dir "tensorflow-tpu==$TPU_TENSORFLOW" \
        "libtpu==$TPU_LIBTPU" "tensorboard==$TPU_TENSORBOARD"
    libtpu_so=$("$python" -c 'import libtpu; print(libtpu.get_library_path())')
    if [[ $(id -u) == 0 ]]; then
      ln -sf "$libtpu_so" /lib/libtpu.so
    fi
    ;;
esac

"${pip[@]}" check
"$python" - <<'PY'
import importlib.metadata as md
names = ("tensorflow", "tensorflow-cpu", "tensorflow-tpu", "libtpu", "keras", "tensorboard",
         "readtwice")
found = []
for name in names:
  try:
    found.append(f"{name}=={md.version(name)}")
  except md.PackageNotFoundError:
    pass
print("installed: " + " ".join(found))
PY
