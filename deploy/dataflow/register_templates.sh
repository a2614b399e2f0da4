#!/usr/bin/env bash
# Registers one Dataflow Flex Template per job, gs://BUCKET/templates/<job>.json, pointing at the
# job's launcher image IMAGE:TAG-<job> (deploy/dataflow/build_images.sh) with the metadata that
# `python deploy/dataflow/make_templates.py --out_dir DIR` wrote: DIR/<job>.json for every job
# DIR/jobs.txt names (pipelines.JOBS; this script names no job).  Cloud Build runs it
# (deploy/dataflow/cloudbuild.yaml) and so can a local gcloud (docs/dataflow.md):
#
#   deploy/dataflow/register_templates.sh build/dataflow-templates "${BUCKET}" "${IMAGE}" \
#       "${TAG}" --project "${PROJECT}"
#
# BUCKET: a Cloud Storage bucket name (no gs://); IMAGE and TAG as for build_images.sh; any
# further arguments are passed to every `gcloud dataflow flex-template build`.  Every metadata
# file is checked before the first template is registered.  Wrong arguments or a missing file:
# one line on stderr, exit status 2; a failed gcloud stops it (non-zero).
set -euo pipefail

prog=register_templates.sh
usage="usage: deploy/dataflow/${prog} DIR BUCKET IMAGE TAG [GCLOUD_FLAG...]"

usage_error() {
  echo "${prog}: error: $1; ${usage}" >&2
  exit 2
}

if [[ $# -lt 4 ]]; then
  usage_error "expected DIR, BUCKET, IMAGE and TAG, got $# argument(s)"
fi
dir=${1%/}
bucket=$2
image=$3
tag=$4
shift 4
if [[ ! ${bucket} =~ ^[a-z0-9][a-z0-9._-]*[a-z0-9]$ ]]; then
  usage_error "BUCKET '${bucket}' is not a bucket name (no gs://, no folder)"
fi
if [[ -z ${image} || ${image##*/} == *:* || ${image} == *@* ]]; then
  usage_error "IMAGE '${image}' is not an image path without a tag"
fi
if [[ ! ${tag} =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]*$ ]]; then
  usage_error "TAG '${tag}' is not a Docker tag"
fi
if [[ ! -f ${dir}/jobs.txt ]]; then
  usage_error "${dir}/jobs.txt is missing (make_templates.py --out_dir ${dir} writes it)"
fi

jobs=()
while read -r job || [[ -n ${job} ]]; do
  if [[ -z ${job} ]]; then
    continue
  fi
  if [[ ! ${job} =~ ^[a-z0-9_]+$ ]]; then
    usage_error "${dir}/jobs.txt names '${job}', not a dataset name"
  fi
  if [[ ! -f ${dir}/${job}.json ]]; then
    usage_error "${dir}/${job}.json is missing (${dir}/jobs.txt names ${job})"
  fi
  jobs+=("${job}")
done <"${dir}/jobs.txt"
if [[ ${#jobs[@]} -eq 0 ]]; then
  usage_error "${dir}/jobs.txt names no job"
fi

for job in "${jobs[@]}"; do
  gcloud dataflow flex-template build "gs://${bucket}/templates/${job}.json" \
    --image "${image}:${tag}-${job}" --sdk-language PYTHON \
    --metadata-file "${dir}/${job}.json" ${1+"$@"}
done
echo "${prog}: registered ${#jobs[@]} template(s) gs://${bucket}/templates/<job>.json," \
  "<job> in: ${jobs[*]}" >&2
