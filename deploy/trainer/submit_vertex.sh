#!/usr/bin/env bash
# Submits Vertex AI custom jobs from the specs in deploy/trainer/vertex/ (docs/tpu.md,
# "Training on Cloud TPU and Vertex AI"):
#
#   export PROJECT=my-project REGION=us-central1 BUCKET=my-bucket \
#          IMAGE=us-central1-docker.pkg.dev/my-project/readtwice/trainer
#   deploy/trainer/submit_vertex.sh deploy/trainer/vertex/pretrain_tpu_v3.yaml
#   deploy/trainer/submit_vertex.sh deploy/trainer/vertex/finetune_hotpotqa_*.yaml   # the sweep
#   deploy/trainer/submit_vertex.sh --dry_run SPEC ...    # print the filled specs, submit nothing
#
# Each ${NAME} placeholder of a spec is filled from the environment by envsubst, which is given
# exactly those names (nothing else in the file is touched).  Every spec is checked before any
# is submitted: an unset or empty placeholder stops the whole batch.  One job per spec, named
# readtwice-<spec name>-<time>, in $REGION of $PROJECT.
set -euo pipefail

die() { echo "error: $*" >&2; exit 2; }

dry_run=0
if [[ ${1:-} == --dry_run ]]; then
  dry_run=1
  shift
fi
(( $# )) || die "usage: $0 [--dry_run] SPEC.yaml [SPEC.yaml ...]"
command -v envsubst > /dev/null \
    || die "envsubst not found (Debian/Ubuntu: apt-get install gettext-base)"
if (( ! dry_run )); then
  [[ -n ${PROJECT:-} && -n ${REGION:-} ]] || die "set PROJECT and REGION"
  command -v gcloud > /dev/null || die "gcloud not found (Google Cloud CLI)"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
filled=()
for spec in "$@"; do
  [[ -f $spec ]] || die "no such spec: $spec"
  names=$(grep -o '\${[A-Za-z_][A-Za-z0-9_]*}' "$spec" | sort -u | tr '\n' ' ' || true)
  for name in $names; do
    var=${name:2:${#name}-3}
    [[ -n ${!var:-} ]] || die "$spec needs $var (docs/tpu.md, \"Training on Cloud TPU and Vertex AI\")"
  done
  out="$tmp/$(basename "$spec")"
  envsubst "$names" < "$spec" > "$out"
  filled+=("$out")
done

stamp=$(date +%Y%m%d-%H%M%S)
for out in "${filled[@]}"; do
  if (( dry_run )); then
    echo "# --- $(basename "$out")"
    cat "$out"
  else
    name="readtwice-$(basename "$out" .yaml)-$stamp"
    gcloud ai custom-jobs create --project="$PROJECT" --region="$REGION" \
        --display-name="$name" --config="$out"
  fi
done
