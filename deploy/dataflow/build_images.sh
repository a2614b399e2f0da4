#!/usr/bin/env bash
# Builds the Dataflow images of the readtwice pipelines (deploy/dataflow/Dockerfile, BuildKit):
# the worker image IMAGE:TAG, then one Flex Template launcher image IMAGE:TAG-<job> for every
# job the worker image's registry deploys (pipelines.JOBS, asked of the image just built: this
# script names no job).  With --push, pushes them all.  Cloud Build runs it
# (deploy/dataflow/cloudbuild.yaml) and so can a local Docker (docs/dataflow.md):
#
#   REVISION="$(git rev-parse HEAD)" deploy/dataflow/build_images.sh "${IMAGE}" "${TAG}" --push
#
# IMAGE: the image path without a tag (LOCATION-docker.pkg.dev/PROJECT/REPOSITORY/NAME); TAG:
# the version.  The environment passes the Dockerfile's build arguments: REVISION (the git
# revision the manifests record), SPACY_MODEL_PACKAGE and SPACY_MODEL (a trained spaCy model
# baked in); unset means empty.  Runs from any directory (the build context is the repository).
# Wrong arguments: one line on stderr, exit status 2; a failed build or push stops it (non-zero).
set -euo pipefail

prog=build_images.sh
usage="usage: deploy/dataflow/${prog} IMAGE TAG [--push]"

usage_error() {
  echo "${prog}: error: $1; ${usage}" >&2
  exit 2
}

push=0
positional=()
for arg in "$@"; do
  case "${arg}" in
    --push) push=1 ;;
    -h | --help)
      echo "${usage}  (env: REVISION, SPACY_MODEL_PACKAGE, SPACY_MODEL)"
      exit 0
      ;;
    -*) usage_error "unknown flag ${arg}" ;;
    *) positional+=("${arg}") ;;
  esac
done
if [[ ${#positional[@]} -ne 2 ]]; then
  usage_error "expected IMAGE and TAG, got ${#positional[@]} argument(s)"
fi
image=${positional[0]}
tag=${positional[1]}
if [[ -z ${image} ]]; then
  usage_error "IMAGE is empty"
fi
if [[ ${image##*/} == *:* || ${image} == *@* ]]; then
  usage_error "IMAGE '${image}' is not an image path without a tag"
fi
if [[ ! ${tag} =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]*$ ]]; then
  usage_error "TAG '${tag}' is not a Docker tag"
fi

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-1}"  # Dockerfile.dockerignore needs BuildKit

worker="${image}:${tag}"
common=(-f deploy/dataflow/Dockerfile
        --build-arg "REVISION=${REVISION:-}"
        --build-arg "SPACY_MODEL_PACKAGE=${SPACY_MODEL_PACKAGE:-}"
        --build-arg "SPACY_MODEL=${SPACY_MODEL:-}")

echo "${prog}: building the worker image ${worker}" >&2
docker build "${common[@]}" --target worker -t "${worker}" .

# The jobs: the registry inside the image just built (the same code the launchers will run).
listed=$(docker run --rm --entrypoint python "${worker}" \
  -c 'from pipelines import JOBS; print(*JOBS)')
read -r -a jobs <<<"${listed}" || true
if [[ ${#jobs[@]} -eq 0 ]]; then
  echo "${prog}: error: the worker image ${worker} deploys no job (pipelines.JOBS is empty)" >&2
  exit 1
fi
for job in "${jobs[@]}"; do
  if [[ ! ${job} =~ ^[a-z0-9_]+$ ]]; then
    echo "${prog}: error: the worker image ${worker} lists the job '${job}', not a dataset" \
      "name" >&2
    exit 1
  fi
done

for job in "${jobs[@]}"; do
  echo "${prog}: building the launcher image ${worker}-${job}" >&2
  docker build "${common[@]}" --target launcher --build-arg "JOB=${job}" \
    --build-arg "SDK_CONTAINER_IMAGE=${worker}" -t "${worker}-${job}" .
done

done_what=built
if [[ ${push} -eq 1 ]]; then
  docker push "${worker}"
  for job in "${jobs[@]}"; do
    docker push "${worker}-${job}"
  done
  done_what="built and pushed"
fi
echo "${prog}: ${done_what} ${worker} and ${#jobs[@]} launcher image(s) ${worker}-<job>," \
  "<job> in: ${jobs[*]}" >&2
